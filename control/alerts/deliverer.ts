/**
 * The delivery loop: in every api process, it claims the deliveries that are due (none that
 * another process holds), tries each, logs the try and moves it on (deliveries.ts). Between
 * passes it waits a short poll, or less when this process owed one. Its snapshot counts tries
 * by outcome for /metrics.
 */
import type { Database } from "../../db/client.ts";
import { errorText } from "../../shared/errors.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { type CycleResult, Loop, type LoopSnapshot } from "../../shared/async/loop.ts";
import type { Logger } from "../core/logging.ts";
import { nextTryAt } from "./backoff.ts";
import { claimDue, recordTry } from "./deliveries.ts";
import { sendDelivery } from "./webhook.ts";

export const DELIVERY_OUTCOMES = ["delivered", "retried", "given_up"] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

export interface AlertDelivererSnapshot extends LoopSnapshot {
  /** Tries this process made, by what came of them. */
  alert_deliveries: Record<DeliveryOutcome, number>;
}

export interface DelivererOptions {
  database: Database;
  settings: Pick<
    ControlSettings,
    "internalSecret" | "egressAllowLoopback" | "alertRetryBaseDelayMs" | "smtpUrl" | "smtpFrom"
  >;
  logger: Logger;
  /** Between passes when nothing woke it. */
  pollMs: number;
}

/** The poll for a base delay: a tenth of it, from 50 ms to a second. */
export function deliveryPollMs(baseDelayMs: number): number {
  return Math.min(1000, Math.max(50, Math.round(baseDelayMs / 10)));
}

export class AlertDeliverer extends Loop<Logger> {
  readonly #o: DelivererOptions;
  readonly #counts: Record<DeliveryOutcome, number> = { delivered: 0, retried: 0, given_up: 0 };

  constructor(options: DelivererOptions) {
    super({ name: "alert_delivery", logger: options.logger });
    this.#o = options;
  }

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(this.#o.pollMs, signal);
  }

  protected override async cycle(signal: AbortSignal): Promise<CycleResult> {
    return (await this.deliverDue(signal)) > 0;
  }

  /** Tries every delivery due now; answers how many were tried. */
  async deliverDue(signal?: AbortSignal): Promise<number> {
    const { database, settings } = this.#o;
    const due = await claimDue(database);
    await Promise.all(due.map(async (delivery) => {
      const sent = await sendDelivery(settings, delivery, signal);
      const delivered = sent.error === null;
      const nowMs = Date.now();
      const next = delivered ? undefined : nextTryAt(
        settings.alertRetryBaseDelayMs,
        delivery.attempts + 1,
        new Date(delivery.created_at).getTime(),
        nowMs,
      );
      await recordTry(database, delivery.id, { ...sent, delivered, nextTryAtMs: next });
      const outcome: DeliveryOutcome = delivered
        ? "delivered"
        : next === undefined
        ? "given_up"
        : "retried";
      this.#counts[outcome] += 1;
      if (outcome === "given_up") {
        this.logger.warn(
          { delivery: delivery.id, channel: delivery.channel_id, attempts: delivery.attempts + 1 },
          "Alert delivery given up after a day of tries",
        );
      }
    }));
    return due.length;
  }

  /** Said once per streak: nothing is lost, the next pass reads Postgres again. */
  protected override cycleFailed(error: unknown, consecutiveFailures: number): void {
    if (consecutiveFailures !== 1) return;
    this.logger.warn(
      { error: errorText(error) },
      "Alert delivery pass failed: deliveries wait in Postgres for the next",
    );
  }

  override snapshot(): AlertDelivererSnapshot {
    return { ...super.snapshot(), alert_deliveries: { ...this.#counts } };
  }
}
