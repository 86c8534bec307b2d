/**
 * What the overload runs and the live fuzzer watch on the process under load, sampled while the
 * load runs: whether it lives, its resident memory (VmRSS, every 250 ms), and how its liveness
 * URL answers (every second unless told).
 */
import { formatNumber, MB, residentBytes, type Row } from "./suite.ts";

export interface Watch {
  /** Resident memory at the start, its peak and its last reading, MB. */
  readonly rssMb: { start: number; peak: number; last: number };
  /** Liveness probes sent, and those not answered 200 in time. */
  readonly probes: { sent: number; failed: number };
  /** The process exited while watched. */
  readonly died: boolean;
  stop(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function watchProcess(
  pid: number,
  options: { liveUrl?: string; probeTimeoutMs?: number; probeIntervalMs?: number } = {},
): Promise<Watch> {
  const start = ((await residentBytes(pid)) ?? Number.NaN) / MB;
  const state = {
    rssMb: { start, peak: start, last: start },
    probes: { sent: 0, failed: 0 },
    died: false,
  };
  const sampler = setInterval(() => {
    if (!alive(pid)) state.died = true;
    void residentBytes(pid).then((bytes) => {
      if (bytes === undefined) return;
      state.rssMb.last = bytes / MB;
      if (state.rssMb.last > state.rssMb.peak) state.rssMb.peak = state.rssMb.last;
    });
  }, 250);
  let probing = true;
  const prober = (async () => {
    while (probing && options.liveUrl !== undefined) {
      state.probes.sent++;
      try {
        const response = await fetch(options.liveUrl, {
          signal: AbortSignal.timeout(options.probeTimeoutMs ?? 5_000),
        });
        await response.body?.cancel();
        if (response.status !== 200) state.probes.failed++;
      } catch {
        state.probes.failed++;
      }
      await new Promise((resolve) => setTimeout(resolve, options.probeIntervalMs ?? 1_000));
    }
  })();
  return {
    get rssMb() {
      return state.rssMb;
    },
    get probes() {
      return state.probes;
    },
    get died() {
      return state.died || !alive(pid);
    },
    async stop() {
      clearInterval(sampler);
      probing = false;
      await prober;
    },
  };
}

/**
 * The two rows every watched run prints: crashes and failed liveness probes (none allowed), and
 * the resident memory's peak against `rssBoundMb`. `after` ends the memory row's detail.
 */
export function watchRows(
  watch: Watch,
  label: { process: string; during: string; after?: string },
  rssBoundMb: number,
): Row[] {
  return [
    {
      figure: `${label.process}: crashed or /live failed ${label.during}`,
      value: (watch.died ? 1 : 0) + watch.probes.failed,
      unit: `of ${watch.probes.sent} probes`,
      budget: { op: "<=", limit: 0 },
    },
    {
      figure: `${label.process}: RSS peak ${label.during}`,
      value: watch.rssMb.peak,
      unit: "MB",
      digits: 0,
      budget: { op: "<=", limit: rssBoundMb },
      detail: `${formatNumber(watch.rssMb.start, 0)} MB before, ${
        formatNumber(watch.rssMb.last, 0)
      } MB ${label.after ?? "after"}`,
    },
  ];
}
