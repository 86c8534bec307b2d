/**
 * The scale run's rules on each of the three clouds, run in process against real Postgres and
 * Redis and the three emulators (their real SDK clients): connectors made through the api as an
 * admin would, each run given its own clock, so rules measured in minutes (the cooldown, the
 * back-off, the demand window, an entry's freshness, rotation) are checked without waiting for
 * them. Demand is written as gateways' metering writes it (one hash per project and minute);
 * e2e/cloud/ drives it with real traffic.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ScaleOutcome, ScaleRun } from "../../control/jobs/scale-run.ts";
import { applyStatusChanges } from "../../control/services/proxy-status.ts";
import { demandMinute } from "../../shared/metric-windows.ts";
import { ProxyStatus } from "../../shared/roles.ts";
import type { CloudProvider } from "../../control/model/cloud.ts";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { runCli } from "../../testkit/cli.ts";
import { CLOUDS, startTestClouds, type TestCloud, type TestClouds } from "../../testkit/clouds.ts";
import { freePort } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";

let clouds: TestClouds;
let h: ApiHarness;

beforeAll(async () => {
  clouds = await startTestClouds();
  h = await startHarness({
    env: {
      ...clouds.env,
      OCTOPROX_CLOUD_PROXY_PORT: String(await freePort()),
      OCTOPROX_CLOUD_POLL_INTERVAL: "0.05",
      OCTOPROX_CLOUD_CREATE_TIMEOUT: "20",
    },
  });
});

afterAll(async () => {
  await h?.close();
  await clouds?.close();
});

const MINUTE = 60_000;

interface Fleet {
  cloud: TestCloud;
  projectId: string;
  connectorId: string;
}

/** A project with a cloud credential and connector, made through the api. */
async function fleet(provider: CloudProvider, config: Record<string, unknown>): Promise<Fleet> {
  const cloud = clouds.clouds[provider];
  const name = `f${randomBytes(4).toString("hex")}`;
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.admin,
    body: { name, username: name },
  });
  expect(project.status).toBe(201);
  const credential = await h.request("POST", `/api/v1/projects/${project.body.id}/credentials`, {
    token: h.tokens.admin,
    body: { name: provider, provider, config: cloud.credential },
  });
  expect(credential.status, JSON.stringify(credential.body)).toBe(201);
  const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
    token: h.tokens.admin,
    body: {
      name: "fleet",
      kind: "cloud",
      provider,
      credential_id: credential.body.id,
      config: cloud.connectorConfig({ instance_name: name, ...config }),
    },
  });
  expect(connector.status, JSON.stringify(connector.body)).toBe(201);
  return { cloud, projectId: project.body.id, connectorId: connector.body.id };
}

function runner(now: () => number): ScaleRun {
  return new ScaleRun({
    deps: h.deps,
    redis: h.deps.redis,
    keys: h.deps.keys,
    logger: h.deps.logger,
    now,
  });
}

function runAt(
  f: Fleet,
  atMs: number,
  signal = AbortSignal.timeout(60_000),
): Promise<ScaleOutcome> {
  return runner(() => atMs).run(f.connectorId, signal);
}

interface Row {
  id: string;
  status: string;
  host: string;
  instance_id: string | null;
  name: string | null;
}

async function rows(f: Fleet): Promise<Row[]> {
  return await h.deps.database.sql<Row[]>`
    select id, status, host, instance_id, metadata ->> 'instance_name' as name
      from proxies where connector_id = ${f.connectorId} order by created_at, id`;
}

const active = (list: readonly Row[]) =>
  list.filter((row) =>
    row.status !== ProxyStatus.draining && row.status !== ProxyStatus.terminating
  );

/** Marks the fleet's initializing rows healthy, as their first passing health check would. */
async function checkedHealthy(f: Fleet): Promise<void> {
  const waiting = (await rows(f)).filter((row) => row.status === ProxyStatus.initializing);
  await applyStatusChanges(
    h.deps,
    waiting.map((row) => ({
      id: row.id,
      connectorId: f.connectorId,
      from: ProxyStatus.initializing,
      to: ProxyStatus.healthy,
    })),
  );
}

/**
 * Demand as gateways meter it: `perMinute` requests in each minute of the five up to and
 * including the one `atMs` falls in.
 */
