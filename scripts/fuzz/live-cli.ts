/**
 * `npm run fuzz:live -- [options]`: the live fuzzer (live.ts) on the command line.
 *
 *   npm run fuzz:live -- --duration 60s --connections 200
 *       starts a gateway of its own (no control plane: a feed in Redis, an origin and an
 *       upstream on loopback, OCTOPROX_CLIENT_IDLE_TIMEOUT 2 s, OCTOPROX_MAX_HEADER_BYTES 8192)
 *       and fuzzes it; needs the test bed's Redis.
 *   npm run fuzz:live -- --gateway 127.0.0.1:8080 --socks 127.0.0.1:1080 \
 *       --status 127.0.0.1:8081 --pid 1234 --log gateway.log --login user:pass \
 *       --origin 127.0.0.1:9000 --idle-timeout 60s --max-header-bytes 32768
 *       fuzzes a running gateway: its timeouts and header limit as it was started with
 *       (OCTOPROX_CLIENT_IDLE_TIMEOUT, OCTOPROX_MAX_HEADER_BYTES), its log file scanned after.
 *
 * Other options: --seed N (random unless given; printed), --slack 3s (added to the close bound),
 * --rss-bound 400 (MB), --json. Exit status: 0 without violations, 1 with any, 2 on bad usage.
 * Loopback targets only.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parseDuration, UsageError } from "../loadgen/options.ts";
import { BENCH_LOGIN, startRoutedGateway } from "../bench/services.ts";
import {
  type Endpoint,
  formatLiveFuzzReport,
  type LiveFuzzOptions,
  type LiveFuzzReport,
  runLiveFuzz,
  SWEEP_MS,
} from "./live.ts";

/** A gateway of our own: short timeouts, so a minute's run sees many of them expire. */
const OWN_IDLE_TIMEOUT_S = 2;
const OWN_MAX_HEADER_BYTES = 8192;
/**
 * Resident memory at most: the gateway idles near 60-80 MB with a small feed; 200 hostile
 * connections hold a 16 KB head buffer each at most, so 400 MB means a leak or an unbounded
 * buffer, not load.
 */
const DEFAULT_RSS_BOUND_MB = 400;

function endpoint(text: string, what: string): Endpoint {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(text.trim());
  if (!match) throw new UsageError(`${what} must be host:port`);
  return { host: match[1], port: Number(match[2]) };
}

function positive(text: string, what: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new UsageError(`${what} must be a positive integer`);
  }
  return value;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      gateway: { type: "string" },
      socks: { type: "string" },
      status: { type: "string" },
      pid: { type: "string" },
      log: { type: "string" },
      login: { type: "string" },
      origin: { type: "string" },
      "idle-timeout": { type: "string" },
      "max-header-bytes": { type: "string" },
      duration: { type: "string", default: "60s" },
      connections: { type: "string", default: "200" },
      seed: { type: "string" },
      slack: { type: "string", default: "3s" },
      "rss-bound": { type: "string", default: String(DEFAULT_RSS_BOUND_MB) },
      json: { type: "boolean", default: false },
    },
  });
  const seed = values.seed === undefined
    ? Math.floor(Math.random() * 2 ** 31)
    : positive(values.seed, "--seed");
  const durationMs = parseDuration(values.duration, "--duration");
  const connections = positive(values.connections, "--connections");
  const slackMs = parseDuration(values.slack, "--slack");
  const rssBoundMb = positive(values["rss-bound"], "--rss-bound");
  const log = (line: string) => process.stderr.write(`${line}\n`);

  let options: LiveFuzzOptions;
  let stop: (() => Promise<void>) | undefined;
  if (values.gateway === undefined) {
    const own = await startRoutedGateway({
      OCTOPROX_CLIENT_IDLE_TIMEOUT: String(OWN_IDLE_TIMEOUT_S),
      OCTOPROX_MAX_HEADER_BYTES: String(OWN_MAX_HEADER_BYTES),
    });
    stop = own.stop;
    log(`started a gateway (pid ${own.gateway.pids[0]}) on 127.0.0.1:${own.gateway.port}`);
    options = {
      proxy: { host: "127.0.0.1", port: own.gateway.port },
      socks: { host: "127.0.0.1", port: own.socksPort },
      status: { host: "127.0.0.1", port: own.gateway.statusPort },
      pid: own.gateway.pids[0],
      logLines: own.gateway.output,
      login: BENCH_LOGIN,
      origin: `127.0.0.1:${own.origin.port}`,
      maxHeaderBytes: OWN_MAX_HEADER_BYTES,
      closeBoundMs: OWN_IDLE_TIMEOUT_S * 1000 + SWEEP_MS + slackMs,
      durationMs,
      connections,
      seed,
      rssBoundMb,
      log,
    };
  } else {
    const idleMs = parseDuration(values["idle-timeout"] ?? "60s", "--idle-timeout");
    const logFile = values.log;
    const colon = values.login?.indexOf(":") ?? -1;
    options = {
      proxy: endpoint(values.gateway, "--gateway"),
      socks: values.socks === undefined ? undefined : endpoint(values.socks, "--socks"),
      status: values.status === undefined ? undefined : endpoint(values.status, "--status"),
      pid: values.pid === undefined ? undefined : positive(values.pid, "--pid"),
      login: values.login === undefined || colon < 0
        ? undefined
        : { username: values.login.slice(0, colon), password: values.login.slice(colon + 1) },
      origin: values.origin,
      maxHeaderBytes: positive(values["max-header-bytes"] ?? "32768", "--max-header-bytes"),
      closeBoundMs: idleMs + SWEEP_MS + slackMs,
      // Read after the run: the file holds what the gateway wrote meanwhile.
      logLines: logFile === undefined ? undefined : () => readFileSync(logFile, "utf8").split("\n"),
      durationMs,
      connections,
      seed,
      rssBoundMb,
      log,
    };
  }
  try {
    log(
      `fuzzing for ${durationMs / 1000} s with ${connections} connections at once, seed ${seed}; ` +
        `close bound ${options.closeBoundMs} ms`,
    );
    return print(await runLiveFuzz(options), values.json);
  } finally {
    await stop?.();
  }
}

function print(report: LiveFuzzReport, json: boolean): number {
  process.stdout.write(json ? `${JSON.stringify(report)}\n` : `${formatLiveFuzzReport(report)}\n`);
  return report.violations.length === 0 ? 0 : 1;
}

try {
  process.exitCode = await main();
} catch (error) {
  if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE")) {
    process.stderr.write(`fuzz:live: ${(error as Error).message}\n`);
    process.exitCode = 2;
  } else {
    throw error;
  }
}
process.exit(process.exitCode ?? 0);
