/**
 * The kernel's events of new connections redirected to the transparent listener, as a stream:
 * `conntrack -E -e NEW`, narrowed by the kernel to the tunnel subnet's TCP redirected to the
 * listener's port, one line per connection, fed to ConntrackEvents (conntrack.ts). The program
 * runs as long as the plane is attached, supervised: an exit the plane did not ask for is logged
 * and the stream started again after a second, lookups meanwhile answered by the listing.
 */
import { sleep } from "../../shared/async/sleep.ts";
import type { Logger } from "../base/log.ts";
import type { ConntrackEvents } from "./conntrack.ts";

const RESTART_MS = 1_000;

export class ConntrackEventStream {
  readonly #events: ConntrackEvents;
  readonly #logger: Logger;
  #child: Deno.ChildProcess | undefined;
  #running: Promise<void> | undefined;
  #stopping = false;

  constructor(events: ConntrackEvents, logger: Logger) {
    this.#events = events;
    this.#logger = logger;
  }

  /** Follows the connections from `subnet` redirected to `port`; a second start replaces the first. */
  async start(subnet: string, port: number): Promise<void> {
    await this.stop();
    this.#stopping = false;
    this.#running = this.#follow(subnet, port);
  }

  async #follow(subnet: string, port: number): Promise<void> {
    while (!this.#stopping) {
      const child = new Deno.Command("conntrack", {
        args: [
          "-E",
          "-e",
          "NEW",
          "-p",
          "tcp",
          "--orig-src",
          subnet,
          "--reply-port-src",
          String(port),
        ],
        stdin: "null",
        stdout: "piped",
        stderr: "null",
      }).spawn();
      this.#child = child;
      let partial = "";
      try {
        for await (const text of child.stdout.pipeThrough(new TextDecoderStream())) {
          const lines = (partial + text).split("\n");
          partial = lines.pop() ?? "";
          for (const line of lines) this.#events.feed(line);
        }
      } catch {
        // The stream broke with the program: it is started again below.
      }
      const status = await child.status.catch(() => undefined);
      this.#child = undefined;
      if (this.#stopping) return;
      this.#logger.error("The connection events stream ended; started again", {
        exit_code: status?.code,
        retry_in_ms: RESTART_MS,
      });
      await sleep(RESTART_MS);
    }
  }

  /** Stops the program. Safe twice; never rejects. */
  async stop(): Promise<void> {
    this.#stopping = true;
    try {
      this.#child?.kill("SIGTERM");
    } catch {
      // Gone already.
    }
    await this.#running?.catch(() => undefined);
    this.#running = undefined;
  }
}
