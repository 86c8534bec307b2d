/**
 * The benchmarks' upstream side, in a process of its own so the process under test is measured
 * alone: a local origin (`/echo`), two tinyproxy instances (separate processes, started from
 * here), our fault proxy passing traffic (SOCKS5 and HTTP on one port) and one that hangs.
 * It reports its ports over IPC and closes everything when the parent disconnects.
 */
import { FaultMode, startFaultProxy } from "../../testkit/upstreams/fault-proxy.ts";
import { startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import type { UpstreamPorts } from "./upstreams.ts";

const [origin, pass, hang, ...tinyproxies] = await Promise.all([
  startOrigin(),
  startFaultProxy({ bindAddress: "127.0.0.4" }),
  startFaultProxy({ mode: FaultMode.hang }),
  startTinyproxy({ bindAddress: "127.0.0.2", logLevel: "Warning", maxClients: 1024 }),
  startTinyproxy({ bindAddress: "127.0.0.3", logLevel: "Warning", maxClients: 1024 }),
]);

const ports: UpstreamPorts = {
  origin: origin.port,
  pass: pass.port,
  hang: hang.port,
  tinyproxies: tinyproxies.map((t) => t.port),
  pids: tinyproxies.flatMap((t) => (t.pid === undefined ? [] : [t.pid])),
};
process.send!(ports);

process.once("disconnect", () => {
  void Promise.allSettled([
    origin.close(),
    pass.close(),
    hang.close(),
    ...tinyproxies.map((t) => t.close()),
  ]).then(() => process.exit(0));
});
