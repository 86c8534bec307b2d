/**
 * What commands print: with `--json` the answer as JSON on stdout and nothing else there; a
 * table or a list of fields for a person otherwise. Notes and progress go to stderr, so a
 * script can always read stdout.
 */
import Table from "cli-table3";
import pc from "picocolors";

export type Cell = string | number | boolean | null | undefined;

export interface Output {
  json: boolean;
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function line(text = ""): void {
  process.stdout.write(`${text}\n`);
}

/** A note for the person at the terminal (never on stdout, so `--json` stays parseable). */
export function note(text: string): void {
  process.stderr.write(`${text}\n`);
}

export function cell(value: Cell): string {
  if (value === null || value === undefined || value === "") return pc.dim("–");
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "number") return formatCount(value);
  return value;
}

export function printTable(head: string[], rows: Cell[][], empty = "Nothing to show."): void {
  if (rows.length === 0) {
    line(pc.dim(empty));
    return;
  }
  const table = new Table({
    head: head.map((title) => pc.bold(title)),
    style: { head: [], border: [] },
    // No rule between rows: a long list stays one line a row.
    chars: { mid: "", "left-mid": "", "mid-mid": "", "right-mid": "" },
    wordWrap: false,
  });
  for (const row of rows) table.push(row.map(cell));
  line(table.toString());
}

/** One entity as label: value lines. */
export function printFields(fields: [string, Cell][]): void {
  const width = Math.max(...fields.map(([label]) => label.length));
  for (const [label, value] of fields) line(`${pc.dim(label.padEnd(width))}  ${cell(value)}`);
}

/** JSON for `--json`, the person's view otherwise. */
export function emit(output: Output, value: unknown, human: () => void): void {
  if (output.json) printJson(value);
  else human();
}

export function formatCount(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return value.toLocaleString("en-US");
}

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

export function formatPercent(ratio: number | null | undefined): string {
  if (ratio === null || ratio === undefined) return "–";
  return `${(ratio * 100).toFixed(1)}%`;
}

const SPARKS = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

/**
 * A sparkline of `values` at most `width` wide: buckets are summed in groups when there are
 * more than fit. Zero stays the lowest block; the highest value the tallest.
 */
export function sparkline(values: number[], width: number): string {
  const groups = Math.max(1, Math.ceil(values.length / Math.max(1, width)));
  const summed: number[] = [];
  for (let i = 0; i < values.length; i += groups) {
    summed.push(values.slice(i, i + groups).reduce((sum, value) => sum + value, 0));
  }
  const max = Math.max(0, ...summed);
  return summed.map((value) =>
    max === 0 ? pc.dim(SPARKS[0]) : SPARKS[Math.round((value / max) * (SPARKS.length - 1))]
  ).join("");
}

export { pc };
