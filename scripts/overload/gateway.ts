/**
 * Overload of the gateway: more clients than OCTOPROX_MAX_CLIENT_CONNECTIONS lets in, asking
 * twice what it can serve.
 *
 * 1. A routed gateway of its own (no control plane: a feed in Redis, the bench's origin and
 *    upstream relay on loopback), OCTOPROX_MAX_CLIENT_CONNECTIONS = LIMIT.
 * 2. Its normal latency: 20 single requests one after another, each on a new connection.
 * 3. Its capacity: proxy-loadgen as fast as answered (keep-alive GETs, LIMIT / 2 connections,
 *    well inside the limit), 1 s warm-up then 5 s.
 * 4. The overload: proxy-loadgen at twice that rate, with 4 x LIMIT connections, for the
 *    duration (60 s). Meanwhile a prober opens a new connection every 50 ms and sends one
 *    request: admitted, it is answered; refused, the gateway closes it without a byte, and the
 *    time to that close is the time to refusal. RSS and /live are watched throughout.
 * 5. Recovery: from the moment the load ends, a request on a new connection every 100 ms until
 *    one is answered 200 within the normal latency (3 x its median, at least +50 ms).
 */
import net from "node:net";
import { runLoadInChild, Scenario } from "../loadgen/index.ts";
import { type RoutedGateway, startRoutedGateway } from "../bench/services.ts";
import { cpuMillis, formatNumber, median, percentile, type Row } from "../bench/suite.ts";
import { seriesValue } from "../../testkit/promtool.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { watchProcess, watchRows } from "../bench/process-watch.ts";
import type { OverloadContext } from "./context.ts";

/** Low, so a loopback load generator on two cores can exceed it many times over. */
const LIMIT = 64;
/** Idle near 70 MB with a small feed; refused connections hold nothing, admitted ones 16 KB. */
const RSS_BOUND_MB = 300;
/**
 * A refusal is a close in the accept loop, no read and no routing: it waits only for the loop's
 * turn, never behind admitted requests (whose p50 is tens of ms at this load).
 */
const REFUSAL_P99_BOUND_MS = 250;
/** LIMIT keep-alive requests in flight on two shared cores: a few tens of ms each, with room. */
const ADMITTED_P99_BOUND_MS = 1_000;
/** "Within seconds": no queue is left to drain once the load stops. */
const RECOVERY_BOUND_MS = 5_000;

interface Probe {
  /** The status answered, or undefined when closed without an answer. */
  status?: number;
  ms: number;
  timedOut: boolean;
}

