/**
 * Bytes sent or received, on stderr: a bar on a terminal, a plain line at every quarter
 * otherwise (a log keeps a few lines, not a redraw per chunk).
 */
import cliProgress from "cli-progress";
import { formatBytes, note } from "./output.ts";

export interface Progress {
  update(bytes: number): void;
  stop(): void;
}

export function byteProgress(label: string, totalBytes: number | undefined): Progress {
  if (process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar({
      format: totalBytes ? `${label} [{bar}] {percentage}% | {done} of {size}` : `${label} {done}`,
      barCompleteChar: "█",
      barIncompleteChar: "░",
      hideCursor: true,
      clearOnComplete: false,
      stream: process.stderr,
    });
    bar.start(totalBytes ?? 0, 0, { done: formatBytes(0), size: formatBytes(totalBytes) });
    return {
      update: (bytes) =>
        bar.update(totalBytes ? Math.min(bytes, totalBytes) : bytes, { done: formatBytes(bytes) }),
      stop: () => bar.stop(),
    };
  }
  let reportedQuarter = -1;
  let last = 0;
  const report = (bytes: number) => {
    if (!totalBytes) return;
    const quarter = Math.floor((Math.min(bytes, totalBytes) / totalBytes) * 4);
    if (quarter <= reportedQuarter) return;
    reportedQuarter = quarter;
    note(`${label}: ${quarter * 25}% (${formatBytes(bytes)} of ${formatBytes(totalBytes)})`);
  };
  return {
    update: (bytes) => {
      last = bytes;
      report(bytes);
    },
    stop: () => {
      if (!totalBytes) note(`${label}: ${formatBytes(last)}`);
    },
  };
}
