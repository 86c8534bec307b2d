/**
 * A provider-API connector's refill (the `Refiller` of contract.ts): given how many proxies its
 * pool needs, it plans ceil(need / estimated_ips_per_call) calls and runs them under the
 * connector's lead, at most `max_in_flight` at once and the rest as permits free up. Each call:
 *
 *   reserve (coordinator.ts: lead, back-off, ledger, permits, interval, at once in Redis)
 *   -> call (call.ts, under the egress guard) -> read the answer (answer.ts)
 *   -> add its live proxies to the pool (PoolStore.add: new ones as checking)
 *   -> settle the permit and record the classification (section 8.1), at once.
 *
 * The classification comes from the add: new entries (or new proxies the pool had no room
 * for) make a Success, live proxies that were all held already a Duplicate-only, no live proxy
 * an Empty; a failed call or an unreadable answer an Error, which backs off. The ledger counts
 * the proxies of the answer; a call whose outcome is unknown (no answer in time, an answer that
 * could not be read, a call cancelled) counts its reservation; a provider that answered an
 * error status handed nothing out and counts none.
 *
 * It stops on the caller's signal, a lost lead (its calls in flight are cancelled, settled and
 * their proxies left out: fail closed), a back-off, a spent ledger, the connector depleted, an
 * interval longer than `maxWaitMs`, or permits other calls held for longer than that. It never
 * throws. Logs: one line a fetch at debug, one warning an Error; neither holds the answer, the
 * URL's query or a credential.
 */
import { errorText, VendorCallError } from "../../../shared/errors.ts";
import type { Logger } from "../../core/logging.ts";
import { sleep } from "../../../shared/async/sleep.ts";
import type { PoolStore } from "../pool/contract.ts";
import {
  answerKind,
  type AnswerSpec,
  FetchKind,
  parseAnswer,
  type ParsedAnswer,
  unreadableAnswer,
} from "../answer.ts";
import { callProvider, type ProviderEgress, renderFetchCall } from "./call.ts";
import { answerSpec } from "../config.ts";
import type {
  FetchLead,
  FetchStats,
  ProviderApiConnector,
  Refiller,
  RefillResult,
} from "../fetch-contract.ts";
import {
  callBounds,
  type FetchCoordinator,
  type FetchPermit,
  type Settlement,
} from "./coordinator.ts";
import type { FetchMetrics } from "./metrics.ts";

/** The longest wait for the interval or a permit before a refill gives up until its next run. */
export const DEFAULT_MAX_WAIT_MS = 30_000;
/**
 * How often a refill with no call of its own in flight asks again for a permit another worker
 * holds: that call settles well before its permit would lapse.
 */
export const PERMIT_POLL_MS = 250;

export interface RefillerOptions {
  coordinator: FetchCoordinator;
  pool: PoolStore;
  logger: Logger;
  /** The egress guard's allowances (`providerEgress(settings)`). */
  egress?: ProviderEgress;
  metrics?: FetchMetrics;
  /** The pool's clock, epoch ms (answers' lifetimes, the add); `Date.now` unless told. */
  nowMs?: () => number;
  /** `DEFAULT_MAX_WAIT_MS` unless told. */
  maxWaitMs?: number;
}

type StopReason = NonNullable<RefillResult["stoppedBy"]>;

/** What one call came to. */
interface CallOutcome {
  /** The classification; undefined when none was recorded (cancelled, or the add failed). */
  kind: FetchKind | undefined;
  added: number;
  settlement: Settlement | undefined;
}

function noKinds(): Record<FetchKind, number> {
  return { error: 0, empty: 0, duplicate_only: 0, success: 0 };
}

export class ProviderRefiller implements Refiller {
  readonly #o: RefillerOptions;
  readonly #nowMs: () => number;
  readonly #maxWaitMs: number;

  constructor(options: RefillerOptions) {
    this.#o = options;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#maxWaitMs = options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
  }

  stats(connectorId: string): Promise<FetchStats> {
    return this.#o.coordinator.stats(connectorId);
  }

