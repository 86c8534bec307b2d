/**
 * The health job's status moves against real Postgres and Redis (the api harness's stores): two
 * checks of one proxy at once (two workers, a reclaimed entry run beside a fresh one) both find
 * it degraded and both judge it unhealthy; the compare-and-set lets one move it, and only that
 * one says so. The chaos suite found every worker logging "Proxy marked unhealthy" for one move.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { proxies } from "../../db/schema.ts";
import { HealthCheckJob, UNHEALTHY_AFTER_FAILURES } from "../../control/jobs/health.ts";
import { Semaphore } from "../../control/core/semaphore.ts";
import { applyStatusChanges, type StatusChange } from "../../control/services/proxy-status.ts";
import { ProxyStatus } from "../../shared/roles.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { refusingAddress } from "../../testkit/ports.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let origin: Origin;

beforeAll(async () => {
  [h, origin] = await Promise.all([startHarness(), startOrigin()]);
});

afterAll(async () => {
  await h?.close();
  await origin?.close();
});

/** A proxy nothing listens for (its checks fail at once), degraded one check short. */
async function failingProxy(): Promise<string> {
  const refused = refusingAddress(origin.port);
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: `p${Date.now()}`, username: `p${Date.now()}` },
  });
  const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
    token: h.tokens.editor,
    body: { name: "static", kind: "static" },
  });
  const proxy = await h.request("POST", `/api/v1/projects/${project.body.id}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connector.body.id, url: `http://${refused.host}:${refused.port}` },
  });
  expect(proxy.status, proxy.text).toBe(201);
  const id = proxy.body.id as string;
  await h.deps.database.db.update(proxies).set({ status: ProxyStatus.degraded }).where(
    eq(proxies.id, id),
  );
  await h.deps.redis.hset(h.deps.keys.proxyHealth(id), {
    failures: UNHEALTHY_AFTER_FAILURES - 1,
  });
  return id;
}

describe("two checks of one proxy at once", () => {
  it("move its status once, and only the one that moved it says so", async () => {
    const id = await failingProxy();
    // Both checks have loaded the row (degraded) before either writes.
    let arrived = 0;
    let release!: () => void;
    const bothLoaded = new Promise<void>((resolve) => (release = resolve));
    const writes: (readonly StatusChange[])[] = [];
    const job = (logger: ReturnType<typeof captureLogger>["logger"]) =>
      new HealthCheckJob({
        db: h.deps.database.db,
        redis: h.deps.redis,
        keys: h.deps.keys,
        logger,
        writeStatuses: async (changes) => {
          if (++arrived === 2) release();
          await bothLoaded;
          const applied = await applyStatusChanges(h.deps, changes);
          writes.push(applied);
          return applied;
        },
        echoUrl: `${origin.url}/echo`,
        timeoutMs: 2_000,
        probes: new Semaphore(4),
      });
    const [first, second] = [captureLogger("worker"), captureLogger("worker")];
    const batch = { ids: ["1-0"], keys: [id], deliveries: 1 };
    const signal = new AbortController().signal;
    await Promise.all([
      job(first.logger).run(batch, signal),
      job(second.logger).run(batch, signal),
    ]);

    const [row] = await h.deps.database.db.select().from(proxies).where(eq(proxies.id, id));
    expect(row.status).toBe(ProxyStatus.unhealthy);
    // One compare-and-set applied, the other found the row moved.
    expect(writes.map((w) => w.length).sort()).toEqual([0, 1]);
    const said = [...first.lines, ...second.lines].filter((line) =>
      line.msg === "Proxy marked unhealthy"
    );
    expect(said).toEqual([expect.objectContaining({ proxy: id })]);
  });
});
