/**
 * Job producers: one per periodic kind on the leading controller, a loop with a cycle every
 * second. Each key is published at its slot second, so a kind's keys spread evenly over the
 * period on every controller alike.
 *
 * - A new lead goes on from the current second: a lead change delays no kind by a period.
 * - A cycle publishes the slots of every second after the last one published, up to now, at
 *   most five of them: older seconds wait a period, so a stall never becomes a burst.
 * - The last second moves only once Redis took the publish, so a refused one is sent again.
 * - Keyed kinds publish the last compile's keys, and nothing before the first compile;
 *   install-wide kinds publish the one key `all` from the start.
 * - A kind with a first lane publishes there the keys the compile puts in it (health: proxies
 *   not checked yet, and suspects), so under a backlog of periodic re-checks they go first.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { FIRST_LANE_KINDS, type JobKind } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import type { CycleResult, LoopSnapshot } from "../../shared/async/loop.ts";
import { appendWork } from "../core/work-streams.ts";
import { INSTALL_WIDE_KEY } from "../core/job-catalogue.ts";
import type { ControllerLease } from "../core/lease.ts";
import { LeasedPeriodicLoop } from "../core/leased.ts";
import { slotSecond } from "./slots.ts";

const INSTALL_WIDE_KEYS: readonly string[] = [INSTALL_WIDE_KEY];

/** How many past seconds one cycle may catch up. */
export const MAX_CATCH_UP_SECONDS = 5;

export interface JobProducerOptions {
  kind: JobKind;
  periodMs: number;
  /** The last compile's keys for a keyed kind (undefined before the first); omit for install-wide. */
  keys?: () => readonly string[] | undefined;
  /** Those of them published on the kind's first lane (FIRST_LANE_KINDS). */
  firstLane?: () => ReadonlySet<string> | undefined;
  redis: Redis;
  redisKeys: RedisKeys;
  lease: ControllerLease;
  logger: Logger;
  /** Wall-clock milliseconds; the leader's clock picks the slot seconds. */
  now?: () => number;
}

/** A producer's row in the snapshot: its loop's job stats and what it published. */
export interface JobProducerSnapshot extends LoopSnapshot {
  job_kind: JobKind;
  period_seconds: number;
  /** Entries appended to the kind's stream. */
  published: number;
  /** Appends Redis refused (their seconds are sent again at the next cycle). */
  refusals: number;
  last_second: number | null;
}

export class JobProducer extends LeasedPeriodicLoop {
  readonly kind: JobKind;
  readonly periodSeconds: number;
  readonly #o: JobProducerOptions;
  readonly #now: () => number;
  #lastSecond: number | undefined;
  #slotsFor: readonly string[] | undefined;
  #slots = new Map<number, string[]>();
  /** Each key's slot, kept across compiles: a compile changes few keys, a slot costs a hash. */
  #slotOf = new Map<string, number>();
  #published = 0;
  #refusals = 0;

  constructor(options: JobProducerOptions) {
    super({
      name: `job_producer_${options.kind}`,
      logger: options.logger,
      lease: options.lease,
      intervalMs: 1000,
    });
    this.kind = options.kind;
    this.periodSeconds = Math.max(1, Math.round(options.periodMs / 1000));
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  override snapshot(): JobProducerSnapshot {
    return {
      ...super.snapshot(),
      job_kind: this.kind,
      period_seconds: this.periodSeconds,
      published: this.#published,
      refusals: this.#refusals,
      last_second: this.#lastSecond ?? null,
    };
  }

  protected override onNewLead(): void {
    // Go on from the current second: the gap of a handover waits a period, nothing more.
    this.#lastSecond = Math.floor(this.#now() / 1000) - 1;
  }

  protected override async cycle(): Promise<CycleResult> {
    if (!this.lease.leading) return false;
    const nowSecond = Math.floor(this.#now() / 1000);
    const last = this.#lastSecond ?? nowSecond - 1;
    const from = Math.max(last + 1, nowSecond - MAX_CATCH_UP_SECONDS + 1);
    if (from > nowSecond) return false;
    const keys: string[] = [];
    for (let second = from; second <= nowSecond; second++) {
      const due = this.#slotKeys().get(second % this.periodSeconds);
      if (due) keys.push(...due);
    }
    if (keys.length > 0) {
      const firstLane = FIRST_LANE_KINDS.includes(this.kind) ? this.#o.firstLane?.() : undefined;
      const first = firstLane === undefined || firstLane.size === 0
        ? []
        : keys.filter((key) => firstLane.has(key));
      const regular = first.length === 0 ? keys : keys.filter((key) => !firstLane!.has(key));
      try {
        if (first.length > 0) {
          await appendWork(
            this.#o.redis,
            this.#o.redisKeys.jobFirstStream(this.kind),
            first.map((key) => ({ key })),
          );
        }
        if (regular.length > 0) {
          await appendWork(
            this.#o.redis,
            this.#o.redisKeys.jobStream(this.kind),
            regular.map((key) => ({ key })),
          );
        }
      } catch (error) {
        this.#refusals += 1;
        throw error;
      }
      this.#published += keys.length;
    }
    this.#lastSecond = nowSecond;
    return keys.length > 0;
  }

  /** Keys by slot second, worked out once per compile. */
  #slotKeys(): Map<number, string[]> {
    const keys = this.#o.keys ? this.#o.keys() : INSTALL_WIDE_KEYS;
    if (keys === this.#slotsFor) return this.#slots;
    const slots = new Map<number, string[]>();
    const slotOf = new Map<string, number>();
    for (const key of keys ?? []) {
      const slot = this.#slotOf.get(key) ?? slotSecond(this.kind, key, this.periodSeconds);
      slotOf.set(key, slot);
      const list = slots.get(slot);
      if (list) list.push(key);
      else slots.set(slot, [key]);
    }
    this.#slots = slots;
    this.#slotOf = slotOf;
    this.#slotsFor = keys;
    return slots;
  }
}
