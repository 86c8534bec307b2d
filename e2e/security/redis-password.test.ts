/**
 * A Redis that requires a password, as a production one does: every process of the cluster and
 * a gateway reach it with the password in OCTOPROX_REDIS_URL, Redis goes away and comes back
 * under them, and the password is then in none of their log lines, their /metrics or Redis
 * (the cluster's secrets scan, which knows the URL's password).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import { Cluster, type Gateway, type Member } from "../../testkit/cluster.ts";

let folder: string;
let redis: LocalRedis;
let cluster: Cluster;
let control: Member;
let gateway: Gateway;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-redis-password-"));
  redis = new LocalRedis({
    dir: join(folder, "redis"),
    port: await freePort(),
    password: `Redis-Passw0rd-${randomBytes(6).toString("hex")}`,
  });
  await redis.start();
  cluster = await Cluster.create({ redisUrl: redis.url });
  control = await cluster.start("all");
  gateway = await cluster.startGateway();
}, 120_000);

afterAll(async () => {
  await cluster?.close();
  await redis?.stop();
  if (folder) await rm(folder, { recursive: true, force: true });
});

describe("a Redis with a password", () => {
  test("its password is in no log line, metric or key, through an outage", async () => {
    expect(redis.url).toContain(`:${redis.password}@`);
    const project = await cluster.request("POST", "/api/v1/projects", {
      name: "rp",
      username: "rp",
    });
    expect(project.status).toBe(201);
    const linesBefore = control.stdout.length + gateway.stdout.length;
    await redis.stop({ kill: true });
    // Both notice: they log what failed (where a careless line would name the URL).
    await cluster.until(
      () => control.stdout.length + gateway.stdout.length > linesBefore + 4,
      { timeoutMs: 20_000, message: "the processes to log the outage" },
    );
    await redis.start();
    await cluster.waitForReady(control);
    await cluster.waitForReady(gateway);
    expect(await cluster.secretsScan.check(cluster)).toEqual([]);
  });
});
