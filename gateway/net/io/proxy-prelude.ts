/**
 * The PROXY protocol at the socket edge: what a connection sends before its own protocol. A
 * balancer listed in OCTOPROX_TRUSTED_PROXIES may send a PROXY header (v1 or v2,
 * shared/proxy-protocol/proxy-header.ts) naming the client, whose address then replaces the
 * peer's for admission; a trusted peer that sends none (a health check, say) is its own
 * client. A header from any other peer, or a malformed one, is refused: the HTTP listener
 * answers 400 and closes, the SOCKS5 one closes without a reply.
 *
 * Each session reads its first bytes through `readPrelude`, into its own buffer, and goes on
 * with what follows the header: a connection without one costs no read more than before.
 */
import { BoundedMap } from "../../../shared/bounded-map.ts";
import { CidrSet } from "../../../shared/net/cidr-set.ts";
import type { IpAddress } from "../../../shared/net/ip.ts";
import {
  ProxyHeaderError,
  ProxyHeaderKind,
  readProxyHeader,
  startsProxyHeader,
} from "../../../shared/proxy-protocol/proxy-header.ts";
import type { ClientAddress } from "../../base/admission.ts";
import type { Logger } from "../../base/log.ts";
import type { Leg } from "./leg.ts";

export type Prelude =
  /** The client left (or the read failed) before its first bytes could be read. */
  | { readonly kind: "closed" }
  /** A header the listener does not take: `reason` for the client's 400 and the log. */
  | { readonly kind: "refused"; readonly reason: string }
  /**
   * The connection's own protocol starts at `buffer[start]`, `end` bytes read so far;
   * `client`: the address a trusted header named (undefined: the peer is the client).
   */
  | {
    readonly kind: "ready";
    readonly client: ClientAddress | undefined;
    readonly start: number;
    readonly end: number;
  };

const CLOSED: Prelude = Object.freeze({ kind: "closed" });
export const UNTRUSTED_HEADER = "PROXY protocol header from an address not trusted to send one";
/** Peers whose refused headers were logged; one line each (a balancer not listed sends many). */
const MAX_LOGGED_PEERS = 1024;

/** Who may send a PROXY header: one per listener, shared by its sessions. */
export class ProxyHeaderPolicy {
  readonly #trusted: CidrSet;
  readonly #logger: Logger;
  readonly #logged = new BoundedMap<string, true>(MAX_LOGGED_PEERS);

  /** `trusted`: blocks as OCTOPROX_TRUSTED_PROXIES lists them (checked by the settings). */
  constructor(trusted: readonly string[], logger: Logger) {
    this.#trusted = CidrSet.parse(trusted);
    this.#logger = logger;
  }

  /** Whether a peer (its address as rules compare it) may send a header. */
  trusts(peer: IpAddress | undefined): boolean {
    return peer !== undefined && this.#trusted.size > 0 && this.#trusted.has(peer);
  }

  /** A header was refused: logged once per peer (until many peers were). */
  refused(peer: string, reason: string): void {
    if (this.#logged.get(peer) !== undefined) return;
    this.#logged.set(peer, true);
    this.#logger.warn("PROXY protocol header refused", { peer, reason });
  }
}

/**
 * Reads the connection's first bytes into `buffer` until it is clear whether they begin a
 * PROXY header; takes the header from a trusted peer, refuses one from anyone else.
 */
export async function readPrelude(
  leg: Leg,
  buffer: Uint8Array,
  trusted: boolean,
): Promise<Prelude> {
  let end = 0;
  for (;;) {
    const bytes = buffer.subarray(0, end);
    const starts = startsProxyHeader(bytes);
    if (starts === false) return { kind: "ready", client: undefined, start: 0, end };
    if (starts === true && !trusted) return { kind: "refused", reason: UNTRUSTED_HEADER };
    if (starts === true) {
      let read;
      try {
        read = readProxyHeader(bytes);
      } catch (error) {
        if (error instanceof ProxyHeaderError) return { kind: "refused", reason: error.message };
        throw error;
      }
      if (read.kind === ProxyHeaderKind.local) {
        return { kind: "ready", client: undefined, start: read.consumed, end };
      }
      if (read.kind === ProxyHeaderKind.proxied) {
        const client = { hostname: read.source.address, port: read.source.port };
        return { kind: "ready", client, start: read.consumed, end };
      }
    }
    // The parser bounds a header below every session's buffer; this is a guard, not a case.
    if (end === buffer.length) return { kind: "refused", reason: "PROXY protocol header too long" };
    let count: number | null;
    try {
      count = await leg.read(buffer.subarray(end));
    } catch {
      return CLOSED;
    }
    if (count === null) return CLOSED;
    end += count;
  }
}
