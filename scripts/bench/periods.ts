/**
 * What the suites that time a periodic producer share: this process's CPU so far, and a sleep to
 * the next period boundary (an epoch second divisible by the period), where a producer's cycle
 * lands.
 */
import { sleep } from "../../shared/async/sleep.ts";

/** CPU milliseconds this process has used so far. */
export function cpuNowMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}

/** Sleeps until just past the next epoch second divisible by `periodSeconds`. */
export async function untilBoundary(periodSeconds: number): Promise<number> {
  const periodMs = periodSeconds * 1000;
  const next = Math.ceil((Date.now() + 1) / periodMs) * periodMs;
  // A few milliseconds past the boundary, as the producer's own cycle lands there too.
  await sleep(next - Date.now() + 5);
  return next;
}
