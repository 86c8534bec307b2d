/**
 * `npx tsx scripts/bench-isolates.ts [seconds] [rounds]`: a rough side-by-side of the gateway
 * serving from one isolate and from one per core (OCTOPROX_GATEWAY_ISOLATES), for choosing the
 * default. The real gateway (gateway/main.ts on a published feed, test Redis), two tinyproxy
 * upstreams, a local origin; a load generator in its own thread keeps a fixed number of
 * clients busy: keep-alive HTTP forward requests, and new CONNECT tunnels (one small request
 * each). Prints the median of the rounds per scenario. npm run bench is the real suite; this
 * is only the isolates question.
 */
import { Worker } from "node:worker_threads";
import { startOrigin } from "../testkit/upstreams/origin.ts";
import { startTinyproxy } from "../testkit/upstreams/tinyproxy.ts";
import { feedBed } from "../testkit/feed.ts";
import { publishFeed, startFeedGateway } from "../testkit/gateway/feed-gateway.ts";

const SECONDS = Number(process.argv[2] ?? 5);
const ROUNDS = Number(process.argv[3] ?? 3);
const CORES = (await import("node:os")).availableParallelism();
const AUTH = `Basic ${Buffer.from("bench:bench-pass").toString("base64")}`;

/** The load generator's thread: counts completed exchanges for `seconds`. */
const LOADGEN = `
const { parentPort, workerData } = require("node:worker_threads");
const net = require("node:net");
const { port, originPort, auth, mode, clients, seconds } = workerData;
const deadline = Date.now() + seconds * 1000;
let done = 0, errors = 0;
const refused = "GET http://10.0.0.1/ HTTP/1.1\\r\\nHost: 10.0.0.1\\r\\nProxy-Authorization: " + auth +
  "\\r\\n\\r\\n";
const get = "GET http://127.0.0.1:" + originPort + "/echo HTTP/1.1\\r\\nHost: 127.0.0.1:" + originPort +
  "\\r\\nProxy-Authorization: " + auth + "\\r\\n\\r\\n";
const connect = "CONNECT 127.0.0.1:" + originPort + " HTTP/1.1\\r\\nHost: 127.0.0.1:" + originPort +
  "\\r\\nProxy-Authorization: " + auth + "\\r\\n\\r\\n";
const inner = "GET /echo HTTP/1.1\\r\\nHost: origin\\r\\nConnection: close\\r\\n\\r\\n";
function response(buffer) {
  const end = buffer.indexOf("\\r\\n\\r\\n");
  if (end < 0) return -1;
  const m = /content-length: *(\\d+)/i.exec(buffer.subarray(0, end).toString("latin1"));
  const total = end + 4 + (m ? Number(m[1]) : 0);
  return buffer.length >= total ? total : -1;
}
function httpClient() {
  const request = mode === "refused" ? refused : get;
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: "127.0.0.1", noDelay: true });
    let buffer = Buffer.alloc(0);
    socket.on("connect", () => socket.write(request));
    socket.on("data", (chunk) => {
      buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
      const used = response(buffer);
      if (used < 0) return;
      buffer = buffer.subarray(used);
      done++;
      if (Date.now() < deadline) socket.write(request); else socket.destroy();
    });
    socket.on("error", () => { errors++; });
    socket.on("close", () => resolve(Date.now() < deadline ? httpClient() : undefined));
  });
}
function tunnelOnce() {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: "127.0.0.1", noDelay: true });
    let buffer = Buffer.alloc(0), up = false, ok = false;
    socket.on("connect", () => socket.write(connect));
    socket.on("data", (chunk) => {
      buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
      if (!up) {
        const end = buffer.indexOf("\\r\\n\\r\\n");
        if (end < 0) return;
        if (!buffer.subarray(0, 12).toString().includes(" 200")) { socket.destroy(); return; }
        up = true; buffer = buffer.subarray(end + 4); socket.write(inner);
      }
      if (response(buffer) >= 0) { ok = true; done++; socket.destroy(); }
    });
    socket.on("error", () => {});
    socket.on("close", () => { if (!ok) errors++; resolve(); });
  });
}
async function tunnelClient() { while (Date.now() < deadline) await tunnelOnce(); }
const started = Date.now();
Promise.all(Array.from({ length: clients }, () => mode === "connect" ? tunnelClient() : httpClient()))
  .then(() => parentPort.postMessage({ done, errors, seconds: (Date.now() - started) / 1000 }));
`;

