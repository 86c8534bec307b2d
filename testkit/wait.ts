/**
 * The test kit's one way to wait: poll a condition until it holds, with a deadline and a message
 * that says what was awaited, instead of sleeps that guess timing.
 */

export interface WaitOptions {
  /** The deadline, from the first check (10 s unless said). */
  timeoutMs?: number;
  /** Between checks (50 ms unless said). */
  intervalMs?: number;
  /** Says what was awaited, in the error when the deadline passes. */
  message?: string;
  /** Stops the wait at once, rejecting with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Polls `condition` until it answers a truthy value (answered) or the deadline passes. A check
 * that throws counts as "not yet"; the last such error is named in the timeout's message and is
 * its `cause`.
 */
export async function waitUntil<T>(
  condition: () => T | Promise<T>,
  options: WaitOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 50;
  const { signal } = options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    signal?.throwIfAborted();
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for ${options.message ?? "a condition"}${detail}`,
        { cause: lastError },
      );
    }
    await pause(Math.min(intervalMs, Math.max(0, deadline - Date.now())), signal);
  }
}

/** Resolves after `ms`, or rejects with `signal`'s reason as soon as it aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      signal?.removeEventListener("abort", aborted);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const aborted = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", aborted, { once: true });
  });
}