  async refill(
    connector: ProviderApiConnector,
    need: number,
    lead: FetchLead,
    signal: AbortSignal,
  ): Promise<RefillResult> {
    const byKind = noKinds();
    const result = { calls: 0, added: 0, depleted: false };
    let stoppedBy: StopReason | undefined;
    const running = new Set<Promise<void>>();
    // The lead's loss cancels the calls in flight as the caller's signal does.
    const stop = AbortSignal.any([signal, lead.signal]);
    const stopReason = (): StopReason => signal.aborted ? "aborted" : "not_leader";
    try {
      const fetch = connector.config.fetch;
      const bounds = callBounds(fetch);
      const spec = answerSpec(connector.config);
      const planned = need > 0 ? Math.ceil(need / bounds.estimate) : 0;
      let started = 0;
      let asked = 0;
      /** Waits logged already (once a reason a refill). */
      const waited = new Set<string>();
      /** When the refill began waiting for a permit another call holds. */
      let permitWaitSince: number | undefined;
      for (;;) {
        if (stoppedBy === undefined && stop.aborted) stoppedBy = stopReason();
        const planning = stoppedBy === undefined && !result.depleted && started < planned &&
          asked < need && result.added < need;
        if (planning && running.size < bounds.maxInFlight) {
          let reservation;
          try {
            reservation = await this.#o.coordinator.reserve(lead, {
              ...bounds,
              estimate: Math.min(bounds.estimate, need - asked),
            });
          } catch (error) {
            // Unsure of Redis is unsure of the lead: fail closed.
            this.#o.logger.warn(
              { connector: connector.id, error: errorText(error) },
              "Provider fetch not reserved: Redis did not answer; stopping this refill",
            );
            stoppedBy = "not_leader";
            continue;
          }
          if (reservation.ok) {
            permitWaitSince = undefined;
            const permit = reservation.permit;
            started++;
            asked += permit.count;
            const task = this.#call(connector, permit, spec, stop).then((outcome) => {
              result.calls++;
              if (outcome.kind !== undefined) byKind[outcome.kind]++;
              result.added += outcome.added;
              if (outcome.settlement?.depleted) result.depleted = true;
            }, (error) => {
              result.calls++;
              this.#o.logger.error(
                { connector: connector.id, error: errorText(error) },
                "Provider fetch failed unexpectedly",
              );
            });
            running.add(task);
            void task.finally(() => running.delete(task));
            continue;
          }
          if (reservation.reason === "interval" || reservation.reason === "in_flight") {
            // Permits free up as calls settle, long before they would lapse: what bounds that
            // wait is how long this refill has waited for them.
            const nowMs = performance.now();
            if (reservation.reason === "in_flight") permitWaitSince ??= nowMs;
            const waitedMs = reservation.reason === "in_flight"
              ? nowMs - (permitWaitSince ?? nowMs)
              : reservation.waitMs;
            if (waitedMs > this.#maxWaitMs) {
              stoppedBy = reservation.reason;
              continue;
            }
            if (!waited.has(reservation.reason)) {
              waited.add(reservation.reason);
              this.#o.logger.debug(
                {
                  connector: connector.id,
                  reason: reservation.reason,
                  wait_ms: reservation.waitMs,
                },
                "Provider fetch waiting",
              );
            }
            // The interval's end, or one of ours finishing; another worker's permit is asked
            // for again soon, since its call settles long before the permit would lapse.
            const waitMs = reservation.reason === "in_flight"
              ? Math.min(reservation.waitMs, PERMIT_POLL_MS)
              : reservation.waitMs;
            // A stop ends the wait; the loop's own check sees it (sleep rejects for nothing else).
            await Promise.race([sleep(waitMs, stop).catch(() => {}), ...running]);
            continue;
          }
          stoppedBy = reservation.reason;
          continue;
        }
        if (running.size === 0) break;
        await Promise.race(running);
      }
    } catch (error) {
      // Nothing above should throw; should it, the refill still answers what it did.
      this.#o.logger.error(
        { connector: connector.id, error: errorText(error) },
        "Provider refill failed",
      );
      await Promise.allSettled(running);
    }
    return {
      calls: result.calls,
      byKind,
      added: result.added,
      ...(stoppedBy === undefined ? {} : { stoppedBy }),
      depleted: result.depleted,
    };
  }

  /** One reserved call, read, added, settled and recorded. Never throws. */
  async #call(
    connector: ProviderApiConnector,
    permit: FetchPermit,
    spec: AnswerSpec,
    signal: AbortSignal,
  ): Promise<CallOutcome> {
    const o = this.#o;
    const fetch = connector.config.fetch;
    // What the ledger counts: the reservation until the call's outcome is known.
    let actual = permit.count;
    let kind: FetchKind | undefined;
    let error: unknown;
    let durationMs: number | undefined;
    let answer: ParsedAnswer | undefined;
    let added = 0;
    let duplicates = 0;
    let overMax = 0;
    let addFailed = false;
    try {
      let call;
      try {
        call = renderFetchCall(fetch, connector.credential, permit.count);
      } catch (renderError) {
        actual = 0; // never sent
        throw renderError;
      }
      const startedAt = performance.now();
      let body: Buffer;
      try {
        body = (await callProvider(call, {
          ...o.egress,
          timeoutMs: fetch.timeout_ms,
          signal,
        })).body;
      } finally {
        durationMs = performance.now() - startedAt;
      }
      const nowMs = this.#nowMs();
      answer = parseAnswer(body, spec, nowMs);
      const unreadable = unreadableAnswer(answer);
      if (unreadable !== undefined) throw unreadable;
      actual = answer.counts.parsed;
      duplicates = answer.counts.repeated;
      if (!signal.aborted) {
        let fresh = 0;
        if (answer.proxies.length > 0) {
          try {
            const add = await o.pool.add(
              { id: connector.id, projectId: connector.projectId },
              answer.proxies,
              { nowMs, maxSize: connector.config.pool.max_size },
            );
            added = add.added;
            overMax = add.overMax;
            duplicates += add.duplicates;
            // New proxies the pool had no room for are still new: not duplicates.
            fresh = add.added + add.overMax;
          } catch (addError) {
            // Ours, not the provider's: no classification, no back-off.
            addFailed = true;
            o.logger.warn(
              { connector: connector.id, error: errorText(addError) },
              "Provider fetch's proxies not added to the pool",
            );
          }
        }
        if (!addFailed) kind = answerKind(answer, fresh);
      }
    } catch (caught) {
      error = caught;
      if (!signal.aborted) {
        kind = FetchKind.error;
        // An error status: the provider answered, and handed nothing out.
        if (caught instanceof VendorCallError && caught.status !== undefined) actual = 0;
      }
    }
    const status = error instanceof VendorCallError ? error.status : undefined;
    const retryAfterSeconds = error instanceof VendorCallError
      ? error.retryAfterSeconds
      : undefined;
    let settlement: Settlement | undefined;
    try {
      settlement = await o.coordinator.settle(permit, {
        actual,
        ...(kind === undefined ? {} : { kind }),
        rateLimited: status === 429,
        ...(retryAfterSeconds === undefined ? {} : { retryAfterMs: retryAfterSeconds * 1000 }),
        depletedAfterEmpty: connector.config.pool.depleted_after_empty,
      });
    } catch (settleError) {
      o.logger.warn(
        { connector: connector.id, error: errorText(settleError) },
        "Provider fetch not settled; its permit lapses and counts at its reservation",
      );
    }
    if (kind !== undefined) {
      o.metrics?.observe({
        connectorId: connector.id,
        kind,
        ...(durationMs === undefined ? {} : { durationMs }),
        rateLimited: status === 429,
        backoffStarted: kind === FetchKind.error && settlement?.outcome === "settled",
        added,
        duplicates,
      });
    }
    o.logger.debug({
      connector: connector.id,
      kind: kind ?? (signal.aborted ? "cancelled" : "unrecorded"),
      count: permit.count,
      reserved_at_ms: permit.reservedAtMs,
      ...(status === undefined ? {} : { status }),
      ...(durationMs === undefined ? {} : { duration_ms: Math.round(durationMs) }),
      entries: answer?.counts.entries ?? 0,
      parsed: answer?.counts.parsed ?? 0,
      invalid: answer?.counts.invalid ?? 0,
      expired: answer?.counts.expired ?? 0,
      added,
      duplicates,
      over_max: overMax,
      ledger_counted: actual,
      ...(settlement === undefined ? {} : {
        empty_streak: settlement.emptyStreak,
        backoff_until: settlement.backoffUntilMs,
      }),
    }, "Provider fetch");
    if (kind === FetchKind.error) {
      o.logger.warn({
        connector: connector.id,
        error: errorText(error),
        ...(status === undefined ? {} : { status }),
        ...(settlement === undefined || settlement.backoffUntilMs === 0
          ? {}
          : { backoff_until: new Date(settlement.backoffUntilMs).toISOString() }),
      }, "Provider fetch failed; backing off");
    }
    return { kind, added, settlement };
  }
}
