/**
 * What a benchmark suite is, and the helpers suites share: medians, a process's resident memory
 * and CPU time read from /proc, and a log line on standard error (the table goes to standard
 * output).
 */
import { readFile } from "node:fs/promises";

/** A budget a figure is held to: at least, above, or at most `limit`. */
export interface Budget {
  op: ">=" | ">" | "<=";
  limit: number;
}

/** One line of the table. A row without a budget is information and never fails. */
export interface Row {
  figure: string;
  value: number;
  unit: string;
  budget?: Budget;
  /** The runs the value is the median of, shown beside it. */
  runs?: number[];
  /** Digits after the point (default: 0 from 100 up, 1 from 10, else 2). */
  digits?: number;
  /** What goes with the figure (latencies, CPU, errors), in the table's last column. */
  detail?: string;
  /**
   * A stable name for tools that read the bench's record (`npm run capacity`): the figure's
   * text is for people and may be reworded, the key is not.
   */
  key?: string;
  /**
   * Figures measured beside the value that a tool reads from the record (a request rate, cores
   * busy), by name: the detail column holds them too, but as text.
   */
  facts?: Record<string, number>;
}

export interface SuiteContext {
  /** Runs per figure (the table shows their median); at least 3 unless asked otherwise. */
  runs: number;
  /** A progress line on standard error. */
  log(message: string): void;
}

export interface Suite {
  name: string;
  /** One line for `npm run bench -- --list`. */
  description: string;
  run(context: SuiteContext): Promise<Row[]>;
}

export function passes(row: Row): boolean | undefined {
  if (!row.budget || !Number.isFinite(row.value)) return row.budget ? false : undefined;
  switch (row.budget.op) {
    case ">=":
      return row.value >= row.budget.limit;
    case ">":
      return row.value > row.budget.limit;
    case "<=":
      return row.value <= row.budget.limit;
  }
}

/** `items` turned left by `by` places: the order the targets of a run take (it rotates per run). */
export function rotate<T>(items: readonly T[], by: number): T[] {
  const k = by % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/**
 * Two targets measured side by side: `combine` each run's pair (the same run's points of both),
 * then the median of those, so drift in the machine's load between runs touches both sides of
 * every pair alike. Runs only one side has are left out.
 */
export function pairedMedian<T>(
  ours: readonly T[],
  theirs: readonly T[],
  combine: (mine: T, other: T) => number,
): { value: number; runs: number[] } {
  const runs: number[] = [];
  for (let i = 0; i < Math.min(ours.length, theirs.length); i++) {
    runs.push(combine(ours[i], theirs[i]));
  }
  return { value: median(runs), runs };
}

/** The value below which `share` (0.99 for the p99) of the values fall. */
export function percentile(values: readonly number[], share: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(share * sorted.length) - 1))];
}

export function formatNumber(value: number, digits?: number): string {
  if (!Number.isFinite(value)) return String(value);
  const d = digits ?? (Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2);
  return value.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
}

export const MB = 1024 * 1024;

/** Linux clock ticks per second for /proc/<pid>/stat times (USER_HZ: 100 on every arch). */
const CLOCK_TICKS = 100;

/**
 * A bench setting from the environment: a positive number (an integer when `integer`), or
 * undefined when it is unset. Anything else stops the suite with a line naming the variable.
 */
export function envPositive(name: string, integer = false): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  const value = Number(raw);
  if (!(integer ? Number.isInteger(value) : Number.isFinite(value)) || value <= 0) {
    throw new Error(`${name} must be a positive ${integer ? "integer" : "number"}`);
  }
  return value;
}

/** A byte figure of /proc/<pid>/status (VmRSS, VmHWM), or undefined once the process is gone. */
async function statusBytes(pid: number, field: "VmRSS" | "VmHWM"): Promise<number | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, "m").exec(status);
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** A process's resident set (VmRSS) in bytes, or undefined once it is gone. */
export function residentBytes(pid: number): Promise<number | undefined> {
  return statusBytes(pid, "VmRSS");
}

/** A process's peak resident set (VmHWM) in bytes, or undefined once it is gone. */
export function peakBytes(pid: number): Promise<number | undefined> {
  return statusBytes(pid, "VmHWM");
}

/**
 * A process's CPU time so far (user plus system), in milliseconds, or undefined once gone; with
 * `children`, the CPU of the children it waited for too (programs it ran to their end).
 */
export async function cpuMillis(
  pid: number,
  options: { children?: boolean } = {},
): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // The command name may hold spaces and parentheses: fields count from its closing one.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime, stime (fields 14 and 15); cutime, cstime (16 and 17).
    const ticks = Number(fields[11]) + Number(fields[12]) +
      (options.children ? Number(fields[13]) + Number(fields[14]) : 0);
    return (ticks / CLOCK_TICKS) * 1000;
  } catch {
    return undefined;
  }
}

/** Total CPU milliseconds of several processes (those gone count nothing). */
export async function cpuMillisOf(pids: readonly number[]): Promise<number> {
  const times = await Promise.all(pids.map((pid) => cpuMillis(pid)));
  return times.reduce<number>((sum, t) => sum + (t ?? 0), 0);
}

/**
 * The whole machine's CPU time so far from /proc/stat, in milliseconds: busy (everything but
 * idle and iowait) and total, summed over every core.
 */
export async function machineCpuMillis(): Promise<{ busy: number; total: number }> {
  const stat = await readFile("/proc/stat", "utf8");
  const fields = stat.slice(0, stat.indexOf("\n")).trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const total = fields.slice(0, 8).reduce((sum, n) => sum + n, 0);
  const idle = fields[3] + fields[4];
  return { busy: ((total - idle) / CLOCK_TICKS) * 1000, total: (total / CLOCK_TICKS) * 1000 };
}
