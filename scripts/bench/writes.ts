/**
 * Suite `writes`: what the transactional outbox costs a write, and how far behind its relay runs.
 *
 * 1. A single-row write (a project's description) through `write()`, which stores its change
 *    entry in the outbox in the write's transaction, announces it after the commit and deletes
 *    the row, beside the path before the outbox (the same transaction, then the announcement),
 *    and beside the floor of any outbox (that path writing one more row, with the COMMIT),
 *    alternating batches on one connection pool so all see the same machine. Budget: p50 and
 *    p99 with the outbox within 10 % of the path before it; the floor's ratio says how much of
 *    the difference is the extra row itself.
 * 2. The relay under 2,000 writes a second whose writers never announce (as if every one died
 *    after its commit): change entries committed to the outbox at that rate for a few seconds,
 *    one relay loop announcing them; the lag of each is the time from its commit to its entry on
 *    the change stream. Budget: p99 within 1 s beyond the relay's grace (the age a row reaches
 *    before a relay takes it, so a live writer announces its own first).
 */
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { Redis } from "ioredis";
import { sql } from "drizzle-orm";
import { ChangeLog } from "../../control/core/changelog.ts";
import { createLogger } from "../../control/core/logging.ts";
import { OutboxRelay, recordChange, RELAY_GRACE_MS } from "../../control/core/outbox.ts";
import { write } from "../../control/core/store.ts";
import { createDatabase } from "../../db/client.ts";
import { migrate } from "../../db/migrate.ts";
import { redisKeys } from "../../shared/redis-keys.ts";
import { ChangeKind } from "../../shared/roles.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  testPrefix,
} from "../../testkit/stores.ts";
import { median, type Row, type Suite, type SuiteContext } from "./suite.ts";

