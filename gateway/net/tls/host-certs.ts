/**
 * The host certificates an intercepting gateway serves: minted by the CA over its one leaf key
 * (shared/tls/ca.ts) the first time a host is asked for, kept as ready TLS contexts in a cache
 * bounded by count (least recently used go first), and minted once however many tunnels ask for
 * a new host at the same moment. A flood of distinct names costs a mint each and evicts, so
 * memory stays within the bound.
 */
import { createSecureContext, type SecureContext } from "node:tls";
import type { MitmCa } from "../../../shared/tls/ca.ts";

/** A context is reminted this long before its certificate ends (a long-running gateway). */
const RENEW_BEFORE_MS = 7 * 86_400_000;
/** ...but not more often than this, when the CA itself ends sooner (its leaves end with it). */
const RENEW_FLOOR_MS = 3_600_000;

interface Entry {
  context: SecureContext;
  renewAtMs: number;
}

export interface HostCertificateCounts {
  minted: number;
  hits: number;
  evicted: number;
  size: number;
}

export class HostCertificates {
  readonly #ca: MitmCa;
  readonly #maxSize: number;
  /** Insertion order is recency: a hit moves its entry to the end. */
  readonly #cache = new Map<string, Entry>();
  readonly #minting = new Map<string, Promise<SecureContext>>();
  minted = 0;
  hits = 0;
  evicted = 0;

  constructor(ca: MitmCa, maxSize: number) {
    this.#ca = ca;
    this.#maxSize = maxSize;
  }

  get size(): number {
    return this.#cache.size;
  }

  /** Mints now in flight (at most one per name). */
  get minting(): number {
    return this.#minting.size;
  }

  /** The context for `host` (lower case, no port): at once when cached, else once minted. */
  context(host: string): SecureContext | Promise<SecureContext> {
    const entry = this.#cache.get(host);
    if (entry !== undefined && entry.renewAtMs > Date.now()) {
      this.hits++;
      this.#cache.delete(host);
      this.#cache.set(host, entry);
      return entry.context;
    }
    let minting = this.#minting.get(host);
    if (minting === undefined) {
      minting = this.#mint(host);
      this.#minting.set(host, minting);
    }
    return minting;
  }

  async #mint(host: string): Promise<SecureContext> {
    try {
      const leaf = await this.#ca.mint(host);
      const context = createSecureContext({ cert: leaf.chainPem, key: leaf.keyPem });
      this.minted++;
      this.#cache.delete(host);
      this.#cache.set(host, {
        context,
        renewAtMs: Math.max(leaf.notAfter.getTime() - RENEW_BEFORE_MS, Date.now() + RENEW_FLOOR_MS),
      });
      while (this.#cache.size > this.#maxSize) {
        const oldest = this.#cache.keys().next().value as string;
        this.#cache.delete(oldest);
        this.evicted++;
      }
      return context;
    } finally {
      this.#minting.delete(host);
    }
  }
}
