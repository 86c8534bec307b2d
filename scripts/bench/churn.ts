/**
 * Suite `churn`: the gateway's resident memory while short-lived proxies come and go, as a
 * provider-API pool replaces its proxies every few minutes. Budget: after churning 1,000,000
 * proxies through it, 10,000 at a time, its RSS stays within 10 % of its RSS after the first
 * 10,000 (the table of proxies reuses the slots of those that left).
 *
 * Each run is a fresh gateway process (gateway/main.ts under Deno, shipped defaults) on a Redis
 * prefix of its own, no control plane. The real FeedPublisher writes a feed of one project whose
 * one connector holds BENCH_CHURN_BATCH (10,000) proxies shaped as a pool's (UUID ids, logins,
 * usable-until); the next feed is published once the gateway logged the last one applied,
 * BENCH_CHURN_ROUNDS (100) in all. RSS is read (VmRSS) with only what is live, after a full
 * collection through the gateway's inspector (scaling.ts), after the first feed, along the way
 * and after the last. The gateway's /metrics says how many slots its table holds at the end.
 *
 * Side by side, the floor: the same number of feeds where every feed carries the same 10,000
 * ids (only their usable-until moves, so each feed is a new section and is applied whole). What
 * the process holds after many applies that it did not after the first (allocator arenas, the
 * decoder's buffers) shows there too; the churn's own cost is its RSS over the floor's.
 */
