/**
 * The real gateway (gateway/main.ts under Deno, with the permissions `npm start` and the build
 * use) on a feed the real publisher writes into Redis, for tests that need real routing
 * (usernames with options, countries, concurrency limits): a feed described in a few lines, a
 * gateway whose ports are read from its log (the raw SOCKS5 client: testkit/clients/socks.ts).
 */
import { type ChildProcess, spawn } from "node:child_process";
import {
  type FeedConnector,
  type FeedRateLimit,
  SCHEMA_VERSION,
} from "../../shared/feed/models.ts";
import { type FeedBed, feedProject, type FeedProjectSpec, publishFeedContent } from "../feed.ts";
import { waitUntil } from "../wait.ts";
import { connector as feedConnector } from "./feed-fixtures.ts";
import { DENO_BIN, gatewayRunArgs } from "../../scripts/gateway-command.ts";
import { collectLogLines, gatewayEnv, type LogLine } from "./fixture-gateway.ts";
import { ROOT } from "../processes.ts";
import { seriesValue } from "../promtool.ts";

export interface FeedProxySpec {
  id: string;
  scheme: "http" | "https" | "socks4" | "socks5";
  host: string;
  port: number;
  country?: string | null;
  maxConcurrency?: number | null;
  /** The proxy's own credentials, which the gateway sends it. */
  username?: string | null;
  password?: string | null;
}

export interface FeedConnectorSpec {
  id: string;
  projectId: string;
  countries?: string[];
  rateLimit?: FeedRateLimit | null;
  /** What a client hears while the connector is blocked, and what the block does. */
  traffic?: FeedConnector["traffic"];
  /** What ranks it for escalation (none unless said). */
  tier?: number;
  pricePerGb?: number;
  proxies: FeedProxySpec[];
}

/** Publishes a feed of these projects and connectors (fenced by the bed's lease). */
export async function publishFeed(
  bed: FeedBed,
  spec: {
    projects: FeedProjectSpec[];
    connectors: FeedConnectorSpec[];
    /** The runtime section's quarantines and traffic blocks (none unless said). */
    quarantines?: { proxy_id: string; until_ms: number }[];
    trafficBlocks?: { connector_id: string; until_ms: number }[];
    projectBlocks?: { project_id: string; until_ms: number }[];
  },
): Promise<void> {
  const projects = await Promise.all(spec.projects.map((project) => feedProject(bed, project)));
  const content: Record<string, unknown> = {
    global: { schema: SCHEMA_VERSION, default_strategy: "round_robin", projects },
    runtime: {
      schema: SCHEMA_VERSION,
      quarantines: spec.quarantines ?? [],
      traffic_blocks: spec.trafficBlocks ?? [],
      project_blocks: spec.projectBlocks ?? [],
    },
  };
  for (const connector of spec.connectors) {
    content[`connector:${connector.id}`] = {
      schema: SCHEMA_VERSION,
      connector: feedConnector(connector.id, {
        project_id: connector.projectId,
        countries: connector.countries ?? [],
        rate_limit: connector.rateLimit ?? null,
        traffic: connector.traffic ?? null,
        ...(connector.tier === undefined ? {} : { tier: connector.tier }),
        ...(connector.pricePerGb === undefined ? {} : { price_per_gb: connector.pricePerGb }),
      }),
      proxies: connector.proxies.map((proxy) => ({
        id: proxy.id,
        scheme: proxy.scheme,
        host: proxy.host,
        port: proxy.port,
        username: proxy.username ?? null,
        password: proxy.password ?? null,
        country: proxy.country ?? null,
        status: "healthy",
        max_concurrency: proxy.maxConcurrency ?? null,
      })),
    };
  }
  await publishFeedContent(bed, Object.entries(content));
}

/**
 * A gateway on a hand-made feed for tests whose targets are all on loopback: takes the bed's
 * lease, starts the gateway with loopback destinations allowed (and `env`), publishes `spec`
 * and waits until the proxy port is bound.
 */
export async function startLoopbackGateway(
  bed: FeedBed,
  spec: Parameters<typeof publishFeed>[1],
  env: Record<string, string> = {},
): Promise<{ gateway: FeedGateway; proxyPort: number }> {
  await bed.lead();
  const gateway = await startFeedGateway(bed, {
    OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8",
    ...env,
  });
  await publishFeed(bed, spec);
  return { gateway, proxyPort: await gateway.proxyPort() };
}

/** Publishes the next feed to a running gateway and waits until the gateway applied it. */
export async function publishApplied(
  bed: FeedBed,
  gateway: FeedGateway,
  spec: Parameters<typeof publishFeed>[1],
): Promise<void> {
  const applies = await gateway.metric("octoprox_gateway_feed_applies_total");
  await publishFeed(bed, spec);
  await waitUntil(
    async () => (await gateway.metric("octoprox_gateway_feed_applies_total")) > applies,
    { timeoutMs: 10_000, message: "the gateway to apply the new feed" },
  );
}

export interface FeedGateway {
  readonly child: ChildProcess;
  readonly statusPort: number;
  /** Read from the log once bound (after the first feed). */
  proxyPort(): Promise<number>;
  socksPort(): Promise<number>;
  lines(): LogLine[];
  /** The first log line with this message (waits for it). */
  line(msg: string, timeoutMs?: number): Promise<LogLine>;
  output(): string;
  /** One series' value from /metrics (0 when absent). */
  metric(series: string): Promise<number>;
  /** SIGTERM; resolves the exit code. */
  stop(): Promise<number | null>;
}

/** Starts gateway/main.ts on the bed's Redis prefix, every port 0 (read from the log). */
export async function startFeedGateway(
  bed: FeedBed,
  env: Record<string, string> = {},
): Promise<FeedGateway> {
  const childEnv = gatewayEnv({
    OCTOPROX_REDIS_URL: process.env.OCTOPROX_TEST_REDIS_URL ?? "redis://127.0.0.1:6379",
    OCTOPROX_REDIS_PREFIX: bed.prefix,
    OCTOPROX_INTERNAL_SECRET: bed.secret,
    ...env,
  });
  const child = spawn(DENO_BIN, gatewayRunArgs(childEnv), {
    cwd: ROOT,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const parsed: LogLine[] = [];
  collectLogLines(child.stdout!, parsed, (text) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const line = (msg: string, timeoutMs = 20_000) =>
    waitUntil(() => {
      if (child.exitCode !== null) throw new Error(`gateway exited: ${output}`);
      return parsed.find((entry) => entry.msg === msg);
    }, { timeoutMs, intervalMs: 10, message: `the gateway's "${msg}"` });
  const statusPort = Number((await line("Status listener bound")).port);
  return {
    child,
    statusPort,
    proxyPort: async () => Number((await line("Proxy listener bound")).port),
    socksPort: async () => Number((await line("SOCKS5 listener bound")).port),
    lines: () => parsed,
    line,
    output: () => output,
    async metric(series: string) {
      const text = await (await fetch(`http://127.0.0.1:${statusPort}/metrics`)).text();
      return seriesValue(text, series) ?? 0;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
