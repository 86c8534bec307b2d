/**
 * The Redis side of a provider-API connector's fetch path (seed 001 section 8): who leads the
 * connector's fetches, and the bookkeeping every call goes through. Redis is the one arbiter of
 * the pacing, the calls in flight and the `max_total` ledger, across every worker; each step is
 * one Lua script, so no two workers can interleave inside it.
 *
 * - The install's pool generation (`poolGeneration`): a random id made when Redis has none, so
 *   a Redis that lost its data starts a new generation and nothing of an earlier one passes.
 * - A lead per connector (`poolLeader`, "holder|generation|epoch" with a TTL); each lead taken
 *   gets the connector's next epoch (`poolEpoch`, monotonic). The lead renews itself in the
 *   background; a renewal that fails, does not answer in time, or finds the key gone, another
 *   lead's or under another generation, aborts the lead's signal at once: never a local leader.
 * - A call's reservation (`pool_fetch_reserve.lua`), fenced by the lead: the back-off,
 *   the ledger (used + pending + this call within `max_total`; pending grows by the call's
 *   count), `max_in_flight` (a permit per call in `poolPermits`, scored by its expiry, so the
 *   permit of a worker that died mid-call lapses after the call's timeout and a margin, and is
 *   counted at its estimate) and `request_interval_ms` (from the last start, on Redis's clock).
 * - The call's settlement with its fetch's classification (`pool_fetch_settle.lua`): pending
 *   less the reservation, used plus what the call came to; once per permit, and still after the
 *   lead changed. Counts, streaks and the back-off (section 8.1) live in `poolFetch`.
 */
import { randomBytes } from "node:crypto";
import type { Redis } from "ioredis";
import { errorText, FetchLeadLostError } from "../../../shared/errors.ts";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import type { Logger } from "../../core/logging.ts";
import { redisDeadline } from "../../core/redis.ts";
import { runScript } from "../../core/scripts.ts";
import type { FetchKind } from "../answer.ts";
import type { FetchConfig } from "../config.ts";
import type { FetchLead, FetchLeader, FetchStats } from "../fetch-contract.ts";

/** A lead lives this long without a renewal. */
export const DEFAULT_LEAD_TTL_MS = 15_000;
/** A permit outlives its call's timeout by this much before it lapses (parse, add, settle). */
export const DEFAULT_PERMIT_MARGIN_MS = 10_000;
/** The first Error's back-off; it doubles with each Error in a row... */
export const BACKOFF_BASE_MS = 1000;
/** ...up to this. */
export const BACKOFF_MAX_MS = 300_000;
/** A provider's Retry-After is taken up to this (a longer one is a provider's mistake). */
export const RETRY_AFTER_MAX_MS = 3_600_000;

export interface FetchCoordinatorOptions {
  redis: Redis;
  keys: RedisKeys;
  logger?: Logger;
  /** A lead's time to live; `DEFAULT_LEAD_TTL_MS` unless told. */
  leadTtlMs?: number;
  /** How often a lead renews itself; a third of the TTL unless told. */
  renewEveryMs?: number;
  /** How long any step waits for Redis's answer; a third of the TTL (at most 5 s) unless told. */
  replyTimeoutMs?: number;
  /** `DEFAULT_PERMIT_MARGIN_MS` unless told. */
  permitMarginMs?: number;
  /** Names this process in lead values (its instance, say); each lead adds a random part. */
  holder?: string;
}

/** What a call's reservation is checked against: the connector's `fetch` settings. */
export interface CallBounds {
  /** Proxies the call asks for at most (`estimated_ips_per_call`). */
  estimate: number;
  requestIntervalMs: number;
  maxInFlight: number;
  maxTotal: number | null;
  /** The call's timeout: its permit lives this long and the margin. */
  timeoutMs: number;
}

export function callBounds(fetch: FetchConfig): CallBounds {
  return {
    estimate: fetch.estimated_ips_per_call,
    requestIntervalMs: fetch.request_interval_ms,
    maxInFlight: fetch.max_in_flight,
    maxTotal: fetch.max_total,
    timeoutMs: fetch.timeout_ms,
  };
}

/** A reserved call: its permit, and the proxies it asks for (what it reserved of the ledger). */
export interface FetchPermit {
  connectorId: string;
  generation: string;
  /** The permit's member in the permits zset ("id|count"). */
  member: string;
  count: number;
  /** When the reservation was made, on Redis's clock (epoch ms). */
  reservedAtMs: number;
}

