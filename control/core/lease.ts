/**
 * The controller lease: one key in Redis naming the controller that leads. One keeper task per
 * controller process asks for it every poll while standing by and refreshes it every refresh
 * interval while leading; a clean stop releases it, so a standby leads within a poll, and a
 * holder that dies stops refreshing, so a standby leads within the TTL plus a poll.
 *
 * The holder leads while the last take or refresh that worked still covers it (sent time plus
 * TTL). A refresh that fails for lack of an answer ends nothing; only one that finds the key gone
 * or another holder's ends the lead, as does a fenced write that finds another holder
 * (`markLost`). Every take from standby starts a new term; a refresh that works after the cover
 * ran out resumes the same term, since the key named this process throughout.
 *
 * Not fenced consensus: under a partition two processes may both believe they lead for a
 * moment. The one write that must never come from two controllers, the feed publish, checks the
 * lease inside its own script.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { errorText, LeadLostError } from "../../shared/errors.ts";
import { sleep } from "../../shared/async/sleep.ts";
import type { Logger } from "./logging.ts";
import { leaseRefreshOutcome, runScript } from "./scripts.ts";

export interface LeaseOptions {
  redis: Redis;
  keys: RedisKeys;
  /** Fresh for each process life. */
  holderId: string;
  logger: Logger;
  ttlMs: number;
  refreshMs: number;
  pollMs: number;
  /** How long a take or refresh waits for its reply, apart from the refresh cadence. */
  replyTimeoutMs?: number;
  /** Monotonic milliseconds. */
  now?: () => number;
}

export interface Lead {
  term: number;
  /** Aborted the moment this lead ends. */
  signal: AbortSignal;
}

const State = { standby: "standby", leading: "leading", lapsed: "lapsed" } as const;
type State = (typeof State)[keyof typeof State];

/** The lease's part of the controller's snapshot. */
export interface LeaseSnapshot {
  state: State;
  /** Terms this process has led, counting the current one. */
  term: number;
  holder: string;
  cover_remaining_ms: number;
  /** Leads begun and ended. */
  lead_changes: number;
  /** Leads that ended because no refresh worked within the TTL. */
  lapses: number;
  /** Leads ended by another holder or a key found gone (not by this process's stop). */
  losses: number;
  /** Why the keeper's last call failed; null when it reached Redis. */
  error: string | null;
}

class ReplyTimeout extends Error {
  constructor(ms: number) {
    super(`Lease reply not received within ${ms} ms`);
    this.name = "ReplyTimeout";
  }
}

export class ControllerLease {
  readonly #o: Required<LeaseOptions>;
  #state: State = State.standby;
  #term = 0;
  #coverUntil = 0;
  #lead: AbortController | undefined;
  #coverTimer: ReturnType<typeof setTimeout> | undefined;
  #waiters = new Set<() => void>();
  #stopping = new AbortController();
  #keeper: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;
  #failing: string | undefined;
  #changes = 0;
  #lapses = 0;
  #losses = 0;

  constructor(options: LeaseOptions) {
    this.#o = { replyTimeoutMs: 10_000, now: () => performance.now(), ...options };
  }

  get leading(): boolean {
    return this.#state === State.leading;
  }

  get term(): number {
    return this.#term;
  }

  /** The current lead, when leading. */
  get lead(): Lead | undefined {
    if (this.#state !== State.leading || !this.#lead) return undefined;
    return { term: this.#term, signal: this.#lead.signal };
  }

  /** The id this process writes into the lease key; fenced writes check the key still holds it. */
  get holderId(): string {
    return this.#o.holderId;
  }

  /** Whether the keeper reached Redis on its last try (readiness). */
  get reachable(): boolean {
    return this.#failing === undefined;
  }

  start(): void {
    this.#keeper ??= this.#keep();
  }

  /** Resolves with the lead once this process leads; rejects when `signal` aborts first. */
  waitForLead(signal: AbortSignal): Promise<Lead> {
    const current = this.lead;
    if (current) return Promise.resolve(current);
    return new Promise<Lead>((resolve, reject) => {
      const onAbort = () => {
        this.#waiters.delete(wake);
        reject(signal.reason);
      };
      const wake = () => {
        const lead = this.lead;
        if (!lead) return;
        this.#waiters.delete(wake);
        signal.removeEventListener("abort", onAbort);
        resolve(lead);
      };
      if (signal.aborted) return reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiters.add(wake);
    });
  }

  /** A fenced write found another holder: the lead ends at once. */
  markLost(reason: string): void {
    if (this.#state === State.standby) return;
    this.#end(State.standby, reason);
  }

  snapshot(): LeaseSnapshot {
    return {
      state: this.#state,
      term: this.#term,
      holder: this.#o.holderId,
      cover_remaining_ms: Math.max(0, Math.round(this.#coverUntil - this.#o.now())),
      lead_changes: this.#changes,
      lapses: this.#lapses,
      losses: this.#losses,
      error: this.#failing ?? null,
    };
  }

  /** Stops the keeper and releases the lease if held. Never raises; safe twice. */
  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopping.abort();
      await this.#keeper?.catch(() => {});
      const held = this.#state !== State.standby;
      if (held) this.#end(State.standby, "stopping");
      clearTimeout(this.#coverTimer);
      if (held) {
        try {
          await this.#reply(
            runScript(this.#o.redis, "lease_release", [this.#o.keys.controllerLease], [
              this.#o.holderId,
            ]),
          );
          this.#o.logger.info({ term: this.#term }, "Controller lease released");
        } catch (error) {
          this.#o.logger.warn(
            { error: errorText(error) },
            "Controller lease not released; it expires by itself",
          );
        }
      }
    })();
    return this.#stopped;
  }

