/**
 * Retry with exponential back-off and jitter. `backoffDelayMs` is the schedule alone (the
 * `Loop` base and the feed follower wait it out between failed cycles); `retry` runs a call
 * until it succeeds, its attempts run out, it fails in a way not worth retrying, or the signal
 * aborts.
 *
 * Web-standard: timers and AbortSignal only, so Deno and Node both run it.
 */
import { sleep } from "./sleep.ts";

export interface BackoffOptions {
  /** The wait after the first failure. */
  initialMs: number;
  /** The longest wait. */
  maxMs: number;
  /** What each further failure multiplies the wait by (2). */
  factor?: number;
  /**
   * How much of each wait is random, 0 to 1 (0: none): a wait of `d` becomes one between
   * `d * (1 - jitter)` and `d`, so many callers failing together do not retry together.
   */
  jitter?: number;
  /** A number in [0, 1); `Math.random` unless a test fixes it. */
  random?: () => number;
}

/** The wait after the `failures`-th failure in a row (1 and up): the initial wait grown to the cap. */
export function backoffDelayMs(failures: number, options: BackoffOptions): number {
  const factor = options.factor ?? 2;
  const grown = options.initialMs * factor ** Math.min(Math.max(0, failures - 1), 30);
  const delayMs = Math.min(options.maxMs, grown);
  const jitter = Math.min(1, Math.max(0, options.jitter ?? 0));
  if (jitter === 0) return delayMs;
  return delayMs * (1 - jitter * (options.random ?? Math.random)());
}

export interface RetryOptions extends BackoffOptions {
  /** Attempts in all, the first included (at least 1). */
  attempts: number;
  /** Ends the retrying: the wait in hand is cut and the retry rejects with the signal's reason. */
  signal?: AbortSignal;
  /** False: the error is final, thrown at once (default: every error is retried). */
  retryable?: (error: unknown, attempt: number) => boolean;
  /** Told of each failure that is retried, with the wait before the next attempt. */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
}

/**
 * Runs `call` (given the attempt, 1 and up, and the signal) until it resolves. A failure is
 * retried after `backoffDelayMs`; the last attempt's error, or a non-retryable one, is thrown.
 */
export async function retry<T>(
  call: (attempt: number, signal: AbortSignal | undefined) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const attempts = Math.max(1, Math.floor(options.attempts));
  for (let attempt = 1;; attempt++) {
    options.signal?.throwIfAborted();
    try {
      return await call(attempt, options.signal);
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (attempt >= attempts || options.retryable?.(error, attempt) === false) throw error;
      const delayMs = backoffDelayMs(attempt, options);
      options.onRetry?.(error, attempt, delayMs);
      await sleep(delayMs, options.signal);
    }
  }
}
