/**
 * Suite `preflight`: what preflight adds to a request's wait, on the real gateway (a feed the real
 * publisher writes, no control plane), one shared upstream (bare-relay.ts), the origin
 * (origin.ts) and an echo that places every caller in DE (testkit/upstreams/echo.ts). Two
 * projects route through the same upstream, one with `location_preflight` off, one with
 * `report`; a client asks each for `-cc-de`, one request at a time on a keep-alive connection:
 *
 * - **a cache hit**: the verdict is in Redis; the added wait is the median request through the
 *   preflight project minus the median through the other, paired request by request;
 * - **a cache miss**: the verdict is deleted before each request, so each costs one echo through
 *   the upstream; its added wait is set beside **one echo alone** (the same GET of the echo
 *   through the upstream, made by the client on a connection of its own, as the gateway makes
 *   it). Budget: a hit adds at most 1 ms (one Redis read), a miss at most 2 ms beyond the echo.
 *
 * Each run is a round of BENCH_PREFLIGHT_REQUESTS (1,000) requests a side for the hit, and a
 * fifth of that for the miss; the figures are the medians of the runs.
 */
import { Redis } from "ioredis";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import { type FeedBed, feedBed, feedProject, publishFeedContent } from "../../testkit/feed.ts";
import { connector as feedConnector } from "../../testkit/gateway/feed-fixtures.ts";
import {
  ClientConnection,
  type Credentials,
  viaProxy,
} from "../../testkit/clients/proxy-client.ts";
import { type Echo, startEcho } from "../../testkit/upstreams/echo.ts";
import type { Service } from "../../testkit/upstreams/daemon.ts";
import { httpProxyRow, startDenoService, startGateway } from "./services.ts";
import {
  envPositive,
  formatNumber,
  median,
  percentile,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

const HIT_BUDGET_MS = 1;
const MISS_BEYOND_ECHO_BUDGET_MS = 2;
const OFF = { id: "off", username: "pfoff", password: "bench-pass" };
const ON = { id: "on", username: "pfon", password: "bench-pass" };

interface RoundTimes {
  off: number[];
  hit: number[];
  missOff: number[];
  miss: number[];
  echo: number[];
}

async function publish(bed: FeedBed, upstreamPort: number): Promise<void> {
  const projects = await Promise.all([
    feedProject(bed, OFF),
    feedProject(bed, ON).then((p) => ({ ...p, location_preflight: "report" })),
  ]);
  const content = new Map<string, unknown>([
    ["global", { schema: SCHEMA_VERSION, default_strategy: "round_robin", projects }],
    ["runtime", {
      schema: SCHEMA_VERSION,
      quarantines: [],
      traffic_blocks: [],
      project_blocks: [],
    }],
  ]);
  for (const project of [OFF, ON]) {
    content.set(`connector:c-${project.id}`, {
      schema: SCHEMA_VERSION,
      connector: feedConnector(`c-${project.id}`, { project_id: project.id, countries: ["DE"] }),
      proxies: [httpProxyRow(`p-${project.id}`, "127.0.0.1", upstreamPort)],
    });
  }
  await publishFeedContent(bed, content);
}

/** One request's wait, in ms; throws unless the origin answered. */
async function timed(request: () => Promise<{ status: number }>): Promise<number> {
  const started = performance.now();
  const answer = await request();
  const ms = performance.now() - started;
  if (answer.status !== 200) throw new Error(`the request was answered ${answer.status}`);
  return ms;
}

async function round(
  gatewayPort: number,
  upstream: Service,
  origin: Service,
  echo: Echo,
  redis: Redis,
  verdictKey: string,
  requests: number,
): Promise<RoundTimes> {
  const url = `http://127.0.0.1:${origin.port}/`;
  const asking = (c: Credentials) => ({ ...c, username: `${c.username}-cc-de` });
  const off = new ClientConnection();
  const on = new ClientConnection();
  const times: RoundTimes = { off: [], hit: [], missOff: [], miss: [], echo: [] };
  try {
    const get = (c: Credentials, connection: ClientConnection) => () =>
      viaProxy(gatewayPort, asking(c), url, { connection });
    // Warm both paths, and leave a verdict in the cache.
    for (let i = 0; i < 50; i++) {
      await timed(get(OFF, off));
      await timed(get(ON, on));
    }
    for (let i = 0; i < requests; i++) {
      times.off.push(await timed(get(OFF, off)));
      times.hit.push(await timed(get(ON, on)));
    }
    for (let i = 0; i < Math.max(20, Math.floor(requests / 5)); i++) {
      times.echo.push(await timed(() => viaProxy(upstream.port, null, echo.url)));
      await redis.del(verdictKey);
      times.miss.push(await timed(get(ON, on)));
      times.missOff.push(await timed(get(OFF, off)));
    }
  } finally {
    off.close();
    on.close();
  }
  return times;
}

/** The median of `a[i] - b[i]`: paired, so drift between requests touches both alike. */
function pairedDelta(a: readonly number[], b: readonly number[]): number {
  return median(a.map((value, i) => value - b[i]));
}

async function run(context: SuiteContext): Promise<Row[]> {
  const requests = envPositive("BENCH_PREFLIGHT_REQUESTS", true) ?? 1000;
  const origin = await startDenoService("origin", "origin.ts");
  const upstream = await startDenoService("upstream", "bare-relay.ts");
  const echo = await startEcho({ country: "DE" });
  const bed = await feedBed();
  const redis = new Redis(process.env.OCTOPROX_TEST_REDIS_URL ?? "redis://127.0.0.1:6379");
  const verdictKey = bed.keys.preflightVerdict(ON.id, `p-${ON.id}`);
  await bed.lead();
  const gateway = await startGateway(bed, { OCTOPROX_GATEWAY_ECHO_URL: echo.url });
  const rounds: RoundTimes[] = [];
  try {
    await publish(bed, upstream.port);
    await gateway.waitForProxy();
    for (let i = 0; i < context.runs; i++) {
      const times = await round(gateway.port, upstream, origin, echo, redis, verdictKey, requests);
      rounds.push(times);
      context.log(
        `preflight: run ${i + 1}: off ${median(times.off).toFixed(3)} ms, hit ${
          median(times.hit).toFixed(3)
        } ms, miss ${median(times.miss).toFixed(3)} ms, echo alone ${
          median(times.echo).toFixed(3)
        } ms`,
      );
    }
  } finally {
    await gateway.stop();
    redis.disconnect();
    await Promise.all([origin.stop(), upstream.stop(), echo.close(), bed.close()]);
  }
  const hitAdded = rounds.map((r) => pairedDelta(r.hit, r.off));
  const missAdded = rounds.map((r) => pairedDelta(r.miss, r.missOff));
  const echoAlone = rounds.map((r) => median(r.echo));
  const beyondEcho = missAdded.map((added, i) => added - echoAlone[i]);
  const offMs = median(rounds.map((r) => median(r.off)));
  const p99 = (pick: (r: RoundTimes) => number[]) =>
    median(rounds.map((r) => percentile(pick(r), 0.99)));
  return [
    {
      figure: "Preflight: wait a cache hit adds to a request (one Redis read)",
      key: "preflight-hit-added",
      value: median(hitAdded),
      runs: hitAdded,
      unit: "ms",
      digits: 3,
      budget: { op: "<=", limit: HIT_BUDGET_MS },
      detail: `a request without preflight ${formatNumber(offMs, 3)} ms (p99 ${
        formatNumber(p99((r) => r.off), 3)
      }), with a cached verdict p99 ${formatNumber(p99((r) => r.hit), 3)} ms`,
    },
    {
      figure: "Preflight: wait a cache miss adds to a request",
      key: "preflight-miss-added",
      value: median(missAdded),
      runs: missAdded,
      unit: "ms",
      digits: 3,
      detail: `one echo alone through the same upstream ${formatNumber(median(echoAlone), 3)} ms`,
    },
    {
      figure: "Preflight: a cache miss's wait beyond one echo alone",
      key: "preflight-miss-beyond-echo",
      value: median(beyondEcho),
      runs: beyondEcho,
      unit: "ms",
      digits: 3,
      budget: { op: "<=", limit: MISS_BEYOND_ECHO_BUDGET_MS },
      detail: "the miss's added wait minus the echo's: the cache read and the judgement",
    },
  ];
}

export const preflightSuite: Suite = {
  name: "preflight",
  description: "What preflight adds to a request: a cached verdict, and a miss beside one echo",
  run,
};
