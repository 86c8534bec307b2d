/**
 * `sleep`: a timer as a promise, cut short by an abort signal. One semantic, as Deno's std
 * `delay` and Node's `timers/promises` have it: an abort (before or during the wait) rejects
 * with the signal's reason. A caller for whom a stop is not an error writes
 * `await sleep(ms, signal).catch(() => {})` (sleep rejects for nothing else).
 *
 * Web-standard: timers and AbortSignal only, so Deno and Node both run it.
 */

/**
 * Resolves after `ms` (a timer even for 0, so a loop around it never starves the event loop);
 * rejects with `signal.reason` on an abort.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
