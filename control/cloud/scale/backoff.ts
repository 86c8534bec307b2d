/** A cloud connector's back-off after cloud errors: 2^errors minutes, up to thirty. */

export const MAX_SCALE_BACKOFF_MS = 30 * 60_000;

export function scaleBackoffMs(consecutiveErrors: number): number {
  if (consecutiveErrors <= 0) return 0;
  return Math.min(MAX_SCALE_BACKOFF_MS, 2 ** Math.min(consecutiveErrors, 16) * 60_000);
}
