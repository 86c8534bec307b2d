/// <reference no-default-lib="true" />
/// <reference lib="deno.worker" />
/**
 * One worker isolate of a gateway process (started by gateway/app/isolates.ts): its own router
 * and guard (isolate-core.ts `buildIsolateCore`) over the main isolate's shared dispatch counts,
 * its own HTTP and SOCKS5 listeners on the main isolate's ports (SO_REUSEPORT: the kernel spreads
 * new connections over the isolates), the process's connection budget. It follows no feed itself:
 * the main isolate hands it each applied feed's delta with the slots to index it by.
 *
 * Messages are handled one at a time, in order (a feed before the bind that needs it). Nothing
 * here throws out of a handler: a failure is reported to the main isolate.
 */
import { Dispatch } from "../../shared/routing/dispatch.ts";
import { SectionsMirror } from "../../shared/routing/feed-share.ts";
import type { CoreRouter } from "../../shared/routing/router.ts";
import { ConnectionBudget } from "../net/io/budget.ts";
import { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import type { FromWorker, ToWorker } from "./isolate-messages.ts";
import { buildListeners, type IsolateListeners } from "./listener.ts";
import { createLogger, type Logger } from "../base/log.ts";
import { GatewayMetrics, type MetricsSnapshot } from "../base/metrics.ts";
import { buildIsolateCore, type IsolateCore } from "./isolate-core.ts";
import { loadMitmCaFiles } from "./mitm-ca.ts";

interface WorkerState extends IsolateListeners {
  index: number;
  logger: Logger;
  core: IsolateCore;
  router: CoreRouter;
  dispatch: Dispatch;
  mirror: SectionsMirror;
  metrics: GatewayMetrics;
}

let state: WorkerState | undefined;
let queue: Promise<void> = Promise.resolve();
let stopping = false;

const post = (message: FromWorker) => self.postMessage(message);
const textDecoder = new TextDecoder();

/** This isolate's counters for the main isolate's /metrics, its core's series included. */
function snapshotOf(current: WorkerState): MetricsSnapshot {
  return {
    ...current.metrics.snapshot(current.index),
    core: current.core.samples(),
    state: current.core.state(),
  };
}

function failed(stage: "init" | "feed" | "bind", error: unknown): void {
  post({ type: "failed", stage, message: error instanceof Error ? error.message : String(error) });
}

async function init(message: Extract<ToWorker, { type: "init" }>): Promise<void> {
  const { settings, instance, index } = message;
  // Lines go to the main isolate, which writes them in order with its own.
  const logger = createLogger({
    level: settings.logLevel,
    instance: `${instance}/${index}`,
    write: (bytes) => {
      post({ type: "log", text: textDecoder.decode(bytes) });
      return Promise.resolve(bytes.length);
    },
  });
  globalThis.addEventListener("unhandledrejection", (event) => {
    event.preventDefault();
    logger.error("Unhandled rejection", { error: event.reason });
  });
  // The main isolate's CA, from the text it read and checked: its own keys, the same CA.
  const mitmCa = await loadMitmCaFiles(message.mitmCa);
  const dispatch = new Dispatch({ follow: message.dispatch });
  const core = await buildIsolateCore(settings, logger, instance, {
    dispatch,
    isolate: index,
    // The process excludes a proxy this isolate tripped at once: the main isolate hands it on.
    shareTrip: (proxyId, untilMs) => post({ type: "quarantine", proxyId, untilMs }),
    freshness: new FeedFreshness(settings.feedMaxStaleMs, message.freshness),
  });
  const metrics = new GatewayMetrics();
  const listeners = buildListeners(settings, {
    router: core.serving,
    guard: core.guard,
    admissionSteps: core.admissionSteps,
    hooks: core.hooks,
    cooldowns: core.cooldowns,
    domains: core.domains,
    escalations: core.escalations,
    logger,
    metrics,
    budget: new ConnectionBudget(settings.maxClientConnections, message.budget),
    reusePort: true,
    mitmCa,
  });
  state = {
    index,
    logger,
    core,
    router: core.router,
    dispatch,
    mirror: new SectionsMirror(),
    metrics,
    ...listeners,
  };
  post({ type: "ready" });
}

function feed(message: Extract<ToWorker, { type: "feed" }>, current: WorkerState): void {
  const { delta } = message;
  current.dispatch.follow(
    message.dispatch,
    delta.proxySlots,
    delta.connectorSlots,
    delta.projectSlots,
  );
  const sections = current.mirror.apply(delta);
  current.router.apply(sections);
  // Kept until a build used them: a failed build's slots are needed by the next one.
  current.dispatch.followed();
}

function bind(message: Extract<ToWorker, { type: "bind" }>, current: WorkerState): void {
  current.http.start(message.proxyPort);
  if (current.socks !== undefined && message.socksPort !== null) {
    current.socks.start(message.socksPort);
  }
  post({ type: "bound" });
}

async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  const current = state;
  if (current !== undefined) {
    const step = async (name: string, run: () => Promise<void>) => {
      try {
        await run();
      } catch (error) {
        current.logger.error(`Stop step failed: ${name}`, { error });
      }
    };
    await Promise.all([
      step("proxy listener", () => current.http.close()),
      step("SOCKS5 listener", () => current.socks?.close() ?? Promise.resolve()),
    ]);
    await step("routing core", () => current.core.stop());
    await current.logger.flush();
  }
  post({ type: "stopped" });
  self.close();
}

async function handle(message: ToWorker): Promise<void> {
  if (message.type === "init") {
    try {
      await init(message);
    } catch (error) {
      failed("init", error);
    }
    return;
  }
  if (message.type === "stop") return await stop();
  const current = state;
  if (current === undefined || stopping) return;
  switch (message.type) {
    case "feed":
      try {
        feed(message, current);
      } catch (error) {
        current.logger.error("Feed from the main isolate not applied", { error });
        failed("feed", error);
      }
      return;
    case "bind":
      try {
        bind(message, current);
      } catch (error) {
        failed("bind", error);
      }
      return;
    case "metrics":
      post({ type: "metrics", id: message.id, snapshot: snapshotOf(current) });
      return;
    case "quarantine":
      current.router.quarantineLocally(message.proxyId, message.untilMs);
      return;
  }
}

self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data;
  // Metrics are answered at once; everything else in order, one at a time.
  if (message.type === "metrics" && state !== undefined) {
    post({ type: "metrics", id: message.id, snapshot: snapshotOf(state) });
    return;
  }
  queue = queue.then(() => handle(message)).catch((error) => {
    state?.logger.error("Worker isolate message failed", { error });
  });
};