import type { FeedProxy } from "../../shared/feed/models.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { BENCH_LOGIN, publishFeed } from "./services.ts";
import { inspectedGateway } from "./scaling.ts";
import {
  envPositive,
  formatNumber,
  MB,
  median,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

const GROWTH_BUDGET = 1.1;
const APPLY_TIMEOUT_MS = 60_000;

/** `count` proxies as a provider-API pool's section carries them; ids from `idAt`. */
function poolProxies(
  round: number,
  count: number,
  idAt: (i: number) => string,
  usableUntilMs: number,
): FeedProxy[] {
  const proxies: FeedProxy[] = [];
  for (let i = 0; i < count; i++) {
    const n = round * count + i;
    proxies.push({
      id: idAt(i),
      scheme: "http",
      host: `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`,
      port: 8000 + (n % 1000),
      username: `pool-${n}`,
      password: `p${(n * 7919).toString(36)}x${(n * 104729).toString(36)}`,
      country: n % 2 === 0 ? "DE" : "US",
      status: "healthy",
      max_concurrency: null,
      usable_until_ms: usableUntilMs,
    });
  }
  return proxies;
}

/** Churn: new ids every round. Floor: the same ids every round. */
type Kind = "churn" | "floor";

function publishRound(
  bed: FeedBed,
  round: number,
  batch: number,
  idAt: (i: number) => string,
): Promise<void> {
  return publishFeed(bed, {
    projects: [{ id: "churn", ...BENCH_LOGIN }],
    connectors: [{
      id: "pool",
      projectId: "churn",
      proxies: poolProxies(round, batch, idAt, Date.now() + 3_600_000 + round),
    }],
  });
}

/** Waits until the gateway logged `count` feeds applied in all. */
async function appliedFeeds(
  gateway: { lines(): Record<string, unknown>[] },
  count: number,
): Promise<void> {
  const deadline = Date.now() + APPLY_TIMEOUT_MS;
  for (;;) {
    const applied = gateway.lines().filter((line) =>
      line.msg === "First feed applied" || line.msg === "Feed applied"
    ).length;
    if (applied >= count) {
      return;
    }
    if (Date.now() > deadline) {
      throw new Error(`Feed ${count} not applied within 60 s`);
    }
    await sleep(20);
  }
}

/** The slots the gateway's table holds now, from its /metrics, or NaN. */
async function slotsInUse(statusPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${statusPort}/metrics`)).text();
  const line = text.split("\n").find((l) =>
    l.startsWith("octoprox_gateway_proxy_slots{") && l.includes('state="in_use"')
  );
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(" ") + 1));
}

interface RunResult {
  firstMb: number;
  lastMb: number;
  slotsInUse: number;
}

async function oneRun(
  context: SuiteContext,
  kind: Kind,
  rounds: number,
  batch: number,
): Promise<RunResult> {
  const bed = await feedBed();
  await bed.lead();
  const { gateway, liveResident } = await inspectedGateway(bed);
  const fixed = Array.from({ length: batch }, () => crypto.randomUUID());
  const idAt = kind === "floor" ? (i: number) => fixed[i] : () => crypto.randomUUID();
  try {
    await publishRound(bed, 0, batch, idAt);
    await appliedFeeds(gateway, 1);
    const first = await liveResident();
    // Readings along the way too: does memory level off or keep climbing?
    const along: string[] = [];
    const every = Math.max(1, Math.floor(rounds / 5));
    for (let round = 1; round < rounds; round++) {
      await publishRound(bed, round, batch, idAt);
      await appliedFeeds(gateway, round + 1);
      if ((round + 1) % every === 0 && round + 1 < rounds) {
        along.push(`${round + 1}: ${((await liveResident()).rss / MB).toFixed(0)}`);
      }
    }
    const last = await liveResident();
    const result: RunResult = {
      firstMb: first.rss / MB,
      lastMb: last.rss / MB,
      slotsInUse: await slotsInUse(gateway.statusPort),
    };
    context.log(
      `churn (${kind}): RSS after feed 1 ${result.firstMb.toFixed(0)} MB, feeds ${
        along.join(", ")
      }, ` +
        `after feed ${rounds} ${result.lastMb.toFixed(0)} MB (JS heap ${
          (first.heap / MB).toFixed(0)
        } then ${(last.heap / MB).toFixed(0)} MB); ${result.slotsInUse} slots in use`,
    );
    return result;
  } finally {
    await gateway.stop();
    await bed.close();
  }
}

async function run(context: SuiteContext): Promise<Row[]> {
  const rounds = envPositive("BENCH_CHURN_ROUNDS", true) ?? 100;
  const batch = envPositive("BENCH_CHURN_BATCH", true) ?? 10_000;
  const churn: RunResult[] = [];
  const floor: RunResult[] = [];
  for (let i = 0; i < context.runs; i++) {
    churn.push(await oneRun(context, "churn", rounds, batch));
    floor.push(await oneRun(context, "floor", rounds, batch));
  }
  const total = formatNumber(rounds * batch, 0);
  const each = formatNumber(batch, 0);
  const mb = (results: RunResult[], pick: (r: RunResult) => number) =>
    formatNumber(median(results.map(pick)), 0);
  const growth = churn.map((r) => r.lastMb / r.firstMb);
  const floorGrowth = floor.map((r) => r.lastMb / r.firstMb);
  const overFloor = churn.map((r, i) => r.lastMb / floor[i].lastMb);
  return [
    {
      figure:
        `gateway RSS after ${total} short-lived proxies, ${each} at a time, over after the first ${each}`,
      key: "churn-rss-growth",
      value: median(growth),
      runs: growth,
      unit: "x",
      digits: 3,
      budget: { op: "<=", limit: GROWTH_BUDGET },
      detail: `RSS ${mb(churn, (r) => r.firstMb)} MB then ${
        mb(churn, (r) => r.lastMb)
      } MB, each after a full collection; slots in use at the end ${
        mb(churn, (r) => r.slotsInUse)
      }`,
    },
    {
      figure: `the floor: the same ${each} proxies in ${
        formatNumber(rounds, 0)
      } feeds, last over first`,
      key: "churn-floor-growth",
      value: median(floorGrowth),
      runs: floorGrowth,
      unit: "x",
      digits: 3,
      detail: `RSS ${mb(floor, (r) => r.firstMb)} MB then ${mb(floor, (r) => r.lastMb)} MB`,
    },
    {
      figure: `gateway RSS after ${total} short-lived proxies over the floor's after as many feeds`,
      key: "churn-over-floor",
      value: median(overFloor),
      runs: overFloor,
      unit: "x",
      digits: 3,
      budget: { op: "<=", limit: GROWTH_BUDGET },
      detail: "what churning ids costs beyond applying as many feeds",
    },
  ];
}

export const churnSuite: Suite = {
  name: "churn",
  description: "gateway RSS after 1,000,000 short-lived proxies churned 10,000 at a time",
  run,
};
