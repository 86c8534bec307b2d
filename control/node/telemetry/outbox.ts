/**
 * The outbox relay (control/core/outbox.ts) of an api or worker process: the change entries it
 * announced for writers that could not, the rows waiting, and the oldest one's age (the relay's
 * lag). Read off its loop row, told by the fields only its class writes; no labels.
 */
import type { Registry } from "prom-client";
import type { LoopSnapshot } from "../../../shared/async/loop.ts";
import type { OutboxRelaySnapshot } from "../../core/outbox.ts";
import { type Sample, type Scrape, TelemetryPart } from "./family.ts";

function isRelay<T extends LoopSnapshot>(loop: T): loop is T & OutboxRelaySnapshot {
  return "outbox_relayed" in loop;
}

function relay(scrape: Scrape, value: (row: OutboxRelaySnapshot) => number): Sample<never>[] {
  return scrape.snapshot.loops.filter(isRelay).map((row) => [{}, value(row)] as const);
}

export class OutboxTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.counter({
      name: "octoprox_outbox_relayed_total",
      help: "Change entries this process's relay announced from the outbox (their writer had not).",
      samples: (scrape) => relay(scrape, (r) => r.outbox_relayed),
    });
    this.gauge({
      name: "octoprox_outbox_pending",
      help: "Outbox rows left after the relay's last pass, every writer's.",
      samples: (scrape) => relay(scrape, (r) => r.outbox_pending),
    });
    this.gauge({
      name: "octoprox_outbox_lag_seconds",
      help: "Age of the oldest outbox row at the relay's last pass (0: none waiting).",
      samples: (scrape) => relay(scrape, (r) => r.outbox_lag_seconds),
    });
  }
}
