/**
 * The loop-lag monitor's part: how late a half-second timer fired over the last full minute,
 * which is what every other await in the process paid.
 */
import type { Registry } from "prom-client";
import { type Scrape, seconds, TelemetryPart } from "./family.ts";

export class LoopLagTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.gauge({
      name: "octoprox_event_loop_lag_worst_seconds",
      help: "The latest a half-second timer fired in the last full minute.",
      samples: ({ snapshot }) => [[{}, seconds(snapshot.loop_lag.worst_ms)]],
    });
    this.gauge({
      name: "octoprox_event_loop_lag_mean_seconds",
      help: "How late a half-second timer fired on average in the last full minute.",
      samples: ({ snapshot }) => [[{}, seconds(snapshot.loop_lag.mean_ms)]],
    });
  }
}
