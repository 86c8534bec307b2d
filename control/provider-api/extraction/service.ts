/**
 * Exclusive extraction (the Distribution API): hands a project's proxies out to one caller each,
 * under a lease the caller renews or releases. One Lua script per move (shared/lua/extract*.lua)
 * does the work in Redis, so no two callers, no gateway and no pool job ever hold one entry at
 * once; this service chooses the connectors, words the request for the script and the answer
 * for the caller (credentials opened here, never stored in clear).
 *
 * Nothing of an extraction reaches Postgres or a log line: no address, credential, lease or
 * count per call. What is counted goes to /metrics per project (stats.ts).
 */
import { createHash, randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import {
  IdempotencyConflictError,
  NotFoundError,
  ValidationError,
} from "../../../shared/errors.ts";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import { JobKind } from "../../../shared/roles.ts";
import type { Logger } from "../../core/logging.ts";
import { redisDeadline } from "../../core/redis.ts";
import { runScript } from "../../core/scripts.ts";
import type { JobQueue } from "../../core/job-queue.ts";
import type { EntryRecord } from "../pool/contract.ts";
import type { CredentialSealer } from "../pool/credentials.ts";
import type { ConnectorCache, ProjectConnector, ProjectConnectors } from "./connectors.ts";
import { endLease, LeaseEnd, returnEndedLeases } from "./leases.ts";
import type { ExtractionStats, ExtractMode } from "./stats.ts";

/** How long an answer is kept under its Idempotency-Key. */
export const IDEMPOTENCY_TTL_MS = 3_600_000;
/** Stock entries one call looks at per connector at most (the script's time under rare filters). */
export const SCAN_LIMIT_PER_CONNECTOR = 5000;
/** A shortfall asks a pool run for the project's connectors at most this often per process. */
const SHORTFALL_ASK_EVERY_MS = 1000;
/** Extractions return ended leases, a few at a time, at most this often per process. */
const SWEEP_EVERY_MS = 1000;
const SWEEP_LIMIT = 20;

export interface ExtractRequest {
  count: number;
  /** Scheme wanted (`http`, `socks5`…); null for any. */
  protocol: string | null;
  /** ISO 3166-1 alpha-2, upper case; null for any. */
  country: string | null;
  /** Compared regardless of case; null for any. */
  carrier: string | null;
  /** Connector ids of the project to take from; null for every eligible one. */
  connectors: string[] | null;
  mode: ExtractMode;
  minRemainingTtlSeconds: number;
  /** Null: however long ago an entry was last checked. */
  maxHealthCheckAgeSeconds: number | null;
  leaseSeconds: number;
}

export interface ExtractedProxy {
  id: string;
  connector_id: string;
  scheme: string;
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  country: string | null;
  carrier: string | null;
  expires_at: string;
  usable_until: string;
}

export interface LeaseView {
  id: string;
  expires_at: string;
}

export interface ExtractAnswer {
  requested: number;
  returned: number;
  /** Null when nothing was handed out. */
  lease: LeaseView | null;
  proxies: ExtractedProxy[];
}

export interface ExtractOutcome {
  answer: ExtractAnswer;
  /** The answer stored for this Idempotency-Key, given again. */
  replayed: boolean;
}

interface StoredAnswer {
  digest: string;
  lease: string;
  lease_end: number;
  requested: number;
  records: string[];
}

export interface ExtractionServiceOptions {
  redis: Redis;
  keys: RedisKeys;
  jobs: Pick<JobQueue, "request">;
  logger: Logger;
  sealer: CredentialSealer;
  connectors: ConnectorCache;
  stats: ExtractionStats;
  /** Each Redis step's deadline (the request deadline). */
  deadlineMs: number;
  now?: () => number;
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const iso = (ms: number) => new Date(ms).toISOString();

/** What a repeat with the same Idempotency-Key must ask for again: the request, defaults applied. */
export function requestDigest(request: ExtractRequest): string {
  return sha256(JSON.stringify([
    request.count,
    request.protocol,
    request.country,
    request.carrier,
    request.connectors === null ? null : [...request.connectors].sort(),
    request.mode,
    request.minRemainingTtlSeconds,
    request.maxHealthCheckAgeSeconds,
    request.leaseSeconds,
  ]));
}

/** One call of extract.lua: its keys and arguments (the bench's bare loop makes the same). */
export function extractScriptCall(
  keys: RedisKeys,
  call: {
    projectId: string;
    from: readonly Pick<ProjectConnector, "id" | "reserve" | "reuseAfterReleaseSeconds">[];
    request: ExtractRequest;
    leaseId: string;
    nowMs: number;
    /** The digest of the caller's key and its Idempotency-Key; undefined without one. */
    idempotency: string | undefined;
  },
): { keys: string[]; args: (string | number)[] } {
  const { request, nowMs } = call;
  return {
    keys: [
      keys.extractIdempotency(call.projectId, call.idempotency ?? "-"),
      keys.extractLease(call.leaseId),
      keys.extractLeases,
      ...call.from.flatMap((c) => [
        keys.poolEntries(c.id),
        keys.poolStock(c.id),
        keys.poolRouted(c.id),
        keys.poolExtracted(c.id),
      ]),
    ],
    args: [
      nowMs,
      request.count,
      request.mode === "all_or_nothing" ? 1 : 0,
      call.leaseId,
      nowMs + request.leaseSeconds * 1000,
      call.idempotency === undefined ? 0 : IDEMPOTENCY_TTL_MS,
      requestDigest(request),
      Math.max(nowMs + 1, nowMs + request.minRemainingTtlSeconds * 1000),
      request.maxHealthCheckAgeSeconds === null
        ? -1
        : nowMs - request.maxHealthCheckAgeSeconds * 1000,
      request.protocol ?? "",
      request.country ?? "",
      request.carrier?.toLowerCase() ?? "",
      call.projectId,
      SCAN_LIMIT_PER_CONNECTOR,
      ...call.from.flatMap((c) => [
        c.id,
        c.reserve ?? 0,
        c.reuseAfterReleaseSeconds === null ? -1 : c.reuseAfterReleaseSeconds * 1000,
      ]),
    ],
  };
}

export class ExtractionService {
  readonly #o: ExtractionServiceOptions;
  readonly #now: () => number;
  readonly #askedAt = new Map<string, number>();
  #sweptAtMs = 0;

  constructor(options: ExtractionServiceOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  async extract(
    projectId: string,
    keyId: string,
    request: ExtractRequest,
    idempotencyKey: string | undefined,
  ): Promise<ExtractOutcome> {
    const { keys, stats } = this.#o;
    let project = await this.#o.connectors.get(projectId);
    const unknownIn = (list: ProjectConnectors) =>
      request.connectors?.findIndex((id) => !list.all.has(id)) ?? -1;
    // A connector the list does not hold may be newer than the list: read it again once.
    if (unknownIn(project) >= 0) project = await this.#o.connectors.reload(projectId);
    let from: readonly ProjectConnector[] = project.eligible;
    if (request.connectors !== null) {
      const unknown = unknownIn(project);
      if (unknown >= 0) {
        throw new ValidationError([{
          field: `body.connectors.${unknown}`,
          message: "is not a connector of this project",
        }]);
      }
      const wanted = new Set(request.connectors);
      from = from.filter((connector) => wanted.has(connector.id));
    }

    const nowMs = this.#now();
    // The digest is of the caller's key id and its Idempotency-Key: keys do not share answers.
    const call = extractScriptCall(keys, {
      projectId,
      from,
      request,
      leaseId: randomUUID(),
      nowMs,
      idempotency: idempotencyKey === undefined ? undefined : sha256(`${keyId}\n${idempotencyKey}`),
    });
    const reply = await this.#redis(() =>
      runScript(this.#o.redis, "extract", call.keys, call.args)
    ) as (string | number)[];

    this.#sweepNow(nowMs);
    const counts = stats.of(projectId);
    switch (reply[0]) {
      case "replay": {
        counts.replays += 1;
        const stored = JSON.parse(String(reply[1])) as StoredAnswer;
        return {
          answer: this.#answer(stored.requested, stored.lease, stored.lease_end, stored.records),
          replayed: true,
        };
      }
      case "conflict":
        counts.conflicts += 1;
        throw new IdempotencyConflictError();
      case "short":
        stats.extracted(projectId, request.mode, request.count, 0);
        this.#askPool(projectId, from);
        return { answer: this.#answer(request.count, "", 0, []), replayed: false };
      case "taken": {
        const records = reply.slice(3).map(String);
        stats.extracted(projectId, request.mode, request.count, records.length);
        if (records.length < request.count) this.#askPool(projectId, from);
        return {
          answer: this.#answer(request.count, String(reply[1]), Number(reply[2]), records),
          replayed: false,
        };
      }
      default:
        throw new Error(`Unexpected extract reply ${JSON.stringify(reply[0])}`);
    }
  }

  /** Moves an open lease's end to `leaseSeconds` from now. */
  async renew(projectId: string, leaseId: string, leaseSeconds: number): Promise<LeaseView> {
    const nowMs = this.#now();
    const endMs = nowMs + leaseSeconds * 1000;
    const { keys } = this.#o;
    const status = Number(
      await this.#redis(() =>
        runScript(this.#o.redis, "extract_renew", [
          keys.extractLease(leaseId),
          keys.extractLeases,
        ], [nowMs, leaseId, projectId, endMs])
      ),
    );
    if (status === -2) {
      throw new NotFoundError(
        "Lease",
        "This lease has ended; its proxies are no longer held",
      );
    }
    if (status !== 1) throw new NotFoundError("Lease");
    this.#o.stats.of(projectId).renewed += 1;
    return { id: leaseId, expires_at: iso(endMs) };
  }

  /**
   * Ends a lease now: its proxies retire, or go back to checking where their connector reuses
   * released proxies (and a pool run is asked for those connectors).
   */
  async release(
    projectId: string,
    leaseId: string,
  ): Promise<{ returned: number; retired: number }> {
    const ended = await this.#redis(() =>
      endLease(this.#o, leaseId, { projectId, onlyEnded: false, nowMs: this.#now() })
    );
    if (ended.outcome !== LeaseEnd.ended) throw new NotFoundError("Lease");
    this.#o.stats.of(projectId).released += 1;
    if (ended.connectorIds.length > 0) {
      await this.#o.jobs.request(JobKind.pool, ended.connectorIds);
    }
    return { returned: ended.returned, retired: ended.retired };
  }

  #answer(requested: number, leaseId: string, leaseEndMs: number, raws: readonly string[]) {
    const proxies = raws.map((raw) => this.#present(JSON.parse(raw) as EntryRecord));
    return {
      requested,
      returned: proxies.length,
      lease: proxies.length === 0 ? null : { id: leaseId, expires_at: iso(leaseEndMs) },
      proxies,
    };
  }

  #present(entry: EntryRecord): ExtractedProxy {
    const credentials = this.#o.sealer.open(entry.id, entry.credentials);
    return {
      id: entry.id,
      connector_id: entry.connector_id,
      scheme: entry.scheme,
      host: entry.host,
      port: entry.port,
      username: credentials.username,
      password: credentials.password,
      country: entry.country,
      carrier: entry.carrier,
      expires_at: iso(entry.expires_at),
      usable_until: iso(entry.usable_until),
    };
  }

  /** A shortfall: a pool run for the connectors drawn from, at most once a second per project. */
  #askPool(projectId: string, from: readonly ProjectConnector[]): void {
    if (from.length === 0) return;
    const nowMs = this.#now();
    if (nowMs - (this.#askedAt.get(projectId) ?? 0) < SHORTFALL_ASK_EVERY_MS) return;
    this.#askedAt.set(projectId, nowMs);
    // JobQueue.request logs and answers false when Redis does not take it; never throws.
    void this.#o.jobs.request(JobKind.pool, from.map((connector) => connector.id));
  }

  /** Ended leases, a few at a time, off the request's path (index_hygiene returns the rest). */
  #sweepNow(nowMs: number): void {
    if (nowMs - this.#sweptAtMs < SWEEP_EVERY_MS) return;
    this.#sweptAtMs = nowMs;
    void this.sweep(nowMs, SWEEP_LIMIT).catch((error) => {
      this.#o.logger.debug({ error: String(error) }, "Ended extraction leases not returned now");
    });
  }

  /** Returns ended leases (at most `limit`), counting them as lapsed. */
  async sweep(nowMs: number, limit: number): Promise<number> {
    const swept = await returnEndedLeases(this.#o, { nowMs, limit });
    for (const [projectId, leases] of swept.byProject) this.#o.stats.of(projectId).lapsed += leases;
    return swept.leases;
  }

  #redis<T>(step: () => Promise<T>): Promise<T> {
    return redisDeadline(this.#o.deadlineMs, step);
  }
}
