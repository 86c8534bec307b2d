/**
 * Who may extract: a distribution key (control/provider-api/extraction/distribution-keys.ts) of the project in
 * the path, presented as `Authorization: Bearer oxd_…` or `X-API-Key: oxd_…`, not revoked, not
 * expired, and from an address of its `allowed_cidrs` when it lists any. Nothing else is taken
 * here (a login's JWT or an API token is a 401), and a distribution key opens no other route
 * (control/api/auth.ts refuses it).
 *
 * Postgres stays off the extraction path: a key's row, once read, is kept in the process and
 * served for KEY_FRESH_MS; past that the next request is still served from it while one read
 * refreshes it, so a revoke, a delete or a change of addresses takes effect within
 * REVOCATION_BOUND_SECONDS. While Postgres does not answer, a key read within the last
 * MAX_STALE_MS keeps working (no revoke can be written meanwhile); older ones answer 503.
 * Keys that match no row are remembered as such for the same time, so a client retrying a wrong
 * key costs one read per KEY_FRESH_MS.
 *
 * `last_used_at` is bookkeeping: written at most once a minute per key, off the request's path.
 */
import { ForbiddenError, UnauthorizedError } from "../../../shared/errors.ts";
import { CidrSet, clientIp } from "../../../shared/net/cidr-set.ts";
import { parseCidr } from "../../../shared/net/ip.ts";
import { errorText } from "../../../shared/errors.ts";
import type { Logger } from "../../core/logging.ts";
import {
  type DistributionKeyRow,
  findDistributionKey,
  hashDistributionKey,
  touchDistributionKey,
} from "./distribution-keys.ts";
import type { ServiceDeps } from "../../core/store.ts";

/** A key's row is served this long before it is read again. */
export const KEY_FRESH_MS = 4000;
/** What the docs promise: a revoked key is refused by every api process within this. */
export const REVOCATION_BOUND_SECONDS = 5;
/** While Postgres does not answer, a key read this recently keeps working. */
export const MAX_STALE_MS = 300_000;
/** Keys remembered at most (the oldest read is forgotten first). */
const MAX_CACHED_KEYS = 10_000;
const LAST_USED_RESOLUTION_MS = 60_000;
/** One warn line at most this often while refreshes fail. */
const REFRESH_WARN_EVERY_MS = 30_000;

/** A key as the process keeps it; `null` when no active key has this digest. */
interface KnownKey {
  id: string;
  projectId: string;
  expiresAtMs: number | null;
  /** Null: from any address. */
  cidrs: CidrSet | null;
}

interface CacheEntry {
  key: KnownKey | null;
  readAtMs: number;
  refreshing?: Promise<KnownKey | null>;
}

/** Who called an extraction route: the key and the project it belongs to. */
export interface DistributionCaller {
  keyId: string;
  projectId: string;
}

export interface DistributionKeysOptions {
  deps: ServiceDeps;
  logger: Logger;
  now?: () => number;
  /** KEY_FRESH_MS unless told (tests). */
  freshMs?: number;
}

function knownKey(row: DistributionKeyRow | undefined): KnownKey | null {
  if (!row || row.revokedAt !== null) return null;
  const blocks = row.allowedCidrs.flatMap((text) => {
    try {
      return [parseCidr(text)];
    } catch {
      return []; // the api validated every block; a bad one lets no address in
    }
  });
  return {
    id: row.id,
    projectId: row.projectId,
    expiresAtMs: row.expiresAt?.getTime() ?? null,
    cidrs: row.allowedCidrs.length === 0 ? null : new CidrSet(blocks),
  };
}

export class DistributionKeys {
  readonly #deps: ServiceDeps;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #freshMs: number;
  /** By the key's SHA-256. */
  readonly #cache = new Map<string, CacheEntry>();
  /** When each key's last_used_at was last written (or read as written), by key id. */
  readonly #touched = new Map<string, number>();
  #warnedAtMs = 0;

  constructor(options: DistributionKeysOptions) {
    this.#deps = options.deps;
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#freshMs = options.freshMs ?? KEY_FRESH_MS;
  }

  /**
   * The caller of an extraction route of `projectId`: 401 without a valid distribution key,
   * 403 for another project's key or an address outside the key's blocks.
   */
  async authenticate(
    presented: string,
    callerAddress: string | null,
    projectId: string,
  ): Promise<DistributionCaller> {
    const hash = hashDistributionKey(presented);
    const key = await this.#lookup(hash);
    const nowMs = this.#now();
    if (key === null || (key.expiresAtMs !== null && key.expiresAtMs <= nowMs)) {
      throw new UnauthorizedError("Invalid, expired or revoked distribution key");
    }
    // Whether or not that project exists: the answer tells nothing of other projects.
    if (key.projectId !== projectId) {
      throw new ForbiddenError("This distribution key is another project's");
    }
    if (key.cidrs !== null) {
      const ip = callerAddress === null ? undefined : clientIp(callerAddress);
      if (ip === undefined || !key.cidrs.has(ip)) {
        throw new ForbiddenError("This distribution key is not taken from your address");
      }
    }
    this.#touch(key.id, nowMs);
    return { keyId: key.id, projectId: key.projectId };
  }

  async #lookup(hash: string): Promise<KnownKey | null> {
    const entry = this.#cache.get(hash);
    const ageMs = entry === undefined ? Infinity : this.#now() - entry.readAtMs;
    if (entry !== undefined && ageMs < this.#freshMs) return entry.key;
    if (entry !== undefined && ageMs < MAX_STALE_MS) {
      // Served as read while one read refreshes it: the request never waits on Postgres.
      void this.#refresh(hash, entry).catch((error) => this.#warn(error));
      return entry.key;
    }
    return await this.#refresh(hash, entry);
  }

  #refresh(hash: string, entry: CacheEntry | undefined): Promise<KnownKey | null> {
    if (entry?.refreshing) return entry.refreshing;
    const refreshing = (async () => {
      try {
        const row = await findDistributionKey(this.#deps, hash);
        const key = knownKey(row);
        if (row?.lastUsedAt && key !== null && !this.#touched.has(key.id)) {
          this.#touched.set(key.id, row.lastUsedAt.getTime());
        }
        // Delete first, so the map's order is the order of reads and the oldest goes first.
        this.#cache.delete(hash);
        if (this.#cache.size >= MAX_CACHED_KEYS) {
          this.#cache.delete(this.#cache.keys().next().value as string);
        }
        this.#cache.set(hash, { key, readAtMs: this.#now() });
        return key;
      } finally {
        if (entry) entry.refreshing = undefined;
      }
    })();
    if (entry) entry.refreshing = refreshing;
    return refreshing;
  }

  #touch(keyId: string, nowMs: number): void {
    const last = this.#touched.get(keyId) ?? 0;
    if (nowMs - last < LAST_USED_RESOLUTION_MS) return;
    this.#touched.set(keyId, nowMs);
    void touchDistributionKey(this.#deps, keyId).catch((error) => {
      this.#logger.debug(
        { key: keyId, error: errorText(error) },
        "A distribution key's last use was not written; the next use writes it",
      );
    });
  }

  #warn(error: unknown): void {
    const nowMs = this.#now();
    if (nowMs - this.#warnedAtMs < REFRESH_WARN_EVERY_MS) return;
    this.#warnedAtMs = nowMs;
    this.#logger.warn(
      { error: errorText(error) },
      "Distribution keys not read again; serving what was read last",
    );
  }
}