function load(
  port: number,
  originPort: number,
  mode: "http" | "connect" | "refused",
  clients: number,
): Promise<{ perSecond: number; errors: number }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(LOADGEN, {
      eval: true,
      workerData: { port, originPort, auth: AUTH, mode, clients, seconds: SECONDS },
    });
    worker.once("message", (result: { done: number; errors: number; seconds: number }) => {
      resolve({ perSecond: result.done / result.seconds, errors: result.errors });
      void worker.terminate();
    });
    worker.once("error", reject);
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1];

/** CPU seconds a process used so far (every thread: all its isolates), from /proc. */
async function cpuSeconds(pid: number): Promise<number> {
  const { readFile } = await import("node:fs/promises");
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Runs `load` and answers its rate with the gateway's CPU use meanwhile (cores busy). */
async function measured(
  pid: number,
  run: () => Promise<{ perSecond: number; errors: number }>,
): Promise<{ perSecond: number; errors: number; cores: number }> {
  const before = await cpuSeconds(pid);
  const started = performance.now();
  const result = await run();
  const cores = (await cpuSeconds(pid) - before) / ((performance.now() - started) / 1000);
  return { ...result, cores };
}

const bed = await feedBed();
const origin = await startOrigin();
const tinyproxies = await Promise.all(
  ["127.0.0.61", "127.0.0.62"].map((bindAddress) =>
    startTinyproxy({ bindAddress, maxClients: 1024, logLevel: "Warning" })
  ),
);
await bed.lead();
await publishFeed(bed, {
  projects: [{ id: "p1", username: "bench", password: "bench-pass" }],
  connectors: [{
    id: "c1",
    projectId: "p1",
    proxies: tinyproxies.map((tinyproxy, index) => ({
      id: `t${index}`,
      scheme: "http" as const,
      host: tinyproxy.host,
      port: tinyproxy.port,
    })),
  }],
});

const results = new Map<string, number[]>();
const record = (key: string, value: number) =>
  results.set(key, [...(results.get(key) ?? []), value]);
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const isolates of [1, CORES]) {
      const gateway = await startFeedGateway(bed, {
        OCTOPROX_GATEWAY_ISOLATES: String(isolates),
        OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8",
      });
      try {
        const port = await gateway.proxyPort();
        await new Promise((resolve) => setTimeout(resolve, isolates > 1 ? 1_000 : 200));
        const pid = gateway.child.pid!;
        const http = await measured(pid, () => load(port, origin.port, "http", 64));
        const tunnels = await measured(pid, () => load(port, origin.port, "connect", 32));
        // The gateway's own path only (a 403 it answers itself, keep-alive): no upstream work.
        const own = await measured(pid, () => load(port, origin.port, "refused", 64));
        record(`refused/${isolates}`, own.perSecond);
        record(`refused-cores/${isolates}`, own.cores);
        record(`http/${isolates}`, http.perSecond);
        record(`connect/${isolates}`, tunnels.perSecond);
        record(`http-cores/${isolates}`, http.cores);
        record(`connect-cores/${isolates}`, tunnels.cores);
        process.stdout.write(
          `round ${round + 1}, ${isolates} isolate(s): ${http.perSecond.toFixed(0)} req/s ` +
            `(${http.errors} errors, gateway ${http.cores.toFixed(2)} cores), ` +
            `${tunnels.perSecond.toFixed(0)} tunnels/s ` +
            `(${tunnels.errors} errors, gateway ${tunnels.cores.toFixed(2)} cores), ` +
            `${own.perSecond.toFixed(0)} answers/s (gateway ${own.cores.toFixed(2)} cores)\n`,
        );
      } finally {
        await gateway.stop();
      }
    }
  }
} finally {
  await Promise.all([origin.close(), ...tinyproxies.map((tinyproxy) => tinyproxy.close())]);
  await bed.close();
}
process.stdout.write(`\n${CORES} cores; medians of ${ROUNDS} rounds of ${SECONDS} s\n`);
for (const scenario of ["http", "connect", "refused"]) {
  const single = median(results.get(`${scenario}/1`) ?? [0]);
  const multi = median(results.get(`${scenario}/${CORES}`) ?? [0]);
  const singleCores = median(results.get(`${scenario}-cores/1`) ?? [0]);
  const multiCores = median(results.get(`${scenario}-cores/${CORES}`) ?? [0]);
  process.stdout.write(
    `${scenario.padEnd(8)} 1 isolate ${single.toFixed(0).padStart(7)}/s ` +
      `(gateway ${singleCores.toFixed(2)} cores)   ` +
      `${CORES} isolates ${multi.toFixed(0).padStart(7)}/s ` +
      `(gateway ${multiCores.toFixed(2)} cores)   ratio ${(multi / single).toFixed(2)}\n`,
  );
}
process.exit(0);
