/**
 * `withDeadline`: bounds a call by a deadline, whether or not the call honours its abort signal.
 * The one deadline of the code base; a store's wrapper (control/core/redis.ts) maps it to its
 * own error with this one as the `cause`.
 *
 * Web-standard: timers and AbortSignal only, so Deno and Node both run it.
 */
import { DeadlineError } from "../errors.ts";

export { DeadlineError };

export interface DeadlineOptions {
  /** A caller's own signal: its abort ends the wait too, rejecting with its reason. */
  signal?: AbortSignal;
}

/**
 * Runs `call` with a signal that aborts after `timeoutMs` (or when `options.signal` does), and
 * settles by then at the latest: rejected with a `DeadlineError` naming `what` when the call has
 * not answered. What the call comes to afterwards is dropped (a late rejection is swallowed).
 */
export function withDeadline<T>(
  what: string,
  timeoutMs: number,
  call: (signal: AbortSignal) => Promise<T>,
  options: DeadlineOptions = {},
): Promise<T> {
  const outer = options.signal;
  if (outer?.aborted) return Promise.reject(outer.reason);
  const controller = new AbortController();
  return new Promise<T>((resolve, reject) => {
    const stop = (error: unknown) => {
      controller.abort(error);
      reject(error);
    };
    const timer = setTimeout(
      () => stop(new DeadlineError(what, timeoutMs)),
      Math.max(0, timeoutMs),
    );
    const onAbort = () => {
      clearTimeout(timer);
      stop(outer?.reason);
    };
    outer?.addEventListener("abort", onAbort, { once: true });
    const settle = <A>(fn: (a: A) => void) => (a: A) => {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
      fn(a);
    };
    let pending: Promise<T>;
    try {
      pending = call(controller.signal);
    } catch (error) {
      settle(reject)(error);
      return;
    }
    pending.then(settle(resolve), settle(reject));
  });
}