export type ReservationRefusal =
  /** The lead is not this one any more (or the generation changed): stop. */
  | { ok: false; reason: "not_leader" }
  /** The ledger is spent: no call until `max_total` is raised (or a new generation). */
  | { ok: false; reason: "ledger" }
  /** Backing off, `max_in_flight` calls in flight, or the interval not over: wait `waitMs`. */
  | { ok: false; reason: "backoff" | "in_flight" | "interval"; waitMs: number };

export type Reservation = { ok: true; permit: FetchPermit } | ReservationRefusal;

/** What a fetch came to, as the bookkeeping records it. */
export interface FetchRecord {
  /** Proxies the ledger counts for the call: its answer's, or its reservation when unknown. */
  actual: number;
  /** The classification; undefined records none (a call cancelled by its caller). */
  kind?: FetchKind;
  /** The provider answered 429. */
  rateLimited?: boolean;
  /** The provider's Retry-After, when it gave one. */
  retryAfterMs?: number;
  /** `pool.depleted_after_empty`. */
  depletedAfterEmpty: number;
}

export interface Settlement {
  /**
   * `settled`: the permit settled now (and the kind was recorded); `none`: nothing to settle
   * (settled before, or lapsed and counted at its estimate; nothing recorded) or, for a fetch
   * without a permit, the kind recorded; `stale`: another generation, nothing changed.
   */
  outcome: "settled" | "none" | "stale";
  emptyStreak: number;
  errorStreak: number;
  /** No call before this (epoch ms, Redis's clock); 0 when not backing off. */
  backoffUntilMs: number;
  /** The empty streak is at `depleted_after_empty` or beyond. */
  depleted: boolean;
}

export { FetchLeadLostError };

const RenewReply = { renewed: 1, gone: 0, otherLead: -1, otherGeneration: -2 } as const;

function renewFailure(reply: number): string {
  switch (reply) {
    case RenewReply.gone:
      return "the lead key is gone";
    case RenewReply.otherLead:
      return "another lead holds the connector";
    case RenewReply.otherGeneration:
      return "the pool generation changed";
    default:
      return `unexpected renewal reply ${reply}`;
  }
}

interface LeadParts {
  redis: Redis;
  keys: RedisKeys;
  logger: Logger | undefined;
  ttlMs: number;
  renewEveryMs: number;
  replyTimeoutMs: number;
}

/** A lead this process holds: renews itself until lost or released. */
class RedisFetchLead implements FetchLead {
  readonly connectorId: string;
  readonly generation: string;
  readonly epoch: number;
  /** The lead key's value: what every fenced step compares. */
  readonly value: string;
  readonly #parts: LeadParts;
  readonly #controller = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** When the last take or renewal that worked was sent (monotonic ms). */
  #confirmedAt: number;
  #released: Promise<void> | undefined;
  readonly #onCallerAbort = () => void this.release();
  readonly #callerSignal: AbortSignal;

  constructor(
    parts: LeadParts,
    lead: { connectorId: string; generation: string; epoch: number; value: string },
    sentAt: number,
    callerSignal: AbortSignal,
  ) {
    this.#parts = parts;
    this.connectorId = lead.connectorId;
    this.generation = lead.generation;
    this.epoch = lead.epoch;
    this.value = lead.value;
    this.#confirmedAt = sentAt;
    this.#callerSignal = callerSignal;
    callerSignal.addEventListener("abort", this.#onCallerAbort, { once: true });
    this.#schedule();
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  #schedule(): void {
    this.#timer = setTimeout(() => void this.#renew(), this.#parts.renewEveryMs);
    // The lead never keeps a process alive by itself: its holder releases it when done.
    this.#timer.unref?.();
  }

  async #renew(): Promise<void> {
    if (this.signal.aborted) return;
    const p = this.#parts;
    const sentAt = performance.now();
    // A stalled event loop may have let the key lapse while no renewal ran: that is a loss.
    if (sentAt - this.#confirmedAt >= p.ttlMs) {
      return this.#lose("no renewal was confirmed within the lead's time to live");
    }
    let reply: number;
    try {
      reply = Number(
        await redisDeadline(
          p.replyTimeoutMs,
          () =>
            runScript(p.redis, "pool_lead_renew", [
              p.keys.poolGeneration,
              p.keys.poolLeader(this.connectorId),
            ], [this.value, this.generation, p.ttlMs]),
        ),
      );
    } catch (error) {
      return this.#lose(`the renewal did not reach Redis (${errorText(error)})`);
    }
    if (this.signal.aborted) return;
    if (reply !== RenewReply.renewed) return this.#lose(renewFailure(reply));
    this.#confirmedAt = sentAt;
    this.#schedule();
  }