async function demand(f: Fleet, atMs: number, perMinute: number): Promise<void> {
  const minute = demandMinute(atMs);
  const pipeline = h.deps.redis.pipeline();
  for (let back = 0; back <= 5; back++) {
    const key = h.deps.keys.demand(f.projectId, minute - back);
    pipeline.hset(key, "requests", perMinute, "rejections", 0).expire(key, 3600);
  }
  await pipeline.exec();
}

/** The fleet's instances in the cloud, by name. */
const names = (f: Fleet) =>
  f.cloud.instances().filter((i) => i.tags["octoprox-connector"] === f.connectorId)
    .map((i) => i.name).sort();

describe.each(CLOUDS)("on %s", (provider) => {
  it("fills the pool to its minimum without traffic, steps up with demand by a third of the range, and down by a sixth once a window was watched, draining before terminating", async () => {
    const f = await fleet(provider, { min_proxies: 2, max_proxies: 8 });
    let t = Date.now();
    // Below its minimum the pool grows with no traffic, a step at most (a third of 6: 2).
    const first = await runAt(f, t);
    expect(first.created).toBe(2);
    let list = await rows(f);
    expect(list.map((row) => row.status)).toEqual(["initializing", "initializing"]);
    expect(names(f)).toEqual(list.map((row) => row.name).sort());
    // Every instance carries the connector's tag, its row the address the cloud gave it.
    const seen = f.cloud.instances().filter((i) => names(f).includes(i.name));
    for (const row of list) {
      expect(seen.find((i) => i.name === row.name)?.address).toBe(row.host);
      expect(row.instance_id).toMatch(new RegExp(`^${provider}-`));
    }
    // No tag holds the proxy's login: only the start-up script does.
    for (const instance of seen) {
      expect(JSON.stringify(instance.tags)).not.toMatch(
        /OCTOPROX_PROXY_PASSWORD|ox[A-Za-z0-9]{10}/,
      );
      expect(instance.script).toMatch(/^OCTOPROX_PROXY_PASSWORD=[A-Za-z0-9]{24}$/m);
    }

    // At its target with no demand; with demand, the step's cooldown holds the next, then the
    // new instances initializing do.
    expect((await runAt(f, t += 1000)).hold).toBe("at_target");
    await demand(f, t, 1000);
    expect((await runAt(f, t += 1000)).hold).toBe("cooldown");
    expect((await runAt(f, t += 181_000)).hold).toBe("initializing");
    await checkedHealthy(f);

    // Demand far over 35 a minute per instance: HIGH, the maximum, two at a time.
    const sizes: number[] = [];
    for (let step = 0; step < 3; step++) {
      t += 181_000;
      await demand(f, t, 5000);
      const outcome = await runAt(f, t);
      expect(outcome.target).toBe(8);
      expect(outcome.created).toBe(2);
      await checkedHealthy(f);
      sizes.push(active(await rows(f)).length);
    }
    expect(sizes).toEqual([4, 6, 8]);
    expect(names(f)).toHaveLength(8);
    expect((await runAt(f, t += 181_000)).hold).toBe("at_target");

    // Quiet: LOW, the minimum, a sixth of the range (1) at a time, each instance drained first.
    t += 10 * MINUTE;
    const down = await runAt(f, t);
    expect(down.target).toBe(2);
    expect(down.drained).toBe(1);
    list = await rows(f);
    const drained = list.filter((row) => row.status === ProxyStatus.draining);
    expect(drained).toHaveLength(1);
    expect(names(f)).toHaveLength(8);
    // Its counters stand still: a baseline, then two equal checks, then it is terminated.
    await runAt(f, t += 1000);
    expect(names(f)).toHaveLength(8);
    await runAt(f, t += 1000);
    expect(names(f)).toHaveLength(8);
    const ended = await runAt(f, t += 1000);
    expect(ended.terminated).toBe(1);
    expect(names(f)).toHaveLength(7);
    expect(names(f)).not.toContain(drained[0].name);
    expect((await rows(f)).map((row) => row.id)).not.toContain(drained[0].id);
  });

  it("two runs overlapping on one connector take one step: the HOLD script lets one create", async () => {
    const f = await fleet(provider, { min_proxies: 0, max_proxies: 6 });
    const t = Date.now();
    await demand(f, t, 5000);
    const [a, b] = await Promise.all([runAt(f, t), runAt(f, t)]);
    expect([a.created, b.created].sort()).toEqual([0, 2]);
    expect([a.hold, b.hold]).toContain("creating");
    expect(names(f)).toHaveLength(2);
    expect(await rows(f)).toHaveLength(2);
    expect(await h.deps.redis.hlen(h.deps.keys.scaleCreating(f.connectorId))).toBe(0);
  });

  it("a failing cloud backs off 2^errors minutes, up to 30, and the error is on the connector", async () => {
    const f = await fleet(provider, { min_proxies: 1, max_proxies: 2 });
    f.cloud.refuseCreates(true);
    try {
      let t = Date.now();
      const creates = () => f.cloud.calls("create");
      let before = creates();
      await runAt(f, t);
      expect(creates()).toBeGreaterThan(before);
      for (const waitMinutes of [2, 4, 8, 16, 30, 30]) {
        before = creates();
        const held = await runAt(f, t + waitMinutes * MINUTE - 1000);
        expect(held.hold).toBe("backoff");
        expect(creates()).toBe(before);
        t += waitMinutes * MINUTE + 1000;
        await runAt(f, t);
        expect(creates()).toBeGreaterThan(before);
      }
      await runAt(f, t + 1000);
      const view = await h.request(
        "GET",
        `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}/instances`,
        { token: h.tokens.viewer },
      );
      expect(view.status).toBe(200);
      expect(view.body.consecutive_errors).toBe(7);
      expect(view.body.last_error).toMatch(new RegExp(`^${provider} `));
      expect(view.body.backoff_until).not.toBeNull();
      expect(view.body.hold).toBe("backoff");
      expect(names(f)).toEqual([]);
      // Working again: the next allowed run creates, and the errors are cleared.
      f.cloud.refuseCreates(false);
      const again = await runAt(f, t + 31 * MINUTE);
      expect(again.created).toBe(1);
      const [connector] = await h.deps.database.sql<{ consecutive_errors: number }[]>`
        select consecutive_errors from connectors where id = ${f.connectorId}`;
      expect(connector.consecutive_errors).toBe(0);
    } finally {
      f.cloud.refuseCreates(false);
    }
  });

  it("a creator stopped mid-create keeps every run listing until its entry is stale, then its instance is terminated", async () => {
    const f = await fleet(provider, { min_proxies: 1, max_proxies: 1 });
    const t = Date.now();
    f.cloud.slowCreates(true);
    const stop = new AbortController();
    const cut = runAt(f, t, stop.signal).catch((error) => error);
    try {
      await waitUntil(() => names(f).length === 1, { timeoutMs: 10_000, message: "a launch" });
      // A stop cuts the create short: its entry stays, as a crash leaves it.
      stop.abort(new Error("worker stopping"));
      expect(await cut).toBeInstanceOf(Error);
    } finally {
      f.cloud.slowCreates(false);
    }
    expect(await h.deps.redis.hlen(h.deps.keys.scaleCreating(f.connectorId))).toBe(1);
    await waitUntil(
      () => f.cloud.instances().some((i) => names(f).includes(i.name) && i.state === "running"),
      {
        timeoutMs: 10_000,
        message: "the launched instance to run",
      },
    );
    const [orphan] = names(f);
    // While the entry is fresh, runs list (the entry makes them) and keep the instance.
    const listsBefore = f.cloud.calls("list");
    const fresh = await runAt(f, t + 5 * MINUTE);
    expect(fresh.listed).toBe(true);
    expect(f.cloud.calls("list")).toBe(listsBefore + 1);
    expect(fresh.hold).toBe("creating");
    expect(names(f)).toEqual([orphan]);
    // Stale (600 s): the instance has no row, so it is terminated, and the entry cleared.
    const stale = await runAt(f, t + 601_000);
    expect(stale.unrecordedTerminated).toBe(1);
    expect(names(f)).not.toContain(orphan);
    expect(await h.deps.redis.hlen(h.deps.keys.scaleCreating(f.connectorId))).toBe(0);
    expect(
      h.lines.some((line) =>
        line.msg === "Terminating a cloud instance with no row" && line.instance === orphan
      ),
    ).toBe(true);
  });

  it("a Redis wipe mid-create saves no row, and a listing within the hour terminates the instance", async () => {
    const f = await fleet(provider, { min_proxies: 1, max_proxies: 1 });
    const t = Date.now();
    f.cloud.slowCreates(true);
    const creating = runAt(f, t);
    await waitUntil(() => names(f).length === 1, { timeoutMs: 10_000, message: "a launch" });
    // Everything the connector keeps in Redis is lost.
    await h.deps.redis.del(
      h.deps.keys.scaleCreating(f.connectorId),
      h.deps.keys.autoscaler(f.connectorId),
    );
    f.cloud.slowCreates(false);
    const outcome = await creating;
    expect(outcome.created).toBe(0);
    expect(await rows(f)).toEqual([]);
    expect(
      h.lines.some((line) => line.msg.startsWith("Saving no row")),
      JSON.stringify(h.lines.slice(-8)),
    ).toBe(true);
    const [lost] = names(f);
    // The creator's run wrote its state back (its listing's time with it), so the next run does
    // not list: it creates the minimum anew beside the lost instance.
    const next = await runAt(f, t + 1000);
    expect(next.listed).toBe(false);
    expect(next.created).toBe(1);
    expect(names(f)).toHaveLength(2);
    // Within the hour a run lists, finds the lost instance with neither row nor entry, and
    // terminates it; the recorded one stays.
    const hourly = await runAt(f, t + 61 * MINUTE);
    expect(hourly.listed).toBe(true);
    expect(hourly.unrecordedTerminated).toBe(1);
    expect(names(f)).not.toContain(lost);
    expect(names(f)).toHaveLength(1);
    expect(await rows(f)).toHaveLength(1);
  });

  it("rotation replaces an instance at its time: the replacement first, and once it passed its checks the old one drains and goes", async () => {
    const f = await fleet(provider, {
      min_proxies: 1,
      max_proxies: 1,
      min_rotation_period_minutes: 1,
      max_rotation_period_minutes: 1,
    });
    let t = Date.now();
    await runAt(f, t);
    await checkedHealthy(f);
    const [old] = await rows(f);
    expect((await runAt(f, t += 1000)).created).toBe(0);
    const rotated = await runAt(f, t += MINUTE);
    expect(rotated.created).toBe(1);
    // The replacement's own time is drawn by the next run: an hour, so this test's clock (ahead
    // of the database's, which dates the rows) does not find it due at once.
    const edit = await h.request(
      "PATCH",
      `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}`,
      {
        token: h.tokens.editor,
        body: {
          config: f.cloud.connectorConfig({
            instance_name: old.name!.split("-")[0],
            min_proxies: 1,
            max_proxies: 1,
            min_rotation_period_minutes: 60,
            max_rotation_period_minutes: 60,
          }),
        },
      },
    );
    expect(edit.status, JSON.stringify(edit.body)).toBe(200);
    // While the replacement has not passed a check, the old instance serves on, and no other
    // run rotates it again (its entry stands).
    let list = await rows(f);
    expect(list.find((row) => row.id === old.id)?.status).toBe(ProxyStatus.healthy);
    expect(list.filter((row) => row.status === ProxyStatus.initializing)).toHaveLength(1);
    // Two active instances over a target of one, past the cooldown: the replacement still
    // initializing holds the step, so neither is drained.
    const waiting = await runAt(f, t += 200_000);
    expect(waiting.created).toBe(0);
    expect(waiting.drained).toBe(0);
    expect(waiting.hold).toBe("initializing");
    expect((await rows(f)).find((row) => row.id === old.id)?.status).toBe(ProxyStatus.healthy);
    // The replacement passed: the old instance drains, then goes.
    await checkedHealthy(f);
    await runAt(f, t += 1000);
    list = await rows(f);
    expect(list.find((row) => row.id === old.id)?.status).toBe(ProxyStatus.draining);
    expect(active(list)).toHaveLength(1);
    expect(names(f)).toHaveLength(2);
    expect(await h.deps.redis.hlen(h.deps.keys.scaleCreating(f.connectorId))).toBe(0);
    for (let check = 0; check < 3; check++) await runAt(f, t += 1000);
    expect(names(f)).not.toContain(old.name);
    expect((await rows(f)).map((row) => row.id)).not.toContain(old.id);
    expect(names(f)).toHaveLength(1);
  });

  it("a deleted connector is emptied in the cloud, then deleted with its keys", async () => {
    const f = await fleet(provider, { min_proxies: 2, max_proxies: 8 });
    const t = Date.now();
    await runAt(f, t);
    expect(names(f)).toHaveLength(2);
    const deleted = await h.request(
      "DELETE",
      `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}`,
      { token: h.tokens.editor },
    );
    expect(deleted.status).toBe(202);
    const pending = await h.request(
      "GET",
      `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}`,
      { token: h.tokens.viewer },
    );
    expect(pending.body).toMatchObject({ pending_deletion: true, enabled: false });
    expect((await rows(f)).map((row) => row.status)).toEqual(["terminating", "terminating"]);
    // An edit of a connector being deleted is refused.
    const edit = await h.request(
      "PATCH",
      `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}`,
      { token: h.tokens.editor, body: { enabled: true } },
    );
    expect(edit.status).toBe(400);
    const first = await runAt(f, t + 1000);
    expect(first.terminated).toBe(2);
    expect(first.deleted).toBe(false);
    expect(names(f)).toEqual([]);
    expect(await rows(f)).toEqual([]);
    // The next run's listing is empty: the connector goes, and its Redis keys with it.
    const second = await runAt(f, t + 2000);
    expect(second.deleted).toBe(true);
    const gone = await h.request(
      "GET",
      `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}`,
      { token: h.tokens.viewer },
    );
    expect(gone.status).toBe(404);
    expect(
      await h.deps.redis.exists(
        h.deps.keys.autoscaler(f.connectorId),
        h.deps.keys.scaleCreating(f.connectorId),
      ),
    ).toBe(0);
  });

  it("a connector whose listings fail stays pending deletion, logged at every run, until a listing works", async () => {
    const f = await fleet(provider, { min_proxies: 1, max_proxies: 2 });
    const t = Date.now();
    await runAt(f, t);
    expect(names(f)).toHaveLength(1);
    const deleted = await h.request(
      "DELETE",
      `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}`,
      { token: h.tokens.editor },
    );
    expect(deleted.status).toBe(202);
    f.cloud.failListings(true);
    try {
      const warnings = () =>
        h.lines.filter((line) =>
          line.msg === "Listing the connector's cloud instances failed" &&
          line.connector === f.connectorId
        ).length;
      for (let run = 1; run <= 3; run++) {
        const outcome = await runAt(f, t + run * 1000);
        expect(outcome.deleted).toBe(false);
        expect(warnings()).toBe(run);
      }
      // Its row's instance was terminated, but with no listing nothing says the cloud is empty.
      expect(names(f)).toEqual([]);
      const pending = await h.request(
        "GET",
        `/api/v1/projects/${f.projectId}/connectors/${f.connectorId}`,
        { token: h.tokens.viewer },
      );
      expect(pending.body.pending_deletion).toBe(true);
    } finally {
      f.cloud.failListings(false);
    }
    expect((await runAt(f, t + 10_000)).deleted).toBe(true);
  });
});

