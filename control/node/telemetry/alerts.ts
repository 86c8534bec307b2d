/**
 * Alerting in an api process (control/alerts/): the open events by severity as its evaluator
 * last counted them (every process's events: take the max across processes, not the sum), and
 * the delivery tries it made by outcome. Read off the loops' rows, told by the fields only
 * their classes write.
 */
import type { Registry } from "prom-client";
import type { LoopSnapshot } from "../../../shared/async/loop.ts";
import type { AlertDelivererSnapshot } from "../../alerts/deliverer.ts";
import { DELIVERY_OUTCOMES } from "../../alerts/deliverer.ts";
import type { AlertEvaluatorSnapshot } from "../../alerts/evaluator.ts";
import { ALERT_SEVERITIES } from "../../model/alerts.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";

function isEvaluator<T extends LoopSnapshot>(loop: T): loop is T & AlertEvaluatorSnapshot {
  return "alerts_firing" in loop;
}

function isDeliverer<T extends LoopSnapshot>(loop: T): loop is T & AlertDelivererSnapshot {
  return "alert_deliveries" in loop;
}

export class AlertTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.gauge<"severity">({
      name: "octoprox_alerts_firing",
      help: "Alert events open (fired, not resolved) at the evaluator's last pass, by severity.",
      labelNames: ["severity"],
      samples: (scrape) =>
        scrape.snapshot.loops.filter(isEvaluator).flatMap((row) =>
          ALERT_SEVERITIES.map((severity) =>
            [{ severity }, row.alerts_firing[severity]] as Sample<"severity">
          )
        ),
    });
    this.counter<"outcome">({
      name: "octoprox_alert_deliveries_total",
      help: "Alert delivery tries this process made, by outcome (delivered, retried, given_up).",
      labelNames: ["outcome"],
      samples: (scrape) =>
        scrape.snapshot.loops.filter(isDeliverer).flatMap((row) =>
          DELIVERY_OUTCOMES.map((outcome) =>
            [{ outcome }, row.alert_deliveries[outcome]] as Sample<"outcome">
          )
        ),
    });
  }
}
