/**
 * The activity pool over Redis (the contract is control/provider-api/pool/contract.ts): one Lua script per
 * move (shared/lua/pool_*.lua), so an add, a check result, a maintenance pass or an extraction
 * never interleave on one entry. Records are JSON in the connector's entries hash, credentials
 * sealed and uniqueness keys digested by the install's `CredentialSealer`.
 */
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import { runScript } from "../../core/scripts.ts";
import {
  type AddResult,
  DEFAULT_REMOVE_AFTER_FAILURES,
  type EntryRecord,
  EntryState,
  type NewPoolProxy,
  type PoolCounts,
  type PoolStore,
} from "./contract.ts";
import { CredentialSealer, type PoolCredentials } from "./credentials.ts";

export interface PoolConnectorRef {
  id: string;
  projectId: string;
}

export interface CheckResult {
  id: string;
  passed: boolean;
}

export interface CheckedResult {
  /** Checking entries that passed, by where they went. */
  routed: number;
  stocked: number;
  /** Available entries that passed a re-check. */
  rechecked: number;
  drained: number;
  removed: number;
  skipped: number;
  /** Available entries made suspect by a failed re-check. */
  suspected: number;
  /** Suspects that passed, and those of them back in the feed. */
  restored: number;
  restoredRouted: number;
}

export interface EvidenceResult {
  /** Available entries made suspect, and those of them the feed carried. */
  suspected: number;
  suspectedRouted: number;
  /** Entry ids the gateways named (any state). */
  named: number;
}

/** An entry's check options: the gateway reserve, and the failures in a row that remove it. */
export interface CheckOptions {
  nowMs: number;
  reserve: number | null;
  /** pool.remove_after_failures (its default when absent). */
  removeAfterFailures?: number;
}

const NO_CHECKS: CheckedResult = {
  routed: 0,
  stocked: 0,
  rechecked: 0,
  drained: 0,
  removed: 0,
  skipped: 0,
  suspected: 0,
  restored: 0,
  restoredRouted: 0,
};

export interface MaintainResult {
  expired: number;
  drained: number;
  promoted: number;
  counts: PoolCounts;
  /** Expired entries remain beyond this pass's bound. */
  more: boolean;
}

/** Entries removed by one maintenance pass at most: a pass holds Redis for a bounded time. */
export const MAX_REMOVALS_PER_PASS = 5000;

/** The reserve as the scripts take it: -1 for "every available entry is routed". */
const reserveArg = (reserve: number | null) => reserve === null ? -1 : reserve;

const numbers = (reply: unknown): number[] => (reply as (number | string)[]).map(Number);

export interface RedisPoolStoreOptions {
  redis: Redis;
  keys: RedisKeys;
  sealer: CredentialSealer;
}

export class RedisPoolStore implements PoolStore {
  readonly #redis: Redis;
  readonly #keys: RedisKeys;
  readonly #sealer: CredentialSealer;

  constructor(options: RedisPoolStoreOptions) {
    this.#redis = options.redis;
    this.#keys = options.keys;
    this.#sealer = options.sealer;
  }

  /** The sealer, for callers that open an entry's credentials. */
  get sealer(): CredentialSealer {
    return this.#sealer;
  }