  async #keep(): Promise<void> {
    const stop = this.#stopping.signal;
    while (!stop.aborted) {
      try {
        if (this.#state === State.standby) await this.#tryTake();
        else await this.#tryRefresh();
        this.#recovered();
      } catch (error) {
        this.#failed(error);
      }
      const waitMs = this.#state === State.standby ? this.#o.pollMs : this.#o.refreshMs;
      // A stop ends the wait and the loop (sleep rejects for nothing else).
      await sleep(waitMs, stop).catch(() => {});
    }
  }

  async #tryTake(): Promise<void> {
    const sentAt = this.#o.now();
    const reply = await this.#reply(
      runScript(this.#o.redis, "lease_take", [this.#o.keys.controllerLease], [
        this.#o.holderId,
        this.#o.ttlMs,
      ]),
    );
    if (Number(reply) !== 1 || this.#stopping.signal.aborted) return;
    this.#term += 1;
    this.#begin(sentAt);
    this.#o.logger.info({ term: this.#term }, "Controller lease taken; leading");
  }

  async #tryRefresh(): Promise<void> {
    const sentAt = this.#o.now();
    const reply = await this.#reply(
      runScript(this.#o.redis, "lease_refresh", [this.#o.keys.controllerLease], [
        this.#o.holderId,
        this.#o.ttlMs,
      ]),
    );
    if (this.#state === State.standby) return; // marked lost while the reply was in flight
    const outcome = leaseRefreshOutcome(reply);
    if (outcome === "extended") {
      if (this.#state === State.lapsed) {
        this.#begin(sentAt);
        this.#o.logger.info(
          { term: this.#term },
          "Controller lease refreshed after its cover ran out; leading the same term",
        );
      } else {
        this.#extend(sentAt);
      }
      return;
    }
    this.#end(
      State.standby,
      outcome === "gone" ? "the lease key is gone" : "another controller holds the lease",
    );
  }

  #begin(sentAt: number): void {
    this.#state = State.leading;
    this.#lead = new AbortController();
    this.#changes += 1;
    this.#extend(sentAt);
    for (const wake of [...this.#waiters]) wake();
  }

  #extend(sentAt: number): void {
    this.#coverUntil = sentAt + this.#o.ttlMs;
    this.#armCover();
  }

  /** Ends the lead when the cover runs out; timers may fire a little early, so it re-arms. */
  #armCover(): void {
    clearTimeout(this.#coverTimer);
    const remainingMs = this.#coverUntil - this.#o.now();
    this.#coverTimer = setTimeout(() => {
      if (this.#state !== State.leading) return;
      if (this.#o.now() >= this.#coverUntil) {
        this.#end(State.lapsed, "no refresh worked within the lease's time to live");
      } else {
        this.#armCover();
      }
    }, Math.max(1, Math.ceil(remainingMs)));
  }

  #end(next: State, reason: string): void {
    const wasLeading = this.#state === State.leading;
    this.#state = next;
    clearTimeout(this.#coverTimer);
    if (wasLeading) {
      this.#changes += 1;
      this.#lead?.abort(new LeadLostError(reason));
      this.#lead = undefined;
      if (reason !== "stopping") {
        if (next === State.lapsed) this.#lapses += 1;
        else this.#losses += 1;
        this.#o.logger.warn({ term: this.#term, reason }, "Controller lead lost");
      }
    }
  }

  #reply<T>(pending: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    return Promise.race([
      pending,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new ReplyTimeout(this.#o.replyTimeoutMs)),
          this.#o.replyTimeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  }

  #failed(error: unknown): void {
    const text = errorText(error);
    if (this.#failing === text) return;
    this.#failing = text;
    this.#o.logger.error({ error: text }, "Controller lease call failed");
  }

  #recovered(): void {
    if (this.#failing === undefined) return;
    this.#failing = undefined;
    this.#o.logger.info({}, "Controller lease calls recovered");
  }
}

export { LeadLostError };