const WRITES_PER_PASS = 1_000;
const BATCH = 50;
const RELAY_RATE = 2_000;
const RELAY_SECONDS = 5;

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function run(context: SuiteContext): Promise<Row[]> {
  const database = await createTestDatabase();
  const prefix = testPrefix();
  const keys = redisKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL);
  const db = createDatabase(database.url, { poolSize: 8 });
  const logger = createLogger({
    level: "error",
    instance: "bench",
    role: "api",
    destination: new Writable({ write: (_chunk, _encoding, callback) => callback() }),
  });
  const changes = new ChangeLog({ redis, keys, logger, deadlineMs: 2_000 });
  try {
    await migrate(database.url);
    const projectId = randomUUID();
    await db.sql`insert into projects (id, name, username, password)
      values (${projectId}, 'writes', 'writes', 'password-1')`;
    const deps = { database: db, changes };
    const change = { kind: ChangeKind.project, ref: projectId };
    let n = 0;
    const work = async (tx: Parameters<Parameters<typeof db.transaction>[0]>[0]) => {
      await tx.execute(sql`update projects set description = ${`write ${n++}`}
        where id = ${projectId}`);
      return { result: undefined, change };
    };
    /** The path before the outbox: the transaction, then the announcement. */
    const before = async () => {
      const outcome = await db.transaction(work);
      if (outcome.change) await changes.append(outcome.change);
    };
    /**
     * The floor of any transactional outbox: the path before it, its transaction writing one
     * more row (an unlogged table without an index, sent with the COMMIT as the outbox's is).
     */
    await db.sql`create unlogged table bench_floor (kind text not null, ref text not null)`;
    const floor = async () => {
      const outcome = await db.transaction(
        work,
        "",
        () => ({ sql: `insert into bench_floor values ('project', '${projectId}')` }),
      );
      if (outcome.change) await changes.append(outcome.change);
    };
    const withOutbox = () => write(deps, work);
    const timed = async (one: () => Promise<unknown>, into: number[]) => {
      for (let i = 0; i < BATCH; i++) {
        const started = performance.now();
        await one();
        into.push(performance.now() - started);
      }
    };
    // Warm the paths, then alternate batches.
    await timed(before, []);
    await timed(floor, []);
    await timed(withOutbox, []);
    const p50Ratio: number[] = [];
    const p99Ratio: number[] = [];
    const floorRatio: number[] = [];
    const p50s: [number, number][] = [];
    const p99s: [number, number][] = [];
    const floors: number[] = [];
    for (let r = 1; r <= context.runs; r++) {
      const base: number[] = [];
      const outbox: number[] = [];
      const floored: number[] = [];
      for (let done = 0; done < WRITES_PER_PASS; done += BATCH) {
        await timed(before, base);
        await timed(floor, floored);
        await timed(withOutbox, outbox);
      }
      const pair50: [number, number] = [percentile(base, 50), percentile(outbox, 50)];
      const pair99: [number, number] = [percentile(base, 99), percentile(outbox, 99)];
      p50s.push(pair50);
      p99s.push(pair99);
      floors.push(percentile(floored, 50));
      p50Ratio.push(pair50[1] / pair50[0]);
      p99Ratio.push(pair99[1] / pair99[0]);
      floorRatio.push(pair50[1] / percentile(floored, 50));
      context.log(
        `writes run ${r}: p50 ${pair50[0].toFixed(2)} → ${pair50[1].toFixed(2)} ms ` +
          `(one more row: ${percentile(floored, 50).toFixed(2)} ms), ` +
          `p99 ${pair99[0].toFixed(2)} → ${pair99[1].toFixed(2)} ms`,
      );
    }
    const left = await db.sql`select count(*)::int as n from change_outbox`;

    // The relay: entries committed at RELAY_RATE a second, none announced by its writer.
    const relay = new OutboxRelay({ database: db, redis, keys, logger, deadlineMs: 2_000 });
    const lags: number[] = [];
    const committedAt = new Map<string, number>();
    const reader = new Redis(TEST_REDIS_URL);
    let lastId = "$";
    let reading = true;
    const read = (async () => {
      while (reading) {
        const answer = await reader.xread(
          "COUNT",
          10_000,
          "BLOCK",
          200,
          "STREAMS",
          keys.changesStream,
          lastId,
        ) as [string, [string, string[]][]][] | null;
        const now = Date.now();
        for (const [id, fields] of answer?.[0]?.[1] ?? []) {
          lastId = id;
          const ref = fields[fields.indexOf("ref") + 1];
          const at = committedAt.get(ref);
          if (at !== undefined) {
            lags.push(now - at);
            committedAt.delete(ref);
          }
        }
      }
    })();
    relay.start();
    const total = RELAY_RATE * RELAY_SECONDS;
    const started = Date.now();
    let sent = 0;
    while (sent < total) {
      // Ten writes every 5 ms, each its own transaction, as concurrent writers would.
      const due = Math.min(total, Math.floor(((Date.now() - started) / 1000) * RELAY_RATE));
      const pending: Promise<void>[] = [];
      for (; sent < due; sent++) {
        const ref = `bench-${sent}`;
        pending.push(
          db.transaction(
            async () => {},
            "",
            () => recordChange({ kind: ChangeKind.project, ref }, () => {}),
          ).then(() => {
            committedAt.set(ref, Date.now());
          }),
        );
      }
      await Promise.all(pending);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const deadline = Date.now() + 30_000;
    while (committedAt.size > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    reading = false;
    await read;
    reader.disconnect();
    await relay.stop();
    const p99Lag = percentile(lags, 99);
    const p50Lag = percentile(lags, 50);
    const rate = total / ((Date.now() - started) / 1000);
    return [
      {
        figure: "writes: single-row write p50 with the outbox ÷ before it",
        value: median(p50Ratio),
        unit: "×",
        budget: { op: "<=", limit: 1.1 },
        runs: p50Ratio,
        detail: p50s.map(([a, b]) => `${a.toFixed(2)} → ${b.toFixed(2)} ms`).join(", ") +
          `; ${WRITES_PER_PASS} writes each way a run, alternating batches of ${BATCH}; ` +
          `${left[0].n} outbox rows left`,
      },
      {
        figure: "writes: single-row write p50 with the outbox ÷ writing one more row (the floor)",
        value: median(floorRatio),
        unit: "×",
        budget: { op: "<=", limit: 1.1 },
        runs: floorRatio,
        detail: floors.map((ms, i) => `${ms.toFixed(2)} → ${p50s[i][1].toFixed(2)} ms`)
          .join(", ") +
          "; the floor: the same transaction inserting one row into an unlogged " +
          "table without an index, sent with the COMMIT, then the announcement",
      },
      {
        figure: "writes: single-row write p99 with the outbox ÷ before it",
        value: median(p99Ratio),
        unit: "×",
        budget: { op: "<=", limit: 1.1 },
        runs: p99Ratio,
        detail: p99s.map(([a, b]) => `${a.toFixed(2)} → ${b.toFixed(2)} ms`).join(", "),
      },
      {
        figure: `writes: relay lag at ${RELAY_RATE.toLocaleString("en")} writes a second, p99, ` +
          "beyond its grace",
        value: p99Lag - RELAY_GRACE_MS,
        unit: "ms",
        budget: { op: "<=", limit: 1_000 },
        detail: `commit to stream entry p50 ${p50Lag} ms, p99 ${p99Lag} ms (grace ` +
          `${RELAY_GRACE_MS} ms); ${lags.length} of ${total} announced, ` +
          `${rate.toFixed(0)} committed a second`,
      },
    ];
  } finally {
    await changes.close();
    redis.disconnect();
    await db.close();
    await deletePrefix(TEST_REDIS_URL, prefix).catch(() => {});
    await database.drop();
  }
}

export const writesSuite: Suite = {
  name: "writes",
  description: "a single-row write with the outbox beside the path before it; the relay's lag",
  run,
};