  async add(
    connector: PoolConnectorRef,
    proxies: readonly NewPoolProxy[],
    options: { nowMs: number; maxSize: number },
  ): Promise<AddResult> {
    if (proxies.length === 0) return { added: 0, duplicates: 0, overMax: 0, ids: [] };
    const items: [string, string, string, string][] = [];
    for (const proxy of proxies) {
      const id = randomUUID();
      const key = this.#sealer.keyDigest(proxy.key);
      const record: EntryRecord = {
        id,
        project_id: connector.projectId,
        connector_id: connector.id,
        key,
        scheme: proxy.scheme,
        host: proxy.host,
        port: proxy.port,
        credentials: this.#sealer.seal(id, { username: proxy.username, password: proxy.password }),
        country: proxy.country,
        carrier: proxy.carrier ?? null,
        fetched_at: options.nowMs,
        expires_at: proxy.expiresAtMs,
        usable_until: proxy.usableUntilMs,
        state: EntryState.checking,
        routed: false,
        checked_at: null,
        lease: null,
      };
      items.push([id, key, String(proxy.expiresAtMs), JSON.stringify(record)]);
    }
    const k = this.#keys;
    const reply = await runScript(this.#redis, "pool_add", [
      k.poolEntries(connector.id),
      k.poolChecking(connector.id),
      k.poolExpiry(connector.id),
      k.poolOwners,
      k.poolRouted(connector.id),
      k.poolStock(connector.id),
      k.poolSuspect(connector.id),
    ], [options.nowMs, options.maxSize, connector.id, JSON.stringify(items)]) as (
      | number
      | string
    )[];
    return {
      added: Number(reply[0]),
      duplicates: Number(reply[1]),
      overMax: Number(reply[2]),
      ids: reply.slice(3).map(String),
    };
  }

  /**
   * Applies check results (control/provider-api/pool/contract.ts has the moves): a new entry
   * that passed becomes available (routed up to the reserve), one that failed leaves; an
   * available one that failed turns suspect, a suspect that passed is restored.
   */
  async markChecked(
    connector: PoolConnectorRef,
    results: readonly CheckResult[],
    options: CheckOptions,
  ): Promise<CheckedResult> {
    if (results.length === 0) return { ...NO_CHECKS };
    const args: (string | number)[] = [
      options.nowMs,
      reserveArg(options.reserve),
      options.removeAfterFailures ?? DEFAULT_REMOVE_AFTER_FAILURES,
    ];
    for (const result of results) args.push(result.id, result.passed ? 1 : 0);
    const k = this.#keys;
    const c = connector.id;
    const [
      routed,
      stocked,
      rechecked,
      drained,
      removed,
      skipped,
      suspected,
      restored,
      restoredRouted,
    ] = numbers(
      await runScript(this.#redis, "pool_checked", [
        k.poolEntries(c),
        k.poolChecking(c),
        k.poolRouted(c),
        k.poolStock(c),
        k.poolExpiry(c),
        k.poolOwners,
        k.poolSuspect(c),
        k.poolChecked(c),
      ], args),
    );
    return {
      routed,
      stocked,
      rechecked,
      drained,
      removed,
      skipped,
      suspected,
      restored,
      restoredRouted,
    };
  }

  /**
   * Takes the gateways' connect failures through the pool's proxies: each available entry they
   * name turns suspect (a failure of its own, never its removal: only a check removes).
   */
  async takeEvidence(
    connector: PoolConnectorRef,
    options: { removeAfterFailures: number },
  ): Promise<EvidenceResult> {
    const k = this.#keys;
    const c = connector.id;
    const [suspected, suspectedRouted, named] = numbers(
      await runScript(this.#redis, "pool_evidence", [
        k.poolEntries(c),
        k.poolEvidence(c),
        k.poolRouted(c),
        k.poolStock(c),
        k.poolSuspect(c),
        k.poolChecked(c),
      ], [options.removeAfterFailures]),
    );
    return { suspected, suspectedRouted, named };
  }

  /** One maintenance pass: expiries, drains, promotion of stock to the gateway reserve. */
  async maintain(
    connector: PoolConnectorRef,
    options: { nowMs: number; reserve: number | null; maxRemovals?: number },
  ): Promise<MaintainResult> {
    const k = this.#keys;
    const c = connector.id;
    const [
      expired,
      drained,
      promoted,
      checking,
      routed,
      stock,
      extracted,
      draining,
      more,
      suspect,
    ] = numbers(
      await runScript(this.#redis, "pool_maintain", [
        k.poolEntries(c),
        k.poolChecking(c),
        k.poolRouted(c),
        k.poolStock(c),
        k.poolExtracted(c),
        k.poolExpiry(c),
        k.poolOwners,
        k.poolSuspect(c),
        k.poolChecked(c),
      ], [
        options.nowMs,
        reserveArg(options.reserve),
        options.maxRemovals ?? MAX_REMOVALS_PER_PASS,
      ]),
    );
    return {
      expired,
      drained,
      promoted,
      counts: { checking, routed, stock, suspect, extracted, draining },
      more: more === 1,
    };
  }

  async counts(connectorId: string): Promise<PoolCounts> {
    const k = this.#keys;
    const replies = await this.#redis.multi()
      .zcard(k.poolChecking(connectorId))
      .zcard(k.poolRouted(connectorId))
      .zcard(k.poolStock(connectorId))
      .zcard(k.poolExtracted(connectorId))
      .zcard(k.poolSuspect(connectorId))
      .hlen(k.poolEntries(connectorId))
      .exec();
    const [checking, routed, stock, extracted, suspect, all] = (replies ?? []).map(
      ([error, value]) => {
        if (error) throw error;
        return Number(value);
      },
    );
    return {
      checking,
      routed,
      stock,
      suspect,
      extracted,
      draining: Math.max(0, all - checking - routed - stock - extracted - suspect),
    };
  }

  /**
   * The entries due a check at `nowMs`, oldest first: new ones (scored by their fetch) and those
   * a released lease gave back once their cool-down passed (scored by when it ends).
   */
  async checkingIds(connectorId: string, limit: number, nowMs: number): Promise<string[]> {
    return await this.#redis.zrangebyscore(
      this.#keys.poolChecking(connectorId),
      "-inf",
      nowMs,
      "LIMIT",
      0,
      limit,
    );
  }

  /** Available entries (routed and stock) still usable after `afterMs`. */
  async usableCount(connectorId: string, afterMs: number): Promise<number> {
    const k = this.#keys;
    const replies = await this.#redis.multi()
      .zcount(k.poolRouted(connectorId), `(${afterMs}`, "+inf")
      .zcount(k.poolStock(connectorId), `(${afterMs}`, "+inf")
      .exec();
    return (replies ?? []).reduce((sum, [error, value]) => {
      if (error) throw error;
      return sum + Number(value);
    }, 0);
  }

  /**
   * What the gateways hold through the pool's proxies now: the sum of the gateways' reports
   * (gateway/metering/pool-holds.ts) written since `freshAfterMs`; an older one is a gateway
   * gone or cut off, and counts nothing.
   */
  async heldByGateways(connectorId: string, freshAfterMs: number): Promise<number> {
    const reports = await this.#redis.hgetall(this.#keys.poolHeld(connectorId));
    let held = 0;
    for (const report of Object.values(reports)) {
      const [count, at] = report.split(":").map(Number);
      if (Number.isFinite(count) && Number.isFinite(at) && at >= freshAfterMs) held += count;
    }
    return held;
  }

  /** The suspect entries, soonest unusable first, at most `limit`. */
  async suspects(connectorId: string, limit: number): Promise<EntryRecord[]> {
    if (limit <= 0) return [];
    const ids = await this.#redis.zrange(
      this.#keys.poolSuspect(connectorId),
      "0",
      String(limit - 1),
    );
    return (await this.entries(connectorId, ids)).filter((e) => e.state === EntryState.suspect);
  }

  /**
   * Available entries (routed or stock) whose last passed check is before `checkedBeforeMs`,
   * the longest unchecked first, at most `limit`. The checked index is kept lazily: ids whose
   * entry is no longer available (extracted, drained, gone) are dropped from it here.
   */
  async dueRechecks(
    connectorId: string,
    checkedBeforeMs: number,
    limit: number,
  ): Promise<EntryRecord[]> {
    if (limit <= 0) return [];
    const key = this.#keys.poolChecked(connectorId);
    const due: EntryRecord[] = [];
    // A bounded number of reads: each drops the stale ids it found, so the next finds fewer.
    for (let round = 0; round < 4 && due.length < limit; round++) {
      const ids = await this.#redis.zrangebyscore(
        key,
        "-inf",
        `(${checkedBeforeMs}`,
        "LIMIT",
        // The ones taken stay in the index ahead of the rest; the stale ones left it.
        due.length,
        limit - due.length,
      );
      if (ids.length === 0) break;
      const records = new Map(
        (await this.entries(connectorId, ids)).map((entry) => [entry.id, entry]),
      );
      const stale = ids.filter((id) => records.get(id)?.state !== EntryState.available);
      for (const id of ids) {
        const entry = records.get(id);
        if (entry?.state === EntryState.available) due.push(entry);
      }
      if (stale.length === 0) break;
      await this.#redis.zrem(key, ...stale);
    }
    return due;
  }

  /** The records of `ids` that still exist, in order. */
  async entries(connectorId: string, ids: readonly string[]): Promise<EntryRecord[]> {
    if (ids.length === 0) return [];
    const raws = await this.#redis.hmget(this.#keys.poolEntries(connectorId), ...ids);
    const out: EntryRecord[] = [];
    for (const raw of raws) if (raw !== null) out.push(JSON.parse(raw) as EntryRecord);
    return out;
  }

  /**
   * The routed entries still usable at `nowMs`, by fetch time then id: what the feed carries.
   * Stable order, so an unchanged pool publishes the same section.
   */
  async routed(connectorId: string, nowMs: number): Promise<EntryRecord[]> {
    const ids = await this.#redis.zrangebyscore(
      this.#keys.poolRouted(connectorId),
      `(${nowMs}`,
      "+inf",
    );
    const entries = await this.entries(connectorId, ids);
    return entries.sort((a, b) =>
      a.fetched_at - b.fetched_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
    );
  }

  /** An entry's credentials in clear. */
  credentials(entry: EntryRecord): PoolCredentials {
    return this.#sealer.open(entry.id, entry.credentials);
  }

  /**
   * Empties the pool of a connector that is gone: its project is read off one of its entries
   * (an empty pool has nothing to give up). Answers the entries it held.
   */
  async purgeConnector(connectorId: string): Promise<number> {
    const entries = this.#keys.poolEntries(connectorId);
    const [field] = await this.#redis.hrandfield(entries, 1) as string[];
    if (field === undefined) {
      // No entries: only fetch bookkeeping may remain.
      await this.#redis.del(
        this.#keys.poolChecking(connectorId),
        this.#keys.poolRouted(connectorId),
        this.#keys.poolStock(connectorId),
        this.#keys.poolExtracted(connectorId),
        this.#keys.poolSuspect(connectorId),
        this.#keys.poolChecked(connectorId),
        this.#keys.poolEvidence(connectorId),
        this.#keys.poolHeld(connectorId),
        this.#keys.poolExpiry(connectorId),
        this.#keys.poolFetch(connectorId),
        this.#keys.poolPermits(connectorId),
        this.#keys.poolLeader(connectorId),
        this.#keys.poolLastKnown(connectorId),
      );
      return 0;
    }
    const [record] = await this.entries(connectorId, [field]);
    if (record === undefined) return 0;
    return await this.purge({ id: connectorId, projectId: record.project_id });
  }

  /** Empties a connector's pool (gone, or no longer a provider-API connector). */
  async purge(connector: PoolConnectorRef): Promise<number> {
    const k = this.#keys;
    const c = connector.id;
    return Number(
      await runScript(this.#redis, "pool_purge", [
        k.poolEntries(c),
        k.poolOwners,
        k.poolChecking(c),
        k.poolRouted(c),
        k.poolStock(c),
        k.poolExtracted(c),
        k.poolSuspect(c),
        k.poolChecked(c),
        k.poolEvidence(c),
        k.poolHeld(c),
        k.poolExpiry(c),
        k.poolFetch(c),
        k.poolPermits(c),
        k.poolLeader(c),
        k.poolEpoch(c),
        k.poolLastKnown(c),
      ], [c]),
    );
  }
}

const processStores = new WeakMap<Redis, Map<string, RedisPoolStore>>();

/**
 * The process's pool store over its Redis client and key prefix, made once (the sealer's key
 * derivation is not free): what the api, the pool job and the feed use.
 */
export function poolStoreOf(
  deps: { redis: Redis; keys: RedisKeys; settings: { internalSecret: string } },
): RedisPoolStore {
  let byPrefix = processStores.get(deps.redis);
  if (byPrefix === undefined) processStores.set(deps.redis, byPrefix = new Map());
  let store = byPrefix.get(deps.keys.prefix);
  if (store === undefined) {
    store = new RedisPoolStore({
      redis: deps.redis,
      keys: deps.keys,
      sealer: new CredentialSealer(deps.settings.internalSecret),
    });
    byPrefix.set(deps.keys.prefix, store);
  }
  return store;
}
