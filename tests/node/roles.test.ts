/**
 * Each role starts as a real process: it reaches /ready, writes its heartbeat snapshot to
 * Redis, and stops cleanly on SIGTERM with its keys withdrawn.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisKeys } from "../../shared/redis-keys.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
} from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { killAll, startControl, waitForReady } from "../../testkit/processes.ts";

let database: TestDatabase;
let redis: Redis;
const prefix = testPrefix();
const keys = redisKeys(prefix);

beforeAll(async () => {
  database = await createTestDatabase();
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await killAll();
  redis?.disconnect();
  await deletePrefix(TEST_REDIS_URL, prefix);
  await database?.drop();
});

const GENERATED_LINE = /first admin created: username admin, password \S+/;

describe("each role", () => {
  // In this order: the api's start seeds the first admin (printing its generated password),
  // and role all, on the same database, finds it seeded and prints nothing.
  const cases = [
    { role: "api", printsPassword: true },
    { role: "controller", printsPassword: false },
    { role: "worker", printsPassword: false },
    { role: "all", printsPassword: false },
  ];

  for (const { role, printsPassword } of cases) {
    it(`${role} starts, beats, and stops cleanly`, async () => {
      const instance = `t-${role}-${randomBytes(3).toString("hex")}`;
      const control = await startControl({ databaseUrl: database.url, prefix, role, instance });
      await waitForReady(control);

      const health = await (await fetch(`${control.url}/health`)).json() as Record<
        string,
        unknown
      >;
      expect(health).toMatchObject({ status: "healthy", role, instance });

      const snapshot = await waitUntil(async () => {
        const text = await redis.get(keys.instanceSnapshot(instance));
        return text === null ? undefined : JSON.parse(text) as Record<string, unknown>;
      }, { message: "the heartbeat snapshot" });
      expect(snapshot).toMatchObject({
        instance,
        role,
        pid: control.child.pid,
        stores: { postgres: { ok: true }, redis: { ok: true } },
      });
      expect(snapshot.loops).toEqual(
        expect.arrayContaining([expect.objectContaining({ name: "heartbeat", owner: "node" })]),
      );
      expect(Object.keys(snapshot.runtimes as object).sort()).toEqual(
        role === "all" ? ["api", "controller", "worker"] : [role],
      );
      expect(await redis.sismember(keys.instanceIndex, instance)).toBe(1);
      expect(JSON.parse(await redis.get(keys.instance(instance)) ?? "{}")).toMatchObject({
        role,
        ttl_ms: 600,
      });
      // Three intervals of 200 ms.
      expect(await redis.pttl(keys.instanceSnapshot(instance))).toBeLessThanOrEqual(600);
      expect(await redis.pttl(keys.instanceSnapshot(instance))).toBeGreaterThan(0);

      const exit = await control.stop("SIGTERM");
      expect(exit).toEqual({ code: 0, signal: null });
      expect(await redis.sismember(keys.instanceIndex, instance)).toBe(0);
      expect(await redis.exists(keys.instance(instance), keys.instanceSnapshot(instance))).toBe(0);

      const generated = control.stdout.filter((line) => GENERATED_LINE.test(line));
      expect(generated).toHaveLength(printsPassword ? 1 : 0);
      // The password is never in a log line.
      const password = generated[0]?.match(/password (\S+)/)?.[1];
      if (password !== undefined) {
        const logLines = control.stdout.filter((line) => line.startsWith("{"));
        expect(logLines.some((line) => line.includes(password))).toBe(false);
      }
      expect(control.stdout.some((line) => line.includes('"msg":"Process ready"'))).toBe(true);
      // The roles that check proxies say at their start what the checks ask, and why.
      const echoLines = control.stdout.filter((line) => line.includes('"msg":"Health checks ask '));
      expect(echoLines.map((line) => JSON.parse(line).msg)).toEqual(
        role === "worker" || role === "all"
          ? [
            "Health checks ask https://httpbin.org/ip through each proxy " +
            "(no OCTOPROX_PUBLIC_URL or OCTOPROX_ECHO_URL set: the public echo)",
          ]
          : [],
      );
    });
  }
});

describe("a start that fails", () => {
  it("stops what it started and exits 1, never serving half a role", async () => {
    // The API port is taken, so the api runtime (the first of role all) cannot listen.
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const instance = `t-fail-${randomBytes(3).toString("hex")}`;
      const control = await startControl({
        databaseUrl: database.url,
        prefix,
        role: "all",
        instance,
        port,
      });
      const exit = await control.exited;
      expect(exit.code).toBe(1);
      expect(control.stderr.join("\n")).toMatch(/^octoprox: start failed: .*EADDRINUSE/m);
      expect(control.stdout.some((line) => line.includes('"msg":"Process stopped"'))).toBe(true);
      expect(await redis.exists(keys.instance(instance), keys.instanceSnapshot(instance))).toBe(0);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});
