/** A secret read from a file: its first line, without the line end. */
import { readFile } from "node:fs/promises";
import { CliError } from "./errors.ts";

export async function readSecretFile(path: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new CliError(`Cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`, {
      cause: error,
    });
  }
  const secret = text.split(/\r?\n/)[0];
  if (!secret) throw new CliError(`${path} is empty`);
  return secret;
}
