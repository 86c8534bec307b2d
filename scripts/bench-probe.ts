/**
 * Health-probe throughput: N probes at concurrency C through two tinyproxies and a fault proxy
 * (SOCKS5) to a local origin, with a share of probes going to a proxy that hangs until the
 * timeout. The origin and fault proxies run in a child process, so this process measures the
 * prober alone, as a worker would run it.
 *
 *   npx tsx scripts/bench-probe.ts [--probes 3000] [--concurrency 400] [--timeout-ms 2000]
 *                                  [--hang-share 0.05]
 */
import { fork } from "node:child_process";
import { parseArgs } from "node:util";
import { probe } from "../control/upstream/index.ts";
import { UpstreamError } from "../shared/proxy-protocol/errors.ts";
import type { UpstreamProxy } from "../shared/proxy-protocol/types.ts";
import { FaultMode, startFaultProxy } from "../testkit/upstreams/fault-proxy.ts";
import { startOrigin } from "../testkit/upstreams/origin.ts";
import { startTinyproxy } from "../testkit/upstreams/tinyproxy.ts";

interface ServerPorts {
  origin: number;
  socks: number;
  hang: number;
}

/** The child: origin and fault proxies, until the parent disconnects. */
async function serve(): Promise<void> {
  const [origin, socks, hang] = await Promise.all([
    startOrigin(),
    startFaultProxy({ bindAddress: "127.0.0.4" }),
    startFaultProxy({ mode: FaultMode.hang }),
  ]);
  const ports: ServerPorts = { origin: origin.port, socks: socks.port, hang: hang.port };
  process.send!(ports);
  process.once("disconnect", () => {
    void Promise.all([origin.close(), socks.close(), hang.close()]).then(() => process.exit(0));
  });
}

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

async function bench(): Promise<void> {
  const { values } = parseArgs({
    options: {
      probes: { type: "string", default: "3000" },
      concurrency: { type: "string", default: "400" },
      "timeout-ms": { type: "string", default: "2000" },
      "hang-share": { type: "string", default: "0.05" },
    },
  });
  const total = Number(values.probes);
  const concurrency = Number(values.concurrency);
  const timeoutMs = Number(values["timeout-ms"]);
  const hangShare = Number(values["hang-share"]);

  const child = fork(import.meta.filename, ["--serve"], { stdio: "inherit" });
  const ports = await new Promise<ServerPorts>((resolve, reject) => {
    child.once("message", (message) => resolve(message as ServerPorts));
    child.once("exit", (code) => reject(new Error(`server process exited (${code})`)));
  });
  const tinyproxies = await Promise.all([
    startTinyproxy({ bindAddress: "127.0.0.2", logLevel: "Warning", maxClients: 1024 }),
    startTinyproxy({ bindAddress: "127.0.0.3", logLevel: "Warning", maxClients: 1024 }),
  ]);
  try {
    const working: UpstreamProxy[] = [
      tinyproxies[0].proxy,
      tinyproxies[1].proxy,
      { scheme: "socks5", host: "127.0.0.1", port: ports.socks },
    ];
    const hanging: UpstreamProxy = { scheme: "http", host: "127.0.0.1", port: ports.hang };
    // Both paths: absolute-form GETs (http proxies, http URL) and tunnels (SOCKS5).
    const url = new URL(`http://127.0.0.1:${ports.origin}/ip`);
    const hangEvery = hangShare > 0 ? Math.round(1 / hangShare) : Infinity;

    // Warm up (JIT, connections, tinyproxy threads) before measuring.
    await Promise.all(working.map((proxy) => probe({ proxy, url, timeoutMs })));
    globalThis.gc?.();
    const rssBefore = process.memoryUsage().rss;

    const outcomes = { ok: 0, timeout: 0, failed: 0 };
    const latencies: number[] = [];
    const exits = new Map<string, number>();
    let peakRss = rssBefore;
    let next = 0;
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }, 50);
    const lane = async () => {
      while (next < total) {
        const index = next++;
        const proxy = index % hangEvery === hangEvery - 1 ? hanging : working[index % 3];
        try {
          const result = await probe({ proxy, url, timeoutMs });
          outcomes.ok++;
          latencies.push(result.latencyMs);
          if (result.exitIp) exits.set(result.exitIp, (exits.get(result.exitIp) ?? 0) + 1);
        } catch (error) {
          if (error instanceof UpstreamError && error.timedOut) outcomes.timeout++;
          else outcomes.failed++;
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, lane));
    const elapsedMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuBefore);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    clearInterval(sampler);
    const rssAfter = process.memoryUsage().rss;

    latencies.sort((a, b) => a - b);
    const quantile = (q: number) => latencies[Math.floor(q * (latencies.length - 1))] ?? NaN;
    console.log(
      `${total} probes, concurrency ${concurrency}, timeout ${timeoutMs} ms, ` +
        `${(hangShare * 100).toFixed(0)}% to a hanging proxy`,
    );
    console.log(
      `checks/s: ${(total / (elapsedMs / 1000)).toFixed(0)} (${elapsedMs.toFixed(0)} ms total)`,
    );
    console.log(
      `outcomes: ${JSON.stringify(outcomes)}; exits: ${JSON.stringify(Object.fromEntries(exits))}`,
    );
    console.log(
      `latency of passing probes: p50 ${quantile(0.5).toFixed(1)} ms, ` +
        `p95 ${quantile(0.95).toFixed(1)} ms, p99 ${quantile(0.99).toFixed(1)} ms`,
    );
    console.log(
      `prober CPU: ${cpuMs.toFixed(0)} ms (${
        ((cpuMs / elapsedMs) * 100).toFixed(0)
      }% of a core), ` +
        `${(total / (cpuMs / 1000)).toFixed(0)} checks per CPU-second`,
    );
    console.log(`RSS: before ${mb(rssBefore)}, peak ${mb(peakRss)}, after ${mb(rssAfter)}`);
    // Destroyed sockets finish closing on the next turns of the loop.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const sockets = process.getActiveResourcesInfo().filter((name) => name === "TCPSocketWrap");
    console.log(`open sockets after: ${sockets.length}`);
  } finally {
    await Promise.all(tinyproxies.map((proxy) => proxy.close()));
    child.disconnect();
  }
}

if (process.argv.includes("--serve")) await serve();
else await bench();
