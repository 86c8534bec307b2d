/** Bounds a store call by a deadline, whether or not the store honours its abort signal. */

export class DeadlineExceeded extends Error {
  constructor(what: string, timeoutMs: number) {
    super(`${what} took longer than ${timeoutMs} ms`);
    this.name = "DeadlineExceeded";
  }
}

/**
 * Runs `call` with a signal that aborts after `timeoutMs`, and settles by then at the latest:
 * rejected with `DeadlineExceeded` when the call has not answered.
 */
export function withDeadline<T>(
  what: string,
  timeoutMs: number,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      const error = new DeadlineExceeded(what, timeoutMs);
      controller.abort(error);
      reject(error);
    }, timeoutMs);
    const settle = <A>(fn: (a: A) => void) => (a: A) => {
      clearTimeout(timer);
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
