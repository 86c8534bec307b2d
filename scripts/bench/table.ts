/**
 * The table `npm run bench` and `npm run overload` print: one line per figure, with its value
 * (the runs it is the median of), its budget and pass or FAIL, or a suite that failed.
 */
import { formatNumber, passes, type Row } from "./suite.ts";

export interface Line {
  suite: string;
  row?: Row;
  error?: string;
}

function budgetText(row: Row): string {
  if (!row.budget) return "";
  const limit = row.budget.limit.toLocaleString("en-US", { maximumFractionDigits: 3 });
  return `${row.budget.op} ${limit} ${row.unit}`;
}

function valueText(row: Row): string {
  const value = `${formatNumber(row.value, row.digits)} ${row.unit}`;
  if (!row.runs || row.runs.length < 2) return value;
  return `${value} (runs ${row.runs.map((r) => formatNumber(r, row.digits)).join(", ")})`;
}

export function table(lines: readonly Line[]): string {
  const details = lines.some((line) => line.row?.detail !== undefined);
  const cells = lines.map((line) => {
    if (line.error !== undefined) {
      return [`${line.suite}: suite failed`, line.error, "", "FAIL", ...(details ? [""] : [])];
    }
    const row = line.row!;
    const verdict = passes(row);
    return [
      row.figure,
      valueText(row),
      budgetText(row),
      verdict === undefined ? "" : verdict ? "pass" : "FAIL",
      ...(details ? [row.detail ?? ""] : []),
    ];
  });
  const header = ["figure", "value (median)", "budget", "result", ...(details ? ["detail"] : [])];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const format = (c: string[]) => `| ${c.map((cell, i) => cell.padEnd(widths[i])).join(" | ")} |`;
  return [
    format(header),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...cells.map(format),
  ].join("\n");
}