  #lose(reason: string): void {
    if (this.signal.aborted) return;
    clearTimeout(this.#timer);
    this.#callerSignal.removeEventListener("abort", this.#onCallerAbort);
    this.#controller.abort(new FetchLeadLostError(reason));
    this.#parts.logger?.warn(
      { connector: this.connectorId, epoch: this.epoch, reason },
      "Provider fetch lead lost",
    );
  }

  release(): Promise<void> {
    this.#released ??= (async () => {
      clearTimeout(this.#timer);
      this.#callerSignal.removeEventListener("abort", this.#onCallerAbort);
      const held = !this.signal.aborted;
      if (held) this.#controller.abort(new FetchLeadLostError("released"));
      if (!held) return;
      const p = this.#parts;
      try {
        await redisDeadline(
          p.replyTimeoutMs,
          () =>
            runScript(p.redis, "lease_release", [p.keys.poolLeader(this.connectorId)], [
              this.value,
            ]),
        );
      } catch (error) {
        p.logger?.warn(
          { connector: this.connectorId, error: errorText(error) },
          "Provider fetch lead not released; it expires by itself",
        );
      }
    })();
    return this.#released;
  }
}

const MEMBER_COUNT = /\|(\d+)$/;

export class FetchCoordinator implements FetchLeader {
  readonly #parts: LeadParts;
  readonly #permitMarginMs: number;
  readonly #holder: string;

