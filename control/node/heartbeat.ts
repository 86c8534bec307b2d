/**
 * The heartbeat: every interval a Postgres check (SELECT 1), then the process's snapshot
 * written to Redis. It owns the store checks: readiness is read off what each store answered
 * the last beat. The snapshot is for display and readiness only; nothing divides work by it.
 *
 * Keys, in one MULTI: the registry key (the process is listed while it lives; its value is
 * {role, version, started_at, ttl_ms}), the snapshot key (what it reports; its age is read off
 * its TTL, so no two hosts' clocks are compared) and the instance index. Both keys live three
 * intervals, so a process that dies leaves the list soon. The gateways write the same keys
 * (shared/instance-registry.ts).
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { errorText, Store, StoreCheckError, StoreUnavailableError } from "../../shared/errors.ts";
import {
  type InstanceIdentity,
  withdrawInstanceKeys,
  writeInstanceKeys,
} from "../../shared/instance-registry.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { LoopSnapshot } from "../../shared/async/loop.ts";
import { type CycleResult, PeriodicLoop } from "../../shared/async/loop.ts";
import type { Logger } from "../core/logging.ts";
import { redisDeadline } from "../core/redis.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import type { RuntimeSnapshot } from "../roles/runtime.ts";
import type { LoopLagSnapshot } from "./loop-lag.ts";

/** What one store last answered. */
export interface StoreStatus {
  ok: boolean;
  last_ok_at: string | null;
  /** Why the last check failed; null when it answered. */
  error: string | null;
}

export type StoreStatuses = Record<Store, StoreStatus>;

export interface ProcessLoopSnapshot extends LoopSnapshot {
  /** `node` for the node's own loops, else the runtime that runs it. */
  owner: string;
}

/** What a process reports: the heartbeat's snapshot JSON, also the source of /metrics. */
export interface ProcessSnapshot extends InstanceIdentity {
  stores: StoreStatuses;
  loops: ProcessLoopSnapshot[];
  runtimes: Record<string, RuntimeSnapshot>;
  loop_lag: LoopLagSnapshot;
}

/** The parts of the snapshot the node knows; the heartbeat adds the stores and the time. */
export type ProcessReport = Omit<ProcessSnapshot, "beat_at" | "stores">;

/** How long a SELECT 1 may take before the beat counts it failed (it is left to finish). */
export const POSTGRES_CHECK_TIMEOUT_MS = 2000;

export interface HeartbeatOptions {
  logger: Logger;
  redis: Redis;
  keys: RedisKeys;
  database: Database;
  instance: string;
  role: string;
  intervalMs: number;
  /** The deadline of the Redis write (the request deadline). */
  redisDeadlineMs: number;
  postgresTimeoutMs?: number;
  /** Builds the node's part of the snapshot at each beat. */
  report(): ProcessReport;
}

export { StoreCheckError };

const neverAnswered = (): StoreStatus => ({ ok: false, last_ok_at: null, error: null });

/** The text of a store failure: what the driver said, not our wrapper's "unavailable". */
function failureText(error: unknown): string {
  if (error instanceof StoreUnavailableError && error.cause !== undefined) {
    return errorText(error.cause);
  }
  return errorText(error);
}

export class Heartbeat extends PeriodicLoop<Logger> {
  readonly #options: HeartbeatOptions;
  readonly #stores: StoreStatuses = { postgres: neverAnswered(), redis: neverAnswered() };
  /** The SELECT 1 still running, if one outlived its beat: at most one at a time. */
  #postgresCheck: Promise<unknown> | undefined;
  #wroteKeys = false;
  readonly #firstBeat: Promise<void>;
  #firstBeatDone: () => void = () => {};

  constructor(options: HeartbeatOptions) {
    super({ name: "heartbeat", logger: options.logger, intervalMs: options.intervalMs });
    this.#options = options;
    this.#firstBeat = new Promise((resolve) => (this.#firstBeatDone = resolve));
  }

  /** Resolves once the first beat has checked both stores, whatever they answered. */
  get firstBeat(): Promise<void> {
    return this.#firstBeat;
  }

  /** Whether a store answered the last beat. */
  answered(store: Store): boolean {
    return this.#stores[store].ok;
  }

  stores(): StoreStatuses {
    return structuredClone(this.#stores);
  }

  /** TTL of both keys: three intervals, so one late beat never delists the process. */
  get ttlMs(): number {
    return this.intervalMs * 3;
  }

  protected override async cycle(): Promise<CycleResult> {
    const problems: string[] = [];
    const postgresError = await this.#checkPostgres();
    if (postgresError !== undefined) problems.push(`postgres: ${postgresError}`);
    const redisError = await this.#write();
    if (redisError !== undefined) problems.push(`redis: ${redisError}`);
    this.#firstBeatDone();
    if (problems.length > 0) throw new StoreCheckError(problems.join("; "));
  }

  /** Withdraws the process's keys, so peers see it leave at once. Never raises. */
  async withdraw(): Promise<void> {
    if (!this.#wroteKeys) return;
    const { redis, keys, instance, redisDeadlineMs, logger } = this.#options;
    try {
      await redisDeadline(redisDeadlineMs, () => withdrawInstanceKeys(redis, keys, instance));
      this.#wroteKeys = false;
    } catch (error) {
      logger.warn(
        { error: failureText(error) },
        "Heartbeat keys not withdrawn; they expire on their own",
      );
    }
  }

  async #checkPostgres(): Promise<string | undefined> {
    const status = this.#stores.postgres;
    let error: string | undefined;
    if (this.#postgresCheck) {
      error = "the previous check has not finished";
    } else {
      const timeoutMs = this.#options.postgresTimeoutMs ?? POSTGRES_CHECK_TIMEOUT_MS;
      const check = this.#options.database.sql`select 1`.then(() => {}, (e) => e);
      this.#postgresCheck = check;
      void check.finally(() => {
        if (this.#postgresCheck === check) this.#postgresCheck = undefined;
      });
      // The check never rejects (it resolves to its error); the deadline's error is caught.
      const outcome = await withDeadline("Postgres check", timeoutMs, () => check).catch(
        (e: unknown) => e,
      );
      if (outcome !== undefined) error = failureText(outcome);
    }
    this.#note(status, error);
    return error;
  }

  async #write(): Promise<string | undefined> {
    const { redis, keys, instance, role, redisDeadlineMs, report } = this.#options;
    const status = this.#stores.redis;
    const now = new Date().toISOString();
    // The snapshot says Redis answered: if the write fails, nobody reads it anyway.
    const snapshot: ProcessSnapshot = {
      ...report(),
      beat_at: now,
      stores: {
        postgres: { ...this.#stores.postgres },
        redis: { ok: true, last_ok_at: now, error: null },
      },
    };
    // The registry value says how long both keys live, so a reader tells the snapshot's age
    // from its remaining TTL alone.
    const registration = {
      role,
      version: snapshot.version,
      started_at: snapshot.started_at,
      ttl_ms: this.ttlMs,
    };
    let error: string | undefined;
    try {
      await redisDeadline(
        redisDeadlineMs,
        () => writeInstanceKeys(redis, keys, instance, registration, JSON.stringify(snapshot)),
      );
      this.#wroteKeys = true;
    } catch (e) {
      error = failureText(e);
    }
    this.#note(status, error);
    return error;
  }

  #note(status: StoreStatus, error: string | undefined): void {
    status.ok = error === undefined;
    status.error = error ?? null;
    if (error === undefined) status.last_ok_at = new Date().toISOString();
  }
}
