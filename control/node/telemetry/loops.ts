/**
 * Every loop's job stats, labelled with the loop's name: a fixed set per process, since loop
 * names are identifiers. A loop's state and its run counters tell two stories apart: whether
 * its task still exists, and whether the work inside it succeeds.
 */
import type { Registry } from "prom-client";
import { LoopState } from "../../../shared/async/loop.ts";
import { type Scrape, seconds, TelemetryPart } from "./family.ts";

const LOOP_STATES = Object.values(LoopState);

export class LoopTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.counter<"loop">({
      name: "octoprox_loop_runs_total",
      help: "Cycles that returned, idle ones included (a group consumer's are its batches).",
      labelNames: ["loop"],
      samples: ({ snapshot }) => snapshot.loops.map((loop) => [{ loop: loop.name }, loop.runs]),
    });
    this.counter<"loop">({
      name: "octoprox_loop_idle_runs_total",
      help: "Cycles that returned having found nothing to do.",
      labelNames: ["loop"],
      samples: ({ snapshot }) =>
        snapshot.loops.map((loop) => [{ loop: loop.name }, loop.idle_runs]),
    });
    this.counter<"loop">({
      name: "octoprox_loop_failures_total",
      help: "Cycles that failed.",
      labelNames: ["loop"],
      samples: ({ snapshot }) => snapshot.loops.map((loop) => [{ loop: loop.name }, loop.failures]),
    });
    this.gauge<"loop">({
      name: "octoprox_loop_consecutive_failures",
      help: "Cycles failed in a row since the last that worked (0 when the last worked).",
      labelNames: ["loop"],
      samples: ({ snapshot }) =>
        snapshot.loops.map((loop) => [{ loop: loop.name }, loop.consecutive_failures]),
    });
    this.gauge<"loop" | "state">({
      name: "octoprox_loop_state",
      help: "1 for the state the loop's task is in (running, stopped, failed), 0 for the others.",
      labelNames: ["loop", "state"],
      samples: ({ snapshot }) =>
        snapshot.loops.flatMap((loop) =>
          LOOP_STATES.map((state) => [{ loop: loop.name, state }, loop.state === state ? 1 : 0])
        ),
    });
    this.gauge<"loop">({
      name: "octoprox_loop_last_run_timestamp_seconds",
      help: "When the loop's last cycle ended (Unix time); absent before its first.",
      labelNames: ["loop"],
      samples: ({ snapshot }) =>
        snapshot.loops.flatMap((loop) =>
          loop.last_run_at === null
            ? []
            : [[{ loop: loop.name }, seconds(Date.parse(loop.last_run_at))] as const]
        ),
    });
    this.gauge<"loop">({
      name: "octoprox_loop_last_duration_seconds",
      help: "How long the loop's last cycle took; absent before its first.",
      labelNames: ["loop"],
      samples: ({ snapshot }) =>
        snapshot.loops.flatMap((loop) =>
          loop.last_duration_ms === null
            ? []
            : [[{ loop: loop.name }, seconds(loop.last_duration_ms)] as const]
        ),
    });
  }
}
