/**
 * What the admin API is built from: the process's shared parts, plus who it is and its
 * readiness. The node builds them once per process; tests build the same from their own stores.
 */
import type { ControlDeps } from "../core/deps.ts";
import type { ObservationSink } from "../geo/observation.ts";
import type { Extraction } from "../provider-api/extraction/extraction.ts";
import type { GeoDefinitions } from "../geo/definitions.ts";
import type { EchoPlaces } from "../geo/echo-places.ts";

export interface Readiness {
  ready: boolean;
  /** Every reason not to serve, such as `postgres: no answer to the last heartbeat`. */
  reasons: string[];
}

export interface ProcessInfo {
  instance: string;
  role: string;
  version: string;
  startedAt: string;
}

/** What /metrics answers: the text exposition and its content type. */
export interface MetricsText {
  contentType: string;
  body: string;
}

export interface ApiDeps extends ControlDeps {
  process: ProcessInfo;
  /** The node's readiness, from its last heartbeat and its runtimes. */
  readiness(): Readiness;
  /** The process's telemetry, rendered from its snapshot when asked. */
  metrics(): Promise<MetricsText>;
  /** The dashboard's build (default: the checkout's dist/web). */
  webDir?: string;
  /** The extraction API's parts (the api runtime's, for its snapshot); the app makes its own otherwise. */
  extraction?: Extraction;
  /** The IP databases and settings in force (the api runtime's, shared by its routes). */
  geo?: GeoDefinitions;
  /** Where the echo places the addresses it answers; the echo answers addresses alone without. */
  echoPlaces?: EchoPlaces;
  /** Where exits a route learns go: the process's observation recorder. */
  observations: ObservationSink;
}
