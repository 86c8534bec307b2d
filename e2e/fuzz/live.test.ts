/**
 * The live fuzzer (scripts/fuzz/live.ts) for a short run against a real gateway in front of a
 * real control plane (role all) and a tinyproxy upstream: 10 s of 60 connections at once, each
 * sending one hostile case (mutated, truncated, oversized and slow heads, invalid CONNECT
 * targets, SOCKS garbage and truncated handshakes, lying Content-Lengths, pipelining). The
 * gateway runs with short timeouts (idle 1 s, heads of 4 KB at most) so many of them expire in
 * the run. It must stay up and answer /live throughout, answer or close every connection within
 * its idle timeout plus the sweep and slack, stay under 400 MB resident, and show no stack trace
 * or unhandled rejection to a client or in its log. `npm run fuzz:live` runs the same for longer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatLiveFuzzReport, runLiveFuzz, SWEEP_MS } from "../../scripts/fuzz/live.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";

const IDLE_TIMEOUT_S = 1;
const MAX_HEADER_BYTES = 4096;
/** Slack over the timeout: the machine is shared and busy while the suite runs. */
const SLACK_MS = 4_000;

let cluster: Cluster;
let origin: Origin;
let tinyproxy: Tinyproxy;
let gateway: Gateway;
let project: RoutedProject;

beforeAll(async () => {
  [cluster, origin, tinyproxy] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    startTinyproxy({ logLevel: "Warning" }),
  ]);
  await cluster.start("all");
  project = await createRoutedProject(cluster, [tinyproxy.url]);
  gateway = await cluster.startGateway({
    env: {
      OCTOPROX_CLIENT_IDLE_TIMEOUT: String(IDLE_TIMEOUT_S),
      OCTOPROX_MAX_HEADER_BYTES: String(MAX_HEADER_BYTES),
    },
  });
}, 90_000);

afterAll(async () => {
  await Promise.all([cluster?.close(), origin?.close(), tinyproxy?.close()]);
});

describe("the live fuzzer against a running gateway", () => {
  it("keeps the gateway up, every connection answered or closed in time, no stack trace", {
    timeout: 60_000,
  }, async () => {
    const socks = await cluster.logged(gateway, "SOCKS5 listener bound");
    const report = await runLiveFuzz({
      proxy: { host: "127.0.0.1", port: gateway.proxyPort },
      socks: { host: "127.0.0.1", port: Number(socks.port) },
      status: { host: "127.0.0.1", port: gateway.port },
      pid: gateway.child.pid!,
      logLines: () => [...gateway.stdout, ...gateway.stderr],
      login: project.credentials,
      origin: `${origin.host}:${origin.port}`,
      maxHeaderBytes: MAX_HEADER_BYTES,
      closeBoundMs: IDLE_TIMEOUT_S * 1000 + SWEEP_MS + SLACK_MS,
      rssBoundMb: 400,
      durationMs: 10_000,
      connections: 60,
      seed: 17,
    });
    console.log(formatLiveFuzzReport(report));
    expect(report.violations).toEqual([]);
    // Every case ran, and the run was not refused wholesale.
    for (const [kind, figures] of Object.entries(report.byCase)) {
      expect(figures.connections, kind).toBeGreaterThan(0);
    }
    expect(report.refused).toBe(0);
    // Routed cases were routed: pipelined requests came back answered.
    expect(report.byCase.pipelined.answered).toBe(report.byCase.pipelined.connections);
    expect(report.probes.sent).toBeGreaterThan(5);
    expect(gateway.alive()).toBe(true);
  });
});