  constructor(options: FetchCoordinatorOptions) {
    const ttlMs = options.leadTtlMs ?? DEFAULT_LEAD_TTL_MS;
    this.#parts = {
      redis: options.redis,
      keys: options.keys,
      logger: options.logger,
      ttlMs,
      renewEveryMs: options.renewEveryMs ?? Math.max(1, Math.floor(ttlMs / 3)),
      replyTimeoutMs: options.replyTimeoutMs ?? Math.max(1, Math.min(5000, Math.floor(ttlMs / 3))),
    };
    this.#permitMarginMs = options.permitMarginMs ?? DEFAULT_PERMIT_MARGIN_MS;
    // A lead's value is split on "|": the holder may not hold one.
    this.#holder = (options.holder ?? "worker").replaceAll("|", "_");
  }

  #run(name: Parameters<typeof runScript>[1], keys: string[], args: (string | number)[]) {
    const redis = this.#parts.redis;
    return redisDeadline(this.#parts.replyTimeoutMs, () => runScript(redis, name, keys, args));
  }

  /**
   * Takes the connector's lead; undefined when another lead holds it or Redis did not answer
   * (a take whose answer was lost leaves a key that lapses by itself). The lead ends when
   * `signal` aborts (released), when a renewal fails, or when released.
   */
  async lead(connectorId: string, signal: AbortSignal): Promise<FetchLead | undefined> {
    if (signal.aborted) return undefined;
    const k = this.#parts.keys;
    const holder = `${this.#holder}:${randomBytes(6).toString("hex")}`;
    const sentAt = performance.now();
    let reply: unknown[];
    try {
      reply = await this.#run("pool_lead_take", [
        k.poolGeneration,
        k.poolLeader(connectorId),
        k.poolEpoch(connectorId),
        k.poolFetch(connectorId),
        k.poolPermits(connectorId),
      ], [holder, this.#parts.ttlMs, randomBytes(8).toString("hex")]) as unknown[];
    } catch (error) {
      this.#parts.logger?.warn(
        { connector: connectorId, error: errorText(error) },
        "Provider fetch lead not taken: Redis did not answer",
      );
      return undefined;
    }
    if (Number(reply[0]) !== 1) return undefined;
    const generation = String(reply[1]);
    const epoch = Number(reply[2]);
    const lead = new RedisFetchLead(
      this.#parts,
      { connectorId, generation, epoch, value: `${holder}|${generation}|${epoch}` },
      sentAt,
      signal,
    );
    if (signal.aborted) await lead.release();
    return lead;
  }

  /**
   * Reserves one call under `lead`, all at once: refused when the lead is not this one any
   * more, while backing off, when the ledger is spent, at `max_in_flight`, or before the
   * interval since the last start is over. The call asks for `bounds.estimate` proxies, or what
   * is left of `max_total` when that is less. Throws when Redis does not answer.
   */
  async reserve(lead: FetchLead, bounds: CallBounds): Promise<Reservation> {
    // Only a lead a coordinator took carries the value the fence compares.
    if (!(lead instanceof RedisFetchLead) || lead.signal.aborted) {
      return { ok: false, reason: "not_leader" };
    }
    const held = lead;
    const k = this.#parts.keys;
    const id = randomBytes(8).toString("hex");
    const reply = await this.#run("pool_fetch_reserve", [
      k.poolGeneration,
      k.poolLeader(held.connectorId),
      k.poolFetch(held.connectorId),
      k.poolPermits(held.connectorId),
    ], [
      held.value,
      held.generation,
      id,
      bounds.estimate,
      bounds.requestIntervalMs,
      bounds.maxInFlight,
      bounds.maxTotal ?? -1,
      bounds.timeoutMs + this.#permitMarginMs,
    ]) as unknown[];
    const word = String(reply[0]);
    switch (word) {
      case "ok": {
        const member = String(reply[1]);
        return {
          ok: true,
          permit: {
            connectorId: held.connectorId,
            generation: held.generation,
            member,
            count: Number(reply[2]),
            reservedAtMs: Number(reply[3]),
          },
        };
      }
      case "not_leader":
      case "ledger":
        return { ok: false, reason: word };
      case "backoff":
      case "in_flight":
      case "interval":
        return { ok: false, reason: word, waitMs: Math.max(1, Number(reply[1])) };
      default:
        throw new Error(`Unexpected pool_fetch_reserve reply ${JSON.stringify(reply)}`);
    }
  }

  /**
   * Settles a reserved call and records its fetch, at once; a permit settles once (a second
   * settle, or one of a lapsed permit, changes nothing). Throws when Redis does not answer:
   * the permit then lapses and counts at its estimate.
   */
  settle(permit: FetchPermit, record: FetchRecord): Promise<Settlement> {
    if (!MEMBER_COUNT.test(permit.member)) throw new Error("Not a permit of this coordinator");
    return this.#settle(permit.connectorId, permit.generation, permit.member, record);
  }

  /** Records a fetch that held no permit (its call was never made): its kind only. */
  record(connectorId: string, generation: string, record: FetchRecord): Promise<Settlement> {
    return this.#settle(connectorId, generation, "", { ...record, actual: 0 });
  }

  async #settle(
    connectorId: string,
    generation: string,
    member: string,
    record: FetchRecord,
  ): Promise<Settlement> {
    const k = this.#parts.keys;
    const retryAfterMs = Math.min(RETRY_AFTER_MAX_MS, Math.max(0, record.retryAfterMs ?? 0));
    const reply = (await this.#run("pool_fetch_settle", [
      k.poolGeneration,
      k.poolFetch(connectorId),
      k.poolPermits(connectorId),
    ], [
      generation,
      member,
      Math.max(0, Math.floor(record.actual)),
      record.kind ?? "",
      record.rateLimited ? 1 : 0,
      Math.ceil(retryAfterMs),
      BACKOFF_BASE_MS,
      BACKOFF_MAX_MS,
      record.depletedAfterEmpty,
    ]) as unknown[]).map(Number);
    const [settled, emptyStreak, errorStreak, backoffUntilMs, depleted] = reply;
    return {
      outcome: settled === 1 ? "settled" : settled === 0 ? "none" : "stale",
      emptyStreak,
      errorStreak,
      backoffUntilMs,
      depleted: depleted === 1,
    };
  }

  /** The connector's fetch bookkeeping in the current generation. */
  async stats(connectorId: string): Promise<FetchStats> {
    const k = this.#parts.keys;
    const reply = await this.#run("pool_fetch_stats", [
      k.poolGeneration,
      k.poolFetch(connectorId),
      k.poolPermits(connectorId),
    ], []) as unknown[];
    const [
      success,
      empty,
      duplicateOnly,
      error,
      rateLimited,
      emptyStreak,
      errorStreak,
      backoffUntilMs,
      ledgerUsed,
      ledgerPending,
      inFlight,
    ] = reply.slice(1).map(Number);
    return {
      generation: String(reply[0]),
      success,
      empty,
      duplicateOnly,
      error,
      rateLimited,
      emptyStreak,
      errorStreak,
      backoffUntilMs,
      ledgerUsed,
      ledgerPending,
      inFlight,
    };
  }
}
