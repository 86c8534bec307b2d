/**
 * The process's own part of the snapshot: the build it runs, its readiness and what each store
 * answered the last heartbeat.
 */
import type { Registry } from "prom-client";
import type { Store } from "../../../shared/errors.ts";
import { flag, type Scrape, TelemetryPart } from "./family.ts";

export class ProcessTelemetry extends TelemetryPart {
  constructor(registry: Registry, read: () => Scrape) {
    super(registry, read);
    this.gauge<"version">({
      name: "octoprox_build_info",
      help: "The release this process runs; always 1.",
      labelNames: ["version"],
      samples: ({ snapshot }) => [[{ version: snapshot.version }, 1]],
    });
    this.gauge({
      name: "octoprox_ready",
      help: "1 while the process is ready to serve (what /ready answers 200 to), else 0.",
      samples: ({ snapshot }) => [[{}, flag(snapshot.ready)]],
    });
    this.gauge<"store">({
      name: "octoprox_store_up",
      help: "1 when the store answered the last heartbeat's check, else 0.",
      labelNames: ["store"],
      samples: ({ snapshot }) =>
        (Object.keys(snapshot.stores) as Store[]).map((store) => [
          { store },
          flag(snapshot.stores[store].ok),
        ]),
    });
  }
}
