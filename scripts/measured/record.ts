/**
 * The bench's record, docs/measured/bench-latest.json: what `npm run bench` last measured, suite
 * by suite. Each suite's entry is one run of it, whole, with that run's day, machine and command,
 * so a later run of other suites leaves it as it is and a later run of the same suite replaces
 * it. The bench writes it (scripts/bench/record-run.ts) and `npm run capacity` reads it; it is
 * committed, so the figures the docs derive from are the ones measured, never typed by hand.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import * as v from "valibot";
import { ROOT } from "../gateway-command.ts";

/** The record's path from the checkout's root, as messages and docs name it. */
export const RECORD_FILE = "docs/measured/bench-latest.json";
export const RECORD_PATH = join(ROOT, RECORD_FILE);

const ABOUT = "Written by `npm run bench` (scripts/bench/record-run.ts): each suite's latest " +
  "run, with its date, machine and command. Do not edit: run the suite again.";

/** JSON has no NaN: a figure the run could not measure is null. */
const Figure = v.nullable(v.number());

const MachineSchema = v.object({
  /** The CPU's model name, as the kernel reports it. */
  cpu: v.string(),
  /** Cores the processes could use (`os.availableParallelism()`). */
  cores: v.number(),
  memoryBytes: v.number(),
  /** The distribution (os-release's PRETTY_NAME) or the OS's name. */
  os: v.string(),
  /** The kernel: type, release and architecture. */
  kernel: v.string(),
  node: v.string(),
  deno: v.string(),
});
export type Machine = v.InferOutput<typeof MachineSchema>;

const RowSchema = v.object({
  figure: v.string(),
  key: v.optional(v.string()),
  value: Figure,
  unit: v.string(),
  runs: v.optional(v.array(Figure)),
  budget: v.optional(
    v.object({ op: v.picklist([">=", ">", "<="]), limit: v.number() }),
  ),
  result: v.optional(v.picklist(["pass", "fail"])),
  detail: v.optional(v.string()),
  facts: v.optional(v.record(v.string(), Figure)),
});
export type RecordedRow = v.InferOutput<typeof RowSchema>;

const EntrySchema = v.object({
  /** When the suite's run ended, ISO 8601 in UTC. */
  date: v.string(),
  /** The command that ran it, `BENCH_*` variables included, as it can be run again. */
  command: v.string(),
  /** The `BENCH_*` variables that were set: they change what a suite measures. */
  settings: v.record(v.string(), v.string()),
  /** Runs per figure (`--runs`). */
  runs: v.number(),
  /** The suite's wall time. */
  seconds: v.number(),
  /** HEAD of the checkout at the run (the tree may have held changes beside it). */
  commit: v.nullable(v.string()),
  machine: MachineSchema,
  /** The machine's load averages (1, 5, 15 minutes) as the suite began and ended. */
  loadAverage: v.object({ start: v.array(v.number()), end: v.array(v.number()) }),
  rows: v.array(RowSchema),
});
export type SuiteEntry = v.InferOutput<typeof EntrySchema>;

const RecordSchema = v.object({
  about: v.string(),
  suites: v.record(v.string(), EntrySchema),
});
export type BenchRecord = v.InferOutput<typeof RecordSchema>;

export function emptyRecord(): BenchRecord {
  return { about: ABOUT, suites: {} };
}

/** The record in `text`; throws with the first thing wrong in it. */
export function parseRecord(text: string, path = RECORD_FILE): BenchRecord {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${path} is not JSON: ${(error as Error).message}`);
  }
  const result = v.safeParse(RecordSchema, json);
  if (!result.success) {
    const issue = result.issues[0];
    const where = issue.path?.map((item) => String(item.key)).join(".") ?? "";
    throw new Error(`${path}${where ? ` at ${where}` : ""}: ${issue.message}`);
  }
  return result.output;
}

/** The record at `path`; an empty one when there is no file yet. */
export async function readRecord(path = RECORD_PATH): Promise<BenchRecord> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return emptyRecord();
    throw error;
  }
  return parseRecord(text, path);
}

/** `record` with `name`'s entry replaced by `entry` (suites in name order, for quiet diffs). */
export function withSuite(record: BenchRecord, name: string, entry: SuiteEntry): BenchRecord {
  const suites = { ...record.suites, [name]: entry };
  const sorted: Record<string, SuiteEntry> = {};
  for (const key of Object.keys(suites).sort()) sorted[key] = suites[key];
  return { about: ABOUT, suites: sorted };
}

/** The file's text: two-space JSON, as `deno fmt` leaves it. */
export function recordText(record: BenchRecord): string {
  return `${JSON.stringify(record, null, 2)}\n`;
}

/** Writes `record` whole, through a temporary file, so a reader never sees half of it. */
export async function writeRecord(record: BenchRecord, path = RECORD_PATH): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, recordText(record));
  await rename(temporary, path);
}

/** A suite's row by its key, when the entry has one with a measured value. */
export function rowOf(entry: SuiteEntry | undefined, key: string): RecordedRow | undefined {
  const row = entry?.rows.find((r) => r.key === key);
  return row && row.value !== null ? row : undefined;
}