/** One GET on a new connection; answers when answered, closed, or after `timeoutMs`. */
function probeRequest(bed: RoutedGateway, timeoutMs: number): Promise<Probe> {
  return new Promise((resolve) => {
    const startedMs = performance.now();
    const socket = net.connect({ host: "127.0.0.1", port: bed.gateway.port });
    let text = "";
    let done = false;
    const finish = (timedOut = false) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1];
      resolve({
        status: status === undefined ? undefined : Number(status),
        ms: performance.now() - startedMs,
        timedOut,
      });
    };
    const timer = setTimeout(() => finish(true), timeoutMs);
    socket.setNoDelay(true);
    socket.once("connect", () =>
      socket.write(
        `GET http://127.0.0.1:${bed.origin.port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
          `Proxy-Authorization: ${bed.authorization}\r\nConnection: close\r\n\r\n`,
      ));
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
      if (text.includes("\r\n\r\n")) finish();
    });
    socket.once("error", () => finish());
    socket.once("close", () => finish());
  });
}

export async function overloadGateway(context: OverloadContext): Promise<Row[]> {
  const bed = await startRoutedGateway({ OCTOPROX_MAX_CLIENT_CONNECTIONS: String(LIMIT) });
  const pid = bed.gateway.pids[0];
  const load = {
    proxy: { host: "127.0.0.1", port: bed.gateway.port, authorization: bed.authorization },
    url: new URL(`http://127.0.0.1:${bed.origin.port}/`),
    scenario: Scenario.http,
    timeoutMs: 10_000,
    method: "GET",
    headers: [] as [string, string][],
  };
  try {
    const normal: number[] = [];
    for (let i = 0; i < 20; i++) {
      const probe = await probeRequest(bed, 5_000);
      if (probe.status !== 200) throw new Error(`a probe before the load answered ${probe.status}`);
      normal.push(probe.ms);
    }
    const normalMs = median(normal);
    context.log(`gateway: normal latency ${normalMs.toFixed(1)} ms (median of 20)`);

    const capacity = await runLoadInChild({
      ...load,
      concurrency: LIMIT / 2,
      warmupMs: 1_000,
      durationMs: 5_000,
    });
    context.log(
      `gateway: capacity ${capacity.throughput.toFixed(0)} requests/s ` +
        `(p99 ${capacity.latencyMs.p99.toFixed(1)} ms, errors ${JSON.stringify(capacity.errors)})`,
    );
    const rate = Math.round(2 * capacity.throughput);
    const metricsUrl = `http://127.0.0.1:${bed.gateway.statusPort}/metrics`;
    const rejectedBefore = await rejected(metricsUrl);

    const watch = await watchProcess(pid, {
      liveUrl: `http://127.0.0.1:${bed.gateway.statusPort}/live`,
    });
    const refusals: number[] = [];
    let admittedProbes = 0;
    let hungProbes = 0;
    let probing = true;
    const prober = (async () => {
      const running = new Set<Promise<void>>();
      while (probing) {
        const one = probeRequest(bed, 5_000).then((probe) => {
          if (probe.timedOut) hungProbes++;
          else if (probe.status === undefined) refusals.push(probe.ms);
          else admittedProbes++;
        });
        running.add(one);
        void one.finally(() => running.delete(one));
        await sleep(50);
      }
      await Promise.all(running);
    })();
    context.log(
      `gateway: ${rate} requests/s (2 x capacity) over ${4 * LIMIT} connections for ` +
        `${context.durationMs / 1000} s, limit ${LIMIT}`,
    );
    const cpuBefore = (await cpuMillis(pid)) ?? 0;
    const overload = await runLoadInChild({
      ...load,
      concurrency: 4 * LIMIT,
      rate,
      warmupMs: 0,
      durationMs: context.durationMs,
    });
    const loadEndedMs = performance.now();
    probing = false;

    // Recovery: the first probe answered 200 within the normal latency.
    const normalBoundMs = Math.max(3 * normalMs, normalMs + 50);
    let recoveryMs = Number.NaN;
    let recoveryProbes = 0;
    while (performance.now() - loadEndedMs < 30_000) {
      recoveryProbes++;
      const probe = await probeRequest(bed, 5_000);
      if (probe.status === 200 && probe.ms <= normalBoundMs) {
        recoveryMs = performance.now() - loadEndedMs;
        break;
      }
      await sleep(100);
    }
    await prober;
    await watch.stop();
    const rejectedDuring = (await rejected(metricsUrl)) - rejectedBefore;
    const sent = overload.sentLatencyMs ?? overload.latencyMs;
    const gatewayCores = (((await cpuMillis(pid)) ?? 0) - cpuBefore) /
      (overload.elapsedMs || 1);
    context.log(
      `gateway: overload answered ${overload.ok} of ${overload.requests} ` +
        `(${overload.throughput.toFixed(0)}/s), errors ${JSON.stringify(overload.errors)}; ` +
        `${rejectedDuring} connections refused by the gateway; probes: ${refusals.length} ` +
        `refused, ${admittedProbes} admitted, ${hungProbes} unanswered`,
    );

    const detail = `${LIMIT} connections at most; load ${rate}/s over ${4 * LIMIT} connections`;
    return [
      {
        figure: "gateway: normal latency, one request on a new connection",
        value: normalMs,
        unit: "ms",
      },
      {
        figure: `gateway: capacity (keep-alive GETs, ${LIMIT / 2} connections)`,
        value: capacity.throughput,
        unit: "/s",
        detail: `p50 ${formatNumber(capacity.latencyMs.p50)} ms, p99 ${
          formatNumber(capacity.latencyMs.p99)
        } ms`,
      },
      {
        figure: `gateway: answered under 2 x capacity for ${context.durationMs / 1000} s`,
        value: overload.throughput,
        unit: "/s",
        detail: `${overload.ok} of ${overload.requests} requests; failed: ${
          JSON.stringify(overload.errors)
        }; ${rejectedDuring} connections refused (metrics)`,
      },
      ...watchRows(watch, { process: "gateway", during: "under overload" }, RSS_BOUND_MB),
      {
        figure: "gateway: connections past the limit refused (probes)",
        value: refusals.length,
        unit: `of ${refusals.length + admittedProbes + hungProbes}`,
        budget: { op: ">", limit: 0 },
        detail: `${admittedProbes} admitted and answered, ${hungProbes} neither in 5 s; ${detail}`,
      },
      {
        figure: "gateway: time to refusal, p99",
        value: percentile(refusals, 0.99),
        unit: "ms",
        budget: { op: "<=", limit: REFUSAL_P99_BOUND_MS },
        detail: `p50 ${formatNumber(percentile(refusals, 0.5))} ms, max ${
          formatNumber(Math.max(...refusals))
        } ms`,
      },
      {
        figure: "gateway: probes neither answered nor refused in 5 s",
        value: hungProbes,
        unit: "",
        budget: { op: "<=", limit: 0 },
      },
      {
        figure: "gateway: p99 of admitted requests under overload (from sent)",
        value: sent.p99,
        unit: "ms",
        budget: { op: "<=", limit: ADMITTED_P99_BOUND_MS },
        detail: `p50 ${formatNumber(sent.p50)} ms, max ${formatNumber(sent.max)} ms; from due: ` +
          `p99 ${formatNumber(overload.latencyMs.p99)} ms (the generator ran up to ${
            formatNumber(overload.maxLagMs ?? 0, 0)
          } ms behind)`,
      },
      {
        figure: "gateway: CPU under overload (gateway / load generator)",
        value: gatewayCores * 100,
        unit: "% core",
        detail: `load generator ${formatNumber(overload.cpu.cores * 100, 0)}% of a core`,
      },
      {
        figure: "gateway: time to full service after the load",
        value: recoveryMs,
        unit: "ms",
        budget: { op: "<=", limit: RECOVERY_BOUND_MS },
        detail: `first probe answered 200 within ${
          formatNumber(normalBoundMs)
        } ms; ${recoveryProbes} probes`,
      },
    ];
  } finally {
    await bed.stop();
  }
}

async function rejected(metricsUrl: string): Promise<number> {
  const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) });
  return seriesValue(
    await response.text(),
    'octoprox_gateway_connections_total{result="rejected"}',
  ) ?? 0;
}
