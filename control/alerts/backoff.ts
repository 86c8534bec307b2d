/**
 * When a failed delivery is tried again: the base delay (OCTOPROX_ALERT_RETRY_BASE_DELAY) after
 * the first failure, doubling to an hour; no try is made past a day after the delivery was owed,
 * and the delivery is given up then.
 */
import { backoffDelayMs } from "../../shared/async/retry.ts";

export const MAX_RETRY_DELAY_MS = 3_600_000;
export const GIVE_UP_AFTER_MS = 86_400_000;

/**
 * The next try's time after the `failures`-th failure in a row, or undefined when it would come
 * past the day: the delivery is given up.
 */
export function nextTryAt(
  baseDelayMs: number,
  failures: number,
  createdAtMs: number,
  nowMs: number,
): number | undefined {
  const delayMs = backoffDelayMs(failures, { initialMs: baseDelayMs, maxMs: MAX_RETRY_DELAY_MS });
  const at = nowMs + delayMs;
  return at > createdAtMs + GIVE_UP_AFTER_MS ? undefined : at;
}
