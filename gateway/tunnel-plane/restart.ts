/**
 * How a tunnel program the gateway supervises (`wireguard-go`, the `openvpn` daemon) is started
 * again after an exit it did not ask for: 5 s after the first, doubling to at most 60 s between
 * tries, back to 5 s once it runs again.
 */
import { backoffDelayMs, type BackoffOptions } from "../../shared/async/retry.ts";

const RESTART: BackoffOptions = { initialMs: 5_000, maxMs: 60_000 };

export class RestartBackoff {
  #failures = 0;

  /** The wait before the next try. */
  get nextMs(): number {
    return backoffDelayMs(this.#failures + 1, RESTART);
  }

  /** A try is about to be waited for: the one after waits longer. */
  advance(): number {
    const ms = this.nextMs;
    this.#failures++;
    return ms;
  }

  /** The program runs again. */
  reset(): void {
    this.#failures = 0;
  }
}
