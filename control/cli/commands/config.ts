/**
 * Configuration as code: `diff`, `apply`, `export` and `reload`. A file is read here, with the
 * same parser as an api's own file (control/config/file.ts) and this machine's environment and files for its
 * `${ENV}` and `file:` references, so a secret never has to sit in the file; the API gets the
 * document with the references read. Every problem is listed with its path and line.
 */
import { readFile, writeFile } from "node:fs/promises";
import { dirname, extname, resolve } from "node:path";
import { type Command, Option } from "commander";
import { formatConfigFile, parseConfigFile } from "../../config/file.ts";
import type { ConfigInput } from "../../config/document.ts";
import type { ConfigChange } from "../../config/plan.ts";
import type { Client } from "../client.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { ApiError, CliError } from "../errors.ts";
import { emit, formatCount, line, note, pc, printJson } from "../output.ts";
import { confirm } from "../prompt.ts";

interface DiffAnswer {
  fingerprint: string;
  changes: ConfigChange[];
  unchanged: number;
}

interface FileOptions extends JsonOption {
  file: string;
  prune?: boolean;
}

/** A file read: the document for the API, and the line a path of it starts on. */
interface ReadFile {
  path: string;
  config: ConfigInput;
  lineOf(field: string): number | undefined;
}

/** How many changes of each action a person sees; `--json` has every one. */
const SHOWN_CHANGES = 100;

interface Issue {
  field: string;
  message: string;
  line?: number;
}

/** `octoprox.yaml:12: projects.0.connectors.1.weight: must be …`, one line per problem. */
export function issueLines(path: string, issues: readonly Issue[]): string[] {
  return issues.map((issue) => {
    const where = issue.line === undefined ? path : `${path}:${issue.line}`;
    return `  ${where}: ${issue.field === "" ? "" : `${issue.field}: `}${issue.message}`;
  });
}

export async function readConfig(path: string): Promise<ReadFile> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new CliError(`Cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? error}`, {
      cause: error,
    });
  }
  const read = parseConfigFile(text, { env: process.env, baseDir: dirname(resolve(path)) });
  if (!read.ok) {
    throw new CliError(
      [
        `${path} has ${read.issues.length} ${
          read.issues.length === 1 ? "problem" : "problems"
        }; nothing was sent:`,
        ...issueLines(path, read.issues),
      ].join("\n"),
    );
  }
  return { path, config: read.input, lineOf: read.lineOf };
}

/** A 422 of the API about the document: its fields are `config.<path in the file>`. */
function refusedFile(file: ReadFile, error: ApiError): CliError {
  const issues = error.issues.map((issue) => {
    const field = issue.field.replace(/^config\.?/, "");
    return { field, message: issue.message, line: file.lineOf(field) };
  });
  return new CliError(
    [
      `The API refused ${file.path} (${issues.length} ${
        issues.length === 1 ? "problem" : "problems"
      }); nothing was changed:`,
      ...issueLines(file.path, issues),
    ].join("\n"),
    { cause: error },
  );
}

async function postDocument<T>(
  client: Client,
  route: string,
  file: ReadFile,
  body: Record<string, unknown>,
): Promise<T> {
  try {
    // A document of 100,000 proxies can take the api a while: no deadline.
    return await client.request<T>("POST", route, {
      body: { config: file.config, ...body },
      untimed: true,
    });
  } catch (error) {
    if (error instanceof ApiError && error.status === 422) throw refusedFile(file, error);
    throw error;
  }
}

const SIGNS = { create: "+", update: "~", delete: "-" } as const;
const COLOURS = { create: pc.green, update: pc.yellow, delete: pc.red } as const;

/** The changes, grouped: created, changed (with their fields), deleted. */
export function changeLines(changes: readonly ConfigChange[]): string[] {
  const lines: string[] = [];
  for (const action of ["create", "update", "delete"] as const) {
    const mine = changes.filter((change) => change.action === action);
    for (const change of mine.slice(0, SHOWN_CHANGES)) {
      const fields = change.fields?.length ? ` (${change.fields.join(", ")})` : "";
      lines.push(
        COLOURS[action](`${SIGNS[action]} ${action} ${change.kind} ${change.path}${fields}`),
      );
    }
    if (mine.length > SHOWN_CHANGES) {
      lines.push(
        pc.dim(
          `  … and ${
            formatCount(mine.length - SHOWN_CHANGES)
          } more to ${action} (--json lists every one)`,
        ),
      );
    }
  }
  return lines;
}

function summary(answer: DiffAnswer): string {
  const count = (action: string) => answer.changes.filter((c) => c.action === action).length;
  return `${count("create")} to create, ${count("update")} to change, ${
    count("delete")
  } to delete, ` +
    `${formatCount(answer.unchanged)} unchanged.`;
}

function printDiff(answer: DiffAnswer, print: (text: string) => void = line): void {
  if (answer.changes.length === 0) {
    print(`No changes: ${formatCount(answer.unchanged)} unchanged.`);
    return;
  }
  for (const text of changeLines(answer.changes)) print(text);
  print(summary(answer));
}

const fileOption = () =>
  new Option("-f, --file <file>", "the configuration file (YAML or JSON)").makeOptionMandatory();
