/**
 * The gateway process (Deno):
 *
 *   DENO_NO_UPDATE_CHECK=1 deno run --allow-net --allow-env=OCTOPROX_* --ignore-env \
 *     --allow-sys=hostname gateway/main.ts
 *
 * Settings first (a bad or missing one: one line naming it, exit 2), then the TLS interception
 * CA (gateway/app/mitm-ca.ts: unset, unreadable or unusable, one line naming the setting and the
 * path, exit 2: a gateway that cannot intercept must not serve), then the status listener, the
 * routing core and its feed follower; the proxy listener binds once the first feed is applied.
 * SIGTERM or SIGINT stops it and exits 0; a second signal exits at once with 1, and so does a
 * stop that overruns its bound (stopBoundMs: 10 s with the defaults, Redis or not).
 *
 * OCTOPROX_GATEWAY_ISOLATES isolates serve the process (0: one per core): this one, which also
 * follows the feed, and workers beside it (gateway/app/isolates.ts). 1, the default, serves from
 * this one alone.
 */
import { parseGatewaySettings, SETTING_NAMES, SettingsError } from "../shared/settings.ts";
import type { GatewaySettings } from "../shared/settings.ts";
import { ConnectionBudget } from "./net/io/budget.ts";
import { GatewayProcess, runUntilSignal, stopBoundMs } from "./app/gateway.ts";
import { IsolatePool } from "./app/isolates.ts";
import { createLogger, serialWriter } from "./base/log.ts";
import { buildRoutingCore } from "./app/routing-core.ts";
import { type LoadedMitmCa, readMitmCa } from "./app/mitm-ca.ts";
import { StartRefused } from "./app/start-refused.ts";
import { trustUpstreamCasInEngine } from "./app/upstream-ca.ts";

function fail(message: string, code: number): never {
  console.error(`octoprox-gateway: ${message}`);
  Deno.exit(code);
}

/**
 * Only OCTOPROX_* variables are read, one by one: the process may read no others
 * (--allow-env=OCTOPROX_*; --ignore-env answers libraries' other lookups with undefined).
 */
function readEnvironment(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {};
  for (const name of SETTING_NAMES) env[name] = Deno.env.get(name);
  return env;
}

function instanceName(settings: GatewaySettings): string {
  if (settings.instanceId) return settings.instanceId;
  let host = "gateway";
  try {
    host = Deno.hostname().split(".")[0].replace(/[^A-Za-z0-9_-]/g, "") || host;
  } catch {
    // No sys permission for the host name: the random part still tells processes apart.
  }
  const suffix = crypto.getRandomValues(new Uint8Array(3));
  return `${host}-${[...suffix].map((byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

let settings: GatewaySettings;
try {
  settings = parseGatewaySettings(readEnvironment());
} catch (error) {
  if (error instanceof SettingsError) fail(error.message, 2);
  throw error;
}

// The CA before anything else: no listener, no Redis connection, without one it can use.
let mitmCa: LoadedMitmCa;
try {
  mitmCa = await readMitmCa(settings);
} catch (error) {
  if (error instanceof StartRefused) fail(error.message, 2);
  throw error;
}
trustUpstreamCasInEngine(settings.upstreamCaFile);

const instance = instanceName(settings);
const isolates = settings.isolates === 0
  ? Math.max(1, navigator.hardwareConcurrency || 1)
  : settings.isolates;
// Worker isolates' lines come through this isolate, written whole and in order with its own.
const stdout = serialWriter((bytes) => Deno.stdout.write(bytes));
const logger = createLogger({ level: settings.logLevel, instance, write: stdout });
const lineEncoder = new TextEncoder();
/** Worker lines not written yet, bounded as a logger's own queue is (the rest are dropped). */
const MAX_PENDING_WORKER_LOG_BYTES = 4 * 1024 * 1024;
let pendingWorkerLogBytes = 0;
function writeWorkerLines(text: string): void {
  const bytes = lineEncoder.encode(text);
  if (pendingWorkerLogBytes + bytes.length > MAX_PENDING_WORKER_LOG_BYTES) return;
  pendingWorkerLogBytes += bytes.length;
  void stdout(bytes).catch(() => {}).finally(() => {
    pendingWorkerLogBytes -= bytes.length;
  });
}

// A stray rejection is a bug to fix, not a reason to drop every tunnel on this gateway.
globalThis.addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  logger.error("Unhandled rejection", { error: event.reason });
});

let gateway: GatewayProcess;
let owed: (() => Readonly<Record<string, number>>) | undefined;
try {
  const core = await buildRoutingCore(settings, logger, instance);
  owed = () => core.owed();
  let pool: IsolatePool | undefined;
  const budget = new ConnectionBudget(settings.maxClientConnections);
  if (isolates > 1) {
    pool = new IsolatePool({
      workers: isolates - 1,
      settings,
      mitmCa: mitmCa.files,
      instance,
      logger,
      writeLines: writeWorkerLines,
      dispatch: core.router.dispatch,
      budget,
      freshness: core.freshness,
      quarantined: (proxyId, untilMs) => core.router.quarantineLocally(proxyId, untilMs),
    });
    const workers = pool;
    core.shareWith((delta) => workers.share(delta));
    core.shareTripsWith((proxyId, untilMs) => workers.shareQuarantine(proxyId, untilMs));
  }
  gateway = new GatewayProcess({
    settings,
    instance,
    logger,
    core,
    isolates: pool,
    budget,
    isolatesConfigured: isolates,
    mitmCa: mitmCa.ca,
    mitmCaOverlap: mitmCa.overlap,
  });
  await gateway.start();
} catch (error) {
  logger.fatal("Start failed", { error });
  await logger.flush();
  fail(`start failed: ${error instanceof Error ? error.message : String(error)}`, 1);
}
logger.info("Gateway started; the proxy port opens with the first feed", {
  proxyPort: settings.proxyPort,
  statusPort: gateway.statusAddr?.port,
  isolates,
});
await runUntilSignal(gateway, logger, { boundMs: stopBoundMs(settings), owed });
