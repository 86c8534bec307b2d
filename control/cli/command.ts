/**
 * What every command shares: the client for the stored or given login, `--json`, an Examples
 * section in `--help`, and `--set field=value` for any body field the API takes.
 */
import { type Command, InvalidArgumentError } from "commander";
import { Client } from "./client.ts";
import { resolveConnection } from "./config-store.ts";
import type { Output } from "./output.ts";

export async function connect(): Promise<Client> {
  return new Client(await resolveConnection());
}

export interface JsonOption {
  json?: boolean;
}

export function outputOf(options: JsonOption): Output {
  return { json: Boolean(options.json) };
}

/** A command that does something: `--json` and its examples in `--help`. */
export function leaf(
  parent: Command,
  nameAndArgs: string,
  description: string,
  examples: string[],
): Command {
  return parent
    .command(nameAndArgs)
    .description(description)
    .option("--json", "print the answer as JSON (nothing else on stdout)")
    .addHelpText("after", examplesText(examples));
}

export function examplesText(examples: string[]): string {
  return `\nExamples:\n${examples.map((example) => `  $ ${example}`).join("\n")}\n`;
}

/** A repeatable option's values, in the order given (`--allow a --allow b`). */
export function collectRepeated(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** `--set weight=2 --set countries='["de"]'`: a value that parses as JSON is that JSON. */
export function collectSet(pair: string, previous: Record<string, unknown> = {}) {
  const at = pair.indexOf("=");
  if (at <= 0) throw new InvalidArgumentError(`expected field=value, got "${pair}"`);
  const field = pair.slice(0, at);
  const text = pair.slice(at + 1);
  let value: unknown = text;
  try {
    value = JSON.parse(text);
  } catch {
    // Plain text.
  }
  return { ...previous, [field]: value };
}

export const SET_HELP = "any body field as field=value (JSON values parsed), repeatable";

export function positiveInteger(text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError("must be a whole number of at least 1");
  }
  return value;
}

export function wholeNumber(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value)) {
    throw new InvalidArgumentError("must be a whole number");
  }
  return value;
}