describe("octoprox connectors instances", () => {
  it("shows the instances, the target and what holds the pool, as a table and as JSON", async () => {
    const f = await fleet("aws", { min_proxies: 1, max_proxies: 3 });
    await runAt(f, Date.now());
    const api = await listen(h.app);
    const dir = await mkdtemp(join(tmpdir(), "ox-cloud-cli-"));
    try {
      const project = (await h.request("GET", `/api/v1/projects/${f.projectId}`, {
        token: h.tokens.viewer,
      })).body.name as string;
      const target = { port: api.port, token: h.tokens.viewer, configHome: dir };
      const table = await runCli(target, [
        "connectors",
        "instances",
        "fleet",
        "--project",
        project,
      ]);
      expect(table.code, table.stderr).toBe(0);
      const [row] = await rows(f);
      expect(table.stdout).toContain(row.host);
      expect(table.stdout).toContain(row.name!);
      expect(table.stdout).toMatch(/Target\s+1/);
      const json = await runCli(target, [
        "connectors",
        "instances",
        "fleet",
        "--project",
        project,
        "--json",
      ]);
      expect(json.code, json.stderr).toBe(0);
      const view = JSON.parse(json.stdout);
      expect(view).toMatchObject({ provider: "aws", target: 1, min_proxies: 1, max_proxies: 3 });
      expect(view.instances.map((i: { address: string }) => i.address)).toEqual([row.host]);
    } finally {
      await api.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
