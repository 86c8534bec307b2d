/**
 * Abort helpers: one signal for several, and a wait on a promise that an abort ends.
 *
 * Web-standard: AbortSignal and promises only, so Deno and Node both run it.
 */

/**
 * A signal that aborts when any of `signals` does, with that one's reason (AbortSignal.any);
 * the undefined ones are left out. Never aborts when none is given.
 */
export function anySignal(signals: readonly (AbortSignal | undefined)[]): AbortSignal {
  const given = signals.filter((signal): signal is AbortSignal => signal !== undefined);
  if (given.length === 1) return given[0];
  return AbortSignal.any(given);
}

/**
 * `pending`, or a rejection with `signal.reason` once `signal` aborts, whichever comes first:
 * a command queued on a client that never reconnects would otherwise hold its caller for ever.
 * What `pending` comes to after the abort is left to settle on its own (a late rejection is
 * swallowed, never unhandled).
 */
export function abortable<T>(pending: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return pending;
  if (signal.aborted) {
    pending.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      pending.catch(() => {});
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    pending.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** True for what an abort rejects with when its controller gave no reason. */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}
