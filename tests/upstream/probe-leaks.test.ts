/** A burst of probes, some hanging and some refused, leaves no socket behind. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probe } from "../../control/upstream/index.ts";
import { UpstreamError } from "../../shared/proxy-protocol/errors.ts";
import type { UpstreamProxy } from "../../shared/proxy-protocol/types.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { refusingAddress } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";

let origin: Origin;
let passing: FaultProxy;
let hanging: FaultProxy;
let refusing: FaultProxy;

beforeAll(async () => {
  [origin, passing, hanging, refusing] = await Promise.all([
    startOrigin(),
    startFaultProxy(),
    startFaultProxy({ mode: FaultMode.hang }),
    startFaultProxy({ mode: FaultMode.refuse }),
  ]);
});

afterAll(async () => {
  await Promise.all([origin, passing, hanging, refusing].map((server) => server?.close()));
});

/** TCP sockets this process holds (ours and the test servers' accepted ones). */
function openSockets(): number {
  return process.getActiveResourcesInfo().filter((name) =>
    name === "TCPSocketWrap" || name === "TLSWrap"
  ).length;
}

describe("probe burst", () => {
  it("500 probes, 5% hanging, some refused: every socket is closed after", async () => {
    const baseline = openSockets();
    const refused = refusingAddress(origin.port);
    const schemes = ["http", "socks4", "socks5"] as const;
    const proxies: UpstreamProxy[] = [];
    for (let index = 0; index < 500; index++) {
      const scheme = schemes[index % 3];
      if (index % 20 === 0) proxies.push(hanging.proxy(scheme));
      else if (index % 50 === 1) proxies.push(refusing.proxy(scheme));
      else if (index % 50 === 2) proxies.push({ scheme, ...refused });
      else proxies.push(passing.proxy(scheme));
    }
    // /linger keeps its connection open after answering: only the probe closing it ends it.
    const urls = [new URL(`${origin.url}/ip`), new URL(`${origin.url}/linger`)];
    // Generous: the proxies and the origin share this process's event loop with the probes.
    const timeoutMs = 3_000;
    const started = performance.now();
    const outcomes = await Promise.all(
      proxies.map((proxy, index) =>
        probe({ proxy, url: urls[index % 2], timeoutMs }).then(
          (result) => (result.ok ? "ok" : "bad status"),
          (
            error: unknown,
          ) => (error instanceof UpstreamError ? (error.timedOut ? "timeout" : "failed") : "other"),
        )
      ),
    );
    const elapsedMs = performance.now() - started;
    const tally: Record<string, number> = {};
    for (const outcome of outcomes) tally[outcome] = (tally[outcome] ?? 0) + 1;
    expect(tally).toEqual({ ok: 455, timeout: 25, failed: 20 });
    // Hung probes end at their deadline, not later.
    expect(elapsedMs).toBeLessThan(timeoutMs + 3_000);
    await waitUntil(
      () =>
        passing.connectionsOpen === 0 && hanging.connectionsOpen === 0 &&
        refusing.connectionsOpen === 0 && passing.upstreamOpen === 0 &&
        origin.connectionsOpen === 0,
      { timeoutMs: 5_000, message: "every server-side connection to close" },
    );
    await waitUntil(() => openSockets() <= baseline, {
      timeoutMs: 5_000,
      message: `open sockets back to ${baseline}`,
    });
  });
});
