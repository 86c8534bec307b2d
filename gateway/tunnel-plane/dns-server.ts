/**
 * The resolver's UDP socket (Deno's `listenDatagram`, behind `--unstable-net`, which the gateway
 * runs with). Each datagram is answered on its own, so a query waiting on Redis never holds the
 * next one up; at most `maxInFlight` wait at once, and a datagram beyond them is dropped, as a
 * busy resolver drops: the device's stub asks again.
 */
import type { FakeIpResolver } from "./resolver.ts";

/** Largest DNS message over UDP without EDNS is 512 bytes; a query is far smaller. */
const RECEIVE_BYTES = 1500;
export const MAX_IN_FLIGHT = 4096;

export interface DnsServerOptions {
  hostname: string;
  port: number;
  resolver: FakeIpResolver;
  maxInFlight?: number;
}

export class DnsServer {
  readonly #o: DnsServerOptions;
  readonly #conn: Deno.DatagramConn;
  readonly #serving: Promise<void>;
  readonly #inFlight = new Set<Promise<void>>();
  #closing: Promise<void> | undefined;
  #dropped = 0;

  /** Binds the socket and starts answering; throws when it cannot be bound. */
  constructor(options: DnsServerOptions) {
    this.#o = options;
    this.#conn = Deno.listenDatagram({
      hostname: options.hostname,
      port: options.port,
      transport: "udp",
    });
    this.#serving = this.#serve();
  }

  get addr(): Deno.NetAddr {
    return this.#conn.addr as Deno.NetAddr;
  }

  get dropped(): number {
    return this.#dropped;
  }

  async #serve(): Promise<void> {
    const buffer = new Uint8Array(RECEIVE_BYTES);
    const maxInFlight = this.#o.maxInFlight ?? MAX_IN_FLIGHT;
    for (;;) {
      let received: [Uint8Array, Deno.Addr];
      try {
        received = await this.#conn.receive(buffer);
      } catch {
        if (this.#closing !== undefined) return;
        continue; // an ICMP error from an earlier send, say: the socket serves on
      }
      if (this.#inFlight.size >= maxInFlight) {
        this.#dropped++;
        continue;
      }
      const [data, from] = received;
      const handled = this.#handle(data.slice(), from);
      this.#inFlight.add(handled);
      handled.finally(() => this.#inFlight.delete(handled));
    }
  }

  async #handle(query: Uint8Array, from: Deno.Addr): Promise<void> {
    try {
      const answer = await this.#o.resolver.answer(query);
      if (answer !== undefined && this.#closing === undefined) await this.#conn.send(answer, from);
    } catch {
      // The device asks again; a failed send is nothing to the gateway.
    }
  }

  /** Stops receiving and waits for the answers under way. Safe twice; never rejects. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      try {
        this.#conn.close();
      } catch {
        // Closed already.
      }
      await this.#serving;
      await Promise.allSettled([...this.#inFlight]);
    })();
    return this.#closing;
  }
}
