/**
 * The activity pool's shape, as its users see it: the pool job (control/jobs/pool.ts) that keeps
 * a provider-API connector's pool, the fetch path that adds to it, the feed that routes its
 * available entries and the extraction that hands them out. The store (control/provider-api/pool/store.ts)
 * implements it over Redis with one Lua script per move, so no two of them can take one entry.
 *
 * An entry's life (seed 001's state machine, in our words):
 *   checking  fetched, not yet checked: never routed, never extracted;
 *   available checked; either routed (the feed carries it, gateways allocate it until its
 *             usable-until) or stock (no gateway routes it; extraction takes only these).
 *             Re-checked on the pool's cadence, the longest unchecked first;
 *   suspect   available, but its last check failed or a gateway failed to reach it: neither
 *             routed nor extracted until a check passes (back to where it was, routed or
 *             stock); `pool.remove_after_failures` failures in a row remove it;
 *   draining  past its usable-until: no new allocation anywhere, kept until its expiry so the
 *             provider handing it out again is still a duplicate;
 *   extracted handed out by the extraction API under a lease; never routed again. When the
 *             lease ends it is retired (draining: kept as a duplicate until its expiry), or,
 *             where the connector sets pool.reuse_after_release_seconds, checking again once
 *             that cool-down passed;
 *   gone      removed at its expiry, when a check fails, or with its connector.
 * A routed entry never becomes stock again: a gateway may still be using it.
 */

/** pool.remove_after_failures when the connector does not set it. */
export const DEFAULT_REMOVE_AFTER_FAILURES = 2;

export const EntryState = {
  checking: "checking",
  available: "available",
  suspect: "suspect",
  draining: "draining",
  extracted: "extracted",
} as const;
export type EntryState = (typeof EntryState)[keyof typeof EntryState];

/**
 * An entry as stored: one JSON record per entry in the connector's entries hash. Credentials
 * are sealed (control/provider-api/pool/credentials.ts), so no username or password is in Redis in clear.
 */
export interface EntryRecord {
  id: string;
  project_id: string;
  connector_id: string;
  /** Digest of the uniqueness key (scheme, host, port, username): the owners hash's field. */
  key: string;
  scheme: string;
  host: string;
  port: number;
  /** Sealed `{ username, password }`; null when the proxy takes no credentials. */
  credentials: string | null;
  country: string | null;
  carrier: string | null;
  fetched_at: number;
  /** Hard expiry (epoch ms): the entry is removed then. */
  expires_at: number;
  /** Epoch ms from which no new allocation or extraction may take it. */
  usable_until: number;
  state: EntryState;
  /** Whether the feed routes it (available entries only; a routed entry never returns to stock). */
  routed: boolean;
  /** Epoch ms of the last check that passed; null before the first. */
  checked_at: number | null;
  /** The extraction lease holding it, when extracted. */
  lease: string | null;
  /**
   * Failures in a row since its last passed check (checks, and at most one a pool run for the
   * gateways' connect failures); absent before the first.
   */
  failures?: number;
}

/** A proxy to add, as the fetch path read it from an answer (credentials in clear). */
export interface NewPoolProxy {
  /** The uniqueness key (answer.ts's `key`); digested before it reaches Redis. */
  key: string;
  scheme: string;
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  country: string | null;
  carrier?: string | null;
  expiresAtMs: number;
  usableUntilMs: number;
}

/** What one add came to (seed 001 section 5: the first source keeps a proxy). */
export interface AddResult {
  /** New entries, now checking. */
  added: number;
  /** Proxies some upstream of the project (this one or another) already holds: not touched. */
  duplicates: number;
  /** New proxies left out because the pool was at `max_size`. */
  overMax: number;
  /** Ids of the entries added. */
  ids: string[];
}

/** The pool's counts by state, exact (read from the state sets). */
export interface PoolCounts {
  checking: number;
  routed: number;
  stock: number;
  suspect: number;
  draining: number;
  extracted: number;
}

/**
 * The live entries (checking, available and suspect): what `min_size`, `target_size` and
 * `max_size` count.
 */
export const liveCount = (counts: PoolCounts) =>
  counts.checking + counts.routed + counts.stock + counts.suspect;

export interface PoolStore {
  /** Adds fresh proxies as checking; duplicates and what is past `maxSize` are only counted. */
  add(
    connector: { id: string; projectId: string },
    proxies: readonly NewPoolProxy[],
    options: { nowMs: number; maxSize: number },
  ): Promise<AddResult>;
  counts(connectorId: string): Promise<PoolCounts>;
}
