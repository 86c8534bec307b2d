/**
 * What the main isolate and the worker isolates of one gateway process tell each other
 * (gateway/app/isolates.ts, gateway/app/isolate-worker.ts). Structured clones: plain data and
 * SharedArrayBuffers, which cross shared, not copied.
 */
import type { GatewaySettings } from "../../shared/settings.ts";
import type { DispatchBuffers } from "../../shared/routing/dispatch.ts";
import type { SectionsDelta } from "../../shared/routing/feed-share.ts";
import type { MetricsSnapshot } from "../base/metrics.ts";
import type { MitmCaFiles } from "./mitm-ca.ts";

export type ToWorker =
  | {
    type: "init";
    settings: GatewaySettings;
    /** The TLS interception CA's files as the main isolate read them (mitm-ca.ts). */
    mitmCa: MitmCaFiles;
    instance: string;
    /** 1.. (0 is the main isolate). */
    index: number;
    /** The main isolate's dispatch counts: every isolate counts on them. */
    dispatch: DispatchBuffers;
    /** The process's OCTOPROX_MAX_CLIENT_CONNECTIONS count (budget.ts). */
    budget: SharedArrayBuffer;
    /** When the main isolate last read the feed (feed-freshness.ts). */
    freshness: SharedArrayBuffer;
  }
  /** An applied feed's delta, with the buffers as they are now (one may have been replaced). */
  | { type: "feed"; delta: SectionsDelta; dispatch: DispatchBuffers }
  /** Bind the ports the main isolate bound (SO_REUSEPORT). */
  | { type: "bind"; proxyPort: number; socksPort: number | null }
  | { type: "metrics"; id: number }
  /** A quarantine another isolate's rate limiter tripped: excluded here at once too. */
  | { type: "quarantine"; proxyId: string; untilMs: number }
  | { type: "stop" };

export type FromWorker =
  /** Built its core; takes feeds from now on. */
  | { type: "ready" }
  | { type: "bound" }
  | { type: "failed"; stage: "init" | "feed" | "bind"; message: string }
  | { type: "metrics"; id: number; snapshot: MetricsSnapshot }
  /** This worker's rate limiter tripped a proxy: for the main isolate and the other workers. */
  | { type: "quarantine"; proxyId: string; untilMs: number }
  /** Log lines (JSON, newline-terminated) for the main isolate to write in order with its own. */
  | { type: "log"; text: string }
  | { type: "stopped" };