const pruneOption = () =>
  new Option("--prune", "also delete what the file does not name (kept otherwise)");

export function registerConfig(program: Command): void {
  leaf(program, "diff", "Show what applying a configuration file would change", [
    "octoprox diff -f octoprox.yaml",
    "octoprox diff -f octoprox.yaml --prune --json",
  ])
    .addOption(fileOption())
    .addOption(pruneOption())
    .action(async (options: FileOptions) => {
      const file = await readConfig(options.file);
      const client = await connect();
      const answer = await postDocument<DiffAnswer>(client, "/config/diff", file, {
        prune: Boolean(options.prune),
      });
      emit(outputOf(options), answer, () => printDiff(answer));
    });

  leaf(program, "apply", "Apply a configuration file: its diff, then the changes in one go", [
    "octoprox apply -f octoprox.yaml",
    "SHOP_PROXY_PASSWORD=… octoprox apply -f octoprox.yaml --yes",
    "octoprox apply -f octoprox.yaml --prune --yes --json",
  ])
    .addOption(fileOption())
    .addOption(pruneOption())
    .option("-y, --yes", "apply without asking")
    .addHelpText(
      "after",
      "\nThe apply carries the diff's fingerprint: if someone changed the configuration in\n" +
        "between, nothing is applied, the fresh diff is shown and the exit status is 1.\n",
    )
    .action(async (options: FileOptions & { yes?: boolean }) => {
      const output = outputOf(options);
      const file = await readConfig(options.file);
      const client = await connect();
      const prune = Boolean(options.prune);
      const diff = await postDocument<DiffAnswer>(client, "/config/diff", file, { prune });
      if (diff.changes.length === 0) {
        emit(output, { applied: false, ...diff }, () => printDiff(diff));
        return;
      }
      // The plan goes where the person reads it; with --json stdout holds only the answer.
      printDiff(diff, output.json ? note : line);
      if (!await confirm(`Apply ${diff.changes.length} changes?`, options.yes)) {
        line("Nothing applied.");
        return;
      }
      let answer: DiffAnswer;
      try {
        answer = await postDocument<DiffAnswer>(client, "/config/apply", file, {
          prune,
          base_fingerprint: diff.fingerprint,
        });
      } catch (error) {
        // A 409 with a diff: the base moved. One without (an older revision) says why itself.
        const fresh = (error instanceof ApiError && error.status === 409)
          ? (error.body as { detail?: DiffAnswer } | undefined)?.detail
          : undefined;
        if (fresh && Array.isArray(fresh.changes)) {
          if (output.json) printJson({ applied: false, conflict: true, ...fresh });
          else {
            note("The configuration changed since this diff; nothing was applied. The fresh diff:");
            printDiff(fresh, note);
          }
          throw new CliError(
            "Nothing applied: the configuration changed meanwhile. Review the fresh diff and apply again.",
            { cause: error },
          );
        }
        throw error;
      }
      emit(
        output,
        { applied: true, ...answer },
        () =>
          line(
            `${pc.green("Applied")} ${answer.changes.length} changes (fingerprint ${
              answer.fingerprint.slice(0, 12)
            }).`,
          ),
      );
    });

  leaf(program, "export", "Write the current configuration as a file (secrets left out)", [
    "octoprox export -o octoprox.yaml",
    "octoprox export --format json > octoprox.json",
  ])
    .option("-o, --output <file>", "write to this file (stdout otherwise)")
    .addOption(
      new Option("--format <format>", "yaml or json (by the file's extension, else yaml)")
        .choices(["yaml", "json"]),
    )
    .action(async (options: JsonOption & { output?: string; format?: "yaml" | "json" }) => {
      const client = await connect();
      const answer = await client.request<{ fingerprint: string; config: ConfigInput }>(
        "GET",
        "/config",
      );
      const format = options.format ??
        (options.output && extname(options.output).toLowerCase() === ".json" ? "json" : "yaml");
      const text = formatConfigFile(answer.config, format);
      if (!options.output) {
        // The file itself is the machine output; --json gives the API's answer instead.
        if (options.json) printJson(answer);
        else process.stdout.write(text);
        return;
      }
      await writeFile(options.output, text);
      const projects = answer.config.projects?.length ?? 0;
      emit(
        outputOf(options),
        { file: options.output, format, fingerprint: answer.fingerprint },
        () => line(`Wrote ${options.output} (${projects} projects, ${format}).`),
      );
    });

  leaf(program, "reload", "Make the api re-read and apply its own configuration file (admin)", [
    "octoprox reload",
  ]).action(async (options: JsonOption) => {
    const client = await connect();
    let answer: DiffAnswer & { file: string };
    try {
      answer = await client.request("POST", "/config/reload");
    } catch (error) {
      if (error instanceof ApiError && error.status === 422) {
        throw new CliError(
          [
            "The api's configuration file was refused; nothing was changed:",
            ...issueLines("the file", error.issues),
          ].join("\n"),
          { cause: error },
        );
      }
      throw error;
    }
    emit(outputOf(options), answer, () => {
      line(`Reloaded ${answer.file}.`);
      printDiff(answer);
    });
  });
}
