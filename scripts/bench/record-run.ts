/**
 * What `npm run bench` keeps of a suite's run in the bench's record (scripts/measured/record.ts):
 * its rows as measured, beside the day, the machine, the command and the `BENCH_*` variables
 * that shaped them. Written after each suite, so a later suite failing or the run being stopped
 * keeps what was measured before it; a suite that failed leaves its earlier entry alone.
 */
import { execFileSync } from "node:child_process";
import { ROOT } from "../gateway-command.ts";
import {
  type BenchRecord,
  type Machine,
  readRecord,
  type RecordedRow,
  type SuiteEntry,
  withSuite,
  writeRecord,
} from "../measured/record.ts";
import { passes, type Row } from "./suite.ts";

/** A number as the record keeps it: four decimals are well under any figure's noise. */
function stored(value: number): number | null {
  return Number.isFinite(value) ? Math.round(value * 1e4) / 1e4 : null;
}

export function recordedRow(row: Row): RecordedRow {
  const verdict = passes(row);
  return {
    figure: row.figure,
    ...(row.key === undefined ? {} : { key: row.key }),
    value: stored(row.value),
    unit: row.unit,
    ...(row.runs === undefined ? {} : { runs: row.runs.map(stored) }),
    ...(row.budget === undefined ? {} : { budget: row.budget }),
    ...(verdict === undefined ? {} : { result: verdict ? "pass" : "fail" }),
    ...(row.detail === undefined ? {} : { detail: row.detail }),
    ...(row.facts === undefined ? {} : {
      facts: Object.fromEntries(
        Object.entries(row.facts).map(([name, value]) => [name, stored(value)]),
      ),
    }),
  };
}

/** A word as a shell reads it back. */
function quoted(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** The `BENCH_*` variables of `env` that are set, by name. */
export function benchSettings(env: NodeJS.ProcessEnv): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const name of Object.keys(env).filter((n) => n.startsWith("BENCH_")).sort()) {
    if (env[name]) settings[name] = env[name];
  }
  return settings;
}

/** The command that runs the same again: the variables, then `npm run bench -- <args>`. */
export function benchCommand(args: readonly string[], settings: Record<string, string>): string {
  const variables = Object.entries(settings).map(([name, value]) => `${name}=${quoted(value)}`);
  const tail = args.length > 0 ? ` -- ${args.map(quoted).join(" ")}` : "";
  return [...variables, `npm run bench${tail}`].join(" ");
}

/** HEAD of the checkout, or null outside a git checkout. */
export function headCommit(): string | null {
  try {
    return execFileSync("git", ["rev-parse", "HEAD"], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return null;
  }
}

/** What every suite of one bench invocation shares. */
export interface Invocation {
  command: string;
  settings: Record<string, string>;
  runs: number;
  commit: string | null;
  machine: Machine;
}

export function suiteEntry(
  invocation: Invocation,
  run: { endedAt: Date; seconds: number; loadStart: number[]; loadEnd: number[]; rows: Row[] },
): SuiteEntry {
  return {
    date: run.endedAt.toISOString(),
    command: invocation.command,
    settings: invocation.settings,
    runs: invocation.runs,
    seconds: Math.round(run.seconds),
    commit: invocation.commit,
    machine: invocation.machine,
    loadAverage: {
      start: run.loadStart.map((n) => Math.round(n * 100) / 100),
      end: run.loadEnd.map((n) => Math.round(n * 100) / 100),
    },
    rows: run.rows.map(recordedRow),
  };
}

/** Puts `entry` in the record at `path` as `suite`'s, keeping every other suite's. */
export async function recordSuite(
  suite: string,
  entry: SuiteEntry,
  path?: string,
): Promise<BenchRecord> {
  const record = withSuite(await readRecord(path), suite, entry);
  await writeRecord(record, path);
  return record;
}
