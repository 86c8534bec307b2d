/**
 * The gateway's /metrics in Prometheus's own eyes: a real gateway (gateway/main.ts under Deno)
 * on a loopback feed, after a request has gone through it, passes `promtool check metrics`
 * (the text parses, and the lint finds nothing: HELP on every family, counters in `_total`,
 * base units), labels every sample with the role (`gateway`), as control processes do, and
 * carries no label that names a proxy, client, URL, project or request.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import { parseSamples, promtoolCheck, requirePromtool } from "../../testkit/promtool.ts";
import { type FeedGateway, startLoopbackGateway } from "../../testkit/gateway/feed-gateway.ts";
import { getVia } from "../../testkit/clients/raw-http.ts";

let bed: FeedBed;
let origin: Origin;
let upstream: FaultProxy;
let gateway: FeedGateway;
let proxyPort: number;

beforeAll(async () => {
  requirePromtool();
  [bed, origin, upstream] = await Promise.all([
    feedBed(),
    startOrigin(),
    startFaultProxy({ mode: FaultMode.pass }),
  ]);
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, {
    projects: [{ id: "p-metrics", username: "metrics", password: "metrics-pass" }],
    connectors: [{
      id: "c-metrics",
      projectId: "p-metrics",
      proxies: [{ id: "x-metrics", scheme: "http", host: upstream.host, port: upstream.port }],
    }],
  }));
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([upstream?.close(), origin?.close()]);
  await bed?.close();
});

describe("the gateway's /metrics", () => {
  it("passes promtool check metrics, labels every sample with its role and names no proxy, project or client", async () => {
    expect((await getVia(proxyPort, `${origin.url}/ip`, "metrics:metrics-pass")).status)
      .toBe(200);
    const response = await fetch(`http://127.0.0.1:${gateway.statusPort}/metrics`);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(await promtoolCheck(text)).toEqual({ code: 0, output: "" });

    const samples = parseSamples(text);
    expect(samples.length).toBeGreaterThan(0);
    expect(samples.filter((sample) => sample.labels.role !== "gateway")).toEqual([]);
    const labelValues = samples.flatMap((sample) => Object.values(sample.labels));
    for (const secretish of ["p-metrics", "c-metrics", "x-metrics", "metrics-pass", "127.0.0.1"]) {
      expect(labelValues.filter((value) => value.includes(secretish))).toEqual([]);
    }
  });
});
