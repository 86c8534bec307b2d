/**
 * Suite `memory`: the gateway's resident memory with a 100,000-proxy snapshot (budget: at most
 * 300 MB, DESIGN.md) and what 1,000 idle tunnels add to it.
 *
 * Each run is a fresh gateway process (gateway/main.ts under Deno, shipped defaults, the
 * command `npm start` uses) on a Redis prefix of its own, no control plane:
 * 1. started with no feed; 2 s later its RSS is read (the process before any snapshot);
 * 2. the real FeedPublisher writes a feed of two projects: one with 20 static connectors of
 *    5,000 proxies each (100,000 rows shaped as compile writes them: UUID ids, logins, countries,
 *    5% unhealthy, some concurrency limits), and one with a single connector whose one proxy is
 *    a real upstream (bare-relay.ts in upstream mode, to an origin.ts origin);
 * 3. after "First feed applied" (its apply time is logged) the RSS is sampled every 250 ms for
 *    6 s, long enough for the garbage of the decode to be collected; the last sample is the
 *    figure (VmRSS from /proc/<pid>/status; VmHWM, the peak, beside it);
 * 4. BENCH_MEMORY_TUNNELS (2,000) CONNECT tunnels are opened through it to the origin, via the
 *    upstream, and left idle; 3 s later the RSS again: the difference over the tunnels, per
 *    1,000. Every tunnel must still be open at that point.
 */
import net from "node:net";
import type { FeedProxy } from "../../shared/feed/models.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  BENCH_AUTHORIZATION,
  BENCH_LOGIN,
  type FeedConnectorSpec,
  httpProxyRow,
  publishFeed,
  startDenoService,
  startGateway,
} from "./services.ts";
import type { Service } from "../../testkit/upstreams/daemon.ts";
import {
  envPositive,
  formatNumber,
  MB,
  median,
  peakBytes,
  residentBytes,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";
import { sleep } from "../../shared/async/sleep.ts";

const RSS_BUDGET_MB = 300;
const CONNECTORS = 20;
const ROWS_PER_CONNECTOR = 5000;
const SETTLE_MS = 6000;
const TUNNEL_SETTLE_MS = 3000;
const COUNTRIES = ["DE", "US", "GB", "FR", "NL", "PL", "JP", "BR", null] as const;

/**
 * `rows` proxies in 20 connectors of project "big", shaped as compile writes them: UUID ids,
 * logins, countries, 5% unhealthy, some concurrency limits.
 */
export function bigConnectors(rows = CONNECTORS * ROWS_PER_CONNECTOR): FeedConnectorSpec[] {
  const perConnector = Math.ceil(rows / CONNECTORS);
  const connectors: FeedConnectorSpec[] = [];
  for (let c = 0; c < CONNECTORS; c++) {
    const proxies: FeedProxy[] = [];
    for (let i = 0; i < perConnector; i++) {
      const n = c * perConnector + i;
      proxies.push({
        id: crypto.randomUUID(),
        scheme: "http",
        host: `10.${c}.${(i >> 8) & 255}.${i & 255}`,
        port: 3128 + (i % 100),
        username: `user-${n}-zone-resi`,
        password: `p${(n * 7919).toString(36)}x${(n * 104729).toString(36)}`,
        country: COUNTRIES[n % COUNTRIES.length],
        status: n % 20 === 0 ? "unhealthy" : "healthy",
        max_concurrency: n % 4 === 0 ? 64 : null,
      });
    }
    connectors.push({ id: crypto.randomUUID(), projectId: "big", proxies });
  }
  return connectors;
}

/**
 * Publishes the memory feed: project "bench" (BENCH_LOGIN) whose one connector holds
 * `upstreams` (real upstreams, for tunnels), and project "big" with `rows` proxies
 * (`bigConnectors`).
 */
export function publishBigFeed(bed: FeedBed, upstreams: FeedProxy[], rows: number): Promise<void> {
  return publishFeed(bed, {
    projects: [
      { id: "bench", ...BENCH_LOGIN },
      { id: "big", username: "big", password: "big-pass" },
    ],
    connectors: [
      { id: "upstream", projectId: "bench", proxies: upstreams },
      ...bigConnectors(rows),
    ],
  });
}

/** Opens one CONNECT tunnel and answers its socket once the gateway said 200. */
function openTunnel(port: number, target: string, authorization: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    let head = "";
    const fail = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    socket.once("error", fail);
    socket.once("connect", () => {
      socket.write(
        `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: ${authorization}\r\n\r\n`,
      );
    });
    const onData = (chunk: Buffer) => {
      head += chunk.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      socket.off("data", onData);
      if (!/^HTTP\/1\.[01] 200/.test(head)) {
        fail(new Error(`CONNECT answered ${head.split("\r\n")[0]}`));
        return;
      }
      socket.off("error", fail);
      socket.on("error", () => {});
      resolve(socket);
    };
    socket.on("data", onData);
  });
}

/** Idle CONNECT tunnels opened 100 at a time, with how many of them closed since. */
export interface IdleTunnels {
  readonly sockets: net.Socket[];
  readonly closed: number;
  /** Opens `count` more. */
  open(count: number): Promise<void>;
  destroy(): void;
}

