/**
 * Suite `tunnel-dns`: fake-IP answers a second of the tunnel resolver, on its real UDP socket
 * under Deno (testkit/gateway/fixture/dns.ts: the gateway's resolver module, mapping and socket,
 * alone in its process), asked by a client in this process that keeps a window of queries in
 * flight, and the resolver's CPU per answer (/proc). Three mixes, each for BENCH_TUNNEL_DNS_SECONDS
 * (5) a run:
 * - **known names**: 1,000 names asked again and again (a device's usual lookups): each answer
 *   still moves the name's recency in Redis (one script call);
 * - **new names**: every query a name never asked, so each takes an address (the range is a /15:
 *   131,070 names before the least recently used give theirs up);
 * - **Redis away**: known names with the mapping's Redis on a port nothing listens on, so every
 *   answer comes from the gateway's own copy: the resolver's own ceiling.
 * The window is BENCH_TUNNEL_DNS_WINDOW (256) queries in flight. Information figures, no budget:
 * the issue asks for the figure.
 */
import dgram from "node:dgram";
import { randomBytes } from "node:crypto";
import { startFixtureDns } from "../../testkit/gateway/fixture-dns.ts";
import { freePort } from "../../testkit/ports.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { cpuMillisOf, envPositive, median, type Row, type Suite } from "./suite.ts";

type Mix = "known" | "new" | "away";

interface Point {
  answersPerSecond: number;
  cpuMicrosPerAnswer: number;
  lost: number;
}

function query(id: number, name: string): Buffer {
  const labels = name.split(".");
  const parts = [Buffer.from([id >> 8, id & 255, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0])];
  for (const label of labels) parts.push(Buffer.from([label.length]), Buffer.from(label));
  parts.push(Buffer.from([0, 0, 1, 0, 1]));
  return Buffer.concat(parts);
}

async function measure(port: number, pid: number, mix: Mix, seconds: number, window: number) {
  const socket = dgram.createSocket("udp4");
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const run = randomBytes(3).toString("hex");
  let sent = 0;
  let answered = 0;
  let inFlight = 0;
  let stopped = false;
  const known = Array.from({ length: 1000 }, (_, i) => `n${i}.known-${run}.test`);
  const nameOf = (n: number) => mix === "new" ? `q${n}.new-${run}.test` : known[n % known.length];
  const sendOne = () => {
    if (stopped) return;
    const id = sent++ & 0xffff;
    inFlight++;
    socket.send(query(id, nameOf(sent)), port, "127.0.0.1");
  };
  socket.on("message", () => {
    answered++;
    inFlight--;
    sendOne();
  });
  // A lost datagram (a full socket buffer) would shrink the window for good: refill it.
  const refill = setInterval(() => {
    while (!stopped && inFlight < window) sendOne();
    inFlight = Math.min(inFlight, window);
  }, 200);
  for (let i = 0; i < window; i++) sendOne();
  // Warm-up, then the measured stretch.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const cpuStart = await cpuMillisOf([pid]);
  const answeredStart = answered;
  const startedMs = performance.now();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const elapsedS = (performance.now() - startedMs) / 1000;
  const cpuMs = (await cpuMillisOf([pid])) - cpuStart;
  const count = answered - answeredStart;
  stopped = true;
  clearInterval(refill);
  socket.close();
  return {
    answersPerSecond: count / elapsedS,
    cpuMicrosPerAnswer: (cpuMs * 1000) / Math.max(1, count),
    lost: Math.max(0, sent - answered - inFlight),
  } satisfies Point;
}

export const tunnelDnsSuite: Suite = {
  name: "tunnel-dns",
  description: "the tunnel resolver's fake-IP answers a second and CPU per answer",
  async run({ runs, log }) {
    const seconds = envPositive("BENCH_TUNNEL_DNS_SECONDS") ?? 5;
    const window = envPositive("BENCH_TUNNEL_DNS_WINDOW", true) ?? 256;
    const points: Record<Mix, Point[]> = { known: [], new: [], away: [] };
    for (let run = 0; run < runs; run++) {
      for (const mix of ["known", "new", "away"] as const) {
        const prefix = testPrefix();
        const redisUrl = mix === "away" ? `redis://127.0.0.1:${await freePort()}` : TEST_REDIS_URL;
        const resolver = await startFixtureDns({ redisUrl, prefix });
        try {
          const point = await measure(resolver.port, resolver.pid, mix, seconds, window);
          log(
            `tunnel-dns ${mix} run ${run + 1}: ${point.answersPerSecond.toFixed(0)} answers/s, ` +
              `${point.cpuMicrosPerAnswer.toFixed(1)} µs CPU each`,
          );
          points[mix].push(point);
        } finally {
          await resolver.stop().catch(() => undefined);
          await deletePrefix(TEST_REDIS_URL, prefix);
        }
      }
    }
    const rows: Row[] = [];
    const label: Record<Mix, string> = {
      known: "known names (recency moved in Redis)",
      new: "new names (an address each)",
      away: "Redis away (the gateway's own copy)",
    };
    for (const mix of ["known", "new", "away"] as const) {
      const rates = points[mix].map((p) => p.answersPerSecond);
      const cpu = points[mix].map((p) => p.cpuMicrosPerAnswer);
      rows.push({
        figure: `tunnel resolver answers a second, ${label[mix]}`,
        value: median(rates),
        unit: "/s",
        runs: rates,
        key: `tunnel_dns_${mix}_per_second`,
        detail: `${median(cpu).toFixed(1)} µs CPU an answer; window ${window}`,
        facts: { cpu_micros_per_answer: median(cpu) },
      });
    }
    return rows;
  },
};
