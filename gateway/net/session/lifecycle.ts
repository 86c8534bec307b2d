/**
 * What both listeners' sessions (client-session.ts, tunnel/socks5-session.ts) share of their
 * lifecycle: a cancel that makes an AbortSignal only when something waits on one, and the end of
 * `run`, which never rejects.
 */
import type { Logger } from "../../base/log.ts";

/**
 * A session's cancel (the gateway stopping): a flag, and a signal made when first asked for (a
 * dial, an exchange) and dropped once nothing waits on it (the connection became a tunnel, whose
 * cancel closes its legs), so an idle tunnel holds none.
 */
export class SessionCancel {
  #controller: AbortController | undefined;
  #cancelled = false;

  get cancelled(): boolean {
    return this.#cancelled;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#cancelled) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  cancel(): void {
    this.#cancelled = true;
    this.#controller?.abort();
  }

  /** Nothing waits on the signal any more; a later ask makes a new one. */
  release(): void {
    this.#controller = undefined;
  }
}

/**
 * Ends a session's `run`: `close` once `served` settled, whichever way; a rejection is a bug's last
 * stop (handlers catch their own failures), logged as `what`. Never rejects.
 */
export function endOfRun(
  served: Promise<void>,
  close: () => void,
  logger: Logger,
  what: string,
): Promise<void> {
  return served.then(close, (error) => {
    logger.error(what, { error });
    close();
  });
}