/** Idle tunnels through the gateway at `port` to `target`, logged in with BENCH_LOGIN. */
export function idleTunnels(port: number, target: string): IdleTunnels {
  const authorization = BENCH_AUTHORIZATION;
  const sockets: net.Socket[] = [];
  let closed = 0;
  return {
    sockets,
    get closed() {
      return closed;
    },
    async open(count) {
      for (let opened = 0; opened < count;) {
        const batch = Math.min(100, count - opened);
        const made = await Promise.all(
          Array.from({ length: batch }, () => openTunnel(port, target, authorization)),
        );
        for (const socket of made) {
          socket.once("close", () => closed++);
          sockets.push(socket);
        }
        opened += batch;
      }
    },
    destroy() {
      for (const socket of sockets) socket.destroy();
    },
  };
}

interface RunResult {
  idleMb: number;
  snapshotMb: number;
  peakMb: number;
  applyMs: number;
  perThousandTunnelsMb: number;
  openAtEnd: number;
}

async function oneRun(
  context: SuiteContext,
  upstream: Service,
  origin: Service,
  tunnels: number,
): Promise<RunResult> {
  const bed = await feedBed();
  await bed.lead();
  const gateway = await startGateway(bed);
  let tunnelSet: IdleTunnels | undefined;
  try {
    const pid = gateway.pids[0];
    await sleep(2000);
    const idle = (await residentBytes(pid)) ?? NaN;
    await publishBigFeed(
      bed,
      [httpProxyRow("shared-upstream", "127.0.0.1", upstream.port)],
      CONNECTORS * ROWS_PER_CONNECTOR,
    );
    const applied = await gateway.line("First feed applied", 60_000);
    await gateway.waitForProxy();
    let snapshot = NaN;
    for (let waited = 0; waited < SETTLE_MS; waited += 250) {
      await sleep(250);
      snapshot = (await residentBytes(pid)) ?? NaN;
    }
    const peak = (await peakBytes(pid)) ?? NaN;

    tunnelSet = idleTunnels(gateway.port, `127.0.0.1:${origin.port}`);
    await tunnelSet.open(tunnels);
    await sleep(TUNNEL_SETTLE_MS);
    const withTunnels = (await residentBytes(pid)) ?? NaN;
    const result: RunResult = {
      idleMb: idle / MB,
      snapshotMb: snapshot / MB,
      peakMb: peak / MB,
      applyMs: Number(applied.applyMs),
      perThousandTunnelsMb: ((withTunnels - snapshot) / MB / tunnels) * 1000,
      openAtEnd: tunnels - tunnelSet.closed,
    };
    context.log(
      `memory: RSS idle ${result.idleMb.toFixed(0)} MB, with 100k proxies ${
        result.snapshotMb.toFixed(0)
      } MB (peak ${
        result.peakMb.toFixed(0)
      }, apply ${result.applyMs} ms), ${tunnels} idle tunnels ` +
        `+${((withTunnels - snapshot) / MB).toFixed(1)} MB (${result.openAtEnd} still open)`,
    );
    return result;
  } finally {
    tunnelSet?.destroy();
    await gateway.stop();
    await bed.close();
  }
}

async function run(context: SuiteContext): Promise<Row[]> {
  const tunnels = envPositive("BENCH_MEMORY_TUNNELS", true) ?? 2000;
  const origin = await startDenoService("origin", "origin.ts");
  const upstream = await startDenoService("upstream", "bare-relay.ts");
  const results: RunResult[] = [];
  try {
    for (let i = 0; i < context.runs; i++) {
      results.push(await oneRun(context, upstream, origin, tunnels));
    }
  } finally {
    await upstream.stop();
    await origin.stop();
  }
  const m = (pick: (r: RunResult) => number) => median(results.map(pick));
  const runs = (pick: (r: RunResult) => number) => results.map(pick);
  const lostTunnels = results.some((r) => r.openAtEnd < tunnels);
  return [
    {
      figure: "gateway RSS with a 100,000-proxy snapshot (Deno, one isolate)",
      key: "rss-snapshot",
      facts: {
        proxies: CONNECTORS * ROWS_PER_CONNECTOR,
        idleMb: m((r) => r.idleMb),
        peakMb: m((r) => r.peakMb),
        applyMs: m((r) => r.applyMs),
      },
      value: m((r) => r.snapshotMb),
      runs: runs((r) => r.snapshotMb),
      unit: "MB",
      digits: 0,
      budget: { op: "<=", limit: RSS_BUDGET_MB },
      detail:
        `6 s after the first apply; before any feed ${formatNumber(m((r) => r.idleMb), 0)} MB; ` +
        `peak (VmHWM) ${formatNumber(m((r) => r.peakMb), 0)} MB; first apply ${
          formatNumber(m((r) => r.applyMs), 0)
        } ms`,
    },
    {
      figure: `gateway RSS per 1,000 idle CONNECT tunnels (${formatNumber(tunnels, 0)} open)`,
      key: "rss-per-1000-idle-tunnels",
      facts: { tunnels, openAtEnd: Math.min(...runs((r) => r.openAtEnd)) },
      value: m((r) => r.perThousandTunnelsMb),
      runs: runs((r) => r.perThousandTunnelsMb),
      unit: "MB",
      digits: 1,
      detail: lostTunnels
        ? `some tunnels closed before the reading: ${runs((r) => r.openAtEnd).join(", ")} open`
        : "RSS 3 s after the last tunnel opened, less the figure above; every tunnel still open",
    },
  ];
}

export const memorySuite: Suite = {
  name: "memory",
  description: "gateway RSS with a 100,000-proxy feed, and per 1,000 idle tunnels",
  run,
};
