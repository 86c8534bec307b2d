/**
 * Exclusive extraction through the real Hono app over real Postgres and Redis, pools filled by
 * the real pool store: 50 clients at once never get one proxy twice; all_or_nothing short of
 * stock changes nothing; an idempotent retry answers the same proxies and lease, another body
 * with its key is a 409; routed entries and the gateway reserve's floor are never extracted;
 * release, renewal and a lapsed lease, whose proxies retire unless the connector reuses them
 * after a cool-down; the filters; and that nothing of an extraction reaches a log line.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IndexHygieneJob } from "../../../control/jobs/housekeeping.ts";
import { EntryState } from "../../../control/provider-api/pool/contract.ts";
import {
  createConnector,
  createKey,
  createProject,
  type ExtractionBed,
  fill,
  poolRunsAsked,
  redisState,
  setReserve,
  startBed,
} from "../../../testkit/extraction.ts";
import { waitUntil } from "../../../testkit/wait.ts";

let bed: ExtractionBed;

beforeAll(async () => {
  // Connector lists read again within 0.1 s, so a test that edits one waits little.
  bed = await startBed({ extraction: { connectorsFreshMs: 100 } });
});

afterAll(async () => {
  await bed?.close();
});

/** A project with one provider-API connector of `reserve`, and a key of the project. */
async function project(
  name: string,
  reserve: number | null = 0,
  reuseAfterReleaseSeconds: number | null = null,
) {
  const projectId = await createProject(bed.h, name);
  const connectorId = await createConnector(bed.h, projectId, {
    name: "pool",
    reserve,
    reuseAfterReleaseSeconds,
  });
  const { key, id: keyId } = await createKey(bed.h, projectId);
  const connector = { id: connectorId, projectId };
  const extract = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    bed.call("POST", `/api/v1/projects/${projectId}/extract`, { key, body, headers });
  const release = (lease: string) =>
    bed.call("POST", `/api/v1/projects/${projectId}/extract/${lease}/release`, { key });
  return { projectId, connectorId, connector, key, keyId, extract, release };
}

function ids(answer: { body: { proxies: { id: string }[] } }): string[] {
  return answer.body.proxies.map((proxy) => proxy.id);
}

describe("extracting", () => {
  it("50 clients at once from a pool of 100 get every proxy once, and 100 in all", async () => {
    const p = await project("crowd");
    const pool = await fill(bed.store, p.connector, 100, 0);
    const got: string[][] = await Promise.all(
      Array.from({ length: 50 }, async (_, client) => {
        const mine: string[] = [];
        for (;;) {
          const answer = await p.extract({ count: 1 + (client % 3) });
          expect(answer.status, answer.text).toBe(200);
          if (answer.body.returned === 0) return mine;
          mine.push(...ids(answer));
        }
      }),
    );
    const all = got.flat();
    expect(all).toHaveLength(100);
    expect(new Set(all).size).toBe(100);
    expect(new Set(all)).toEqual(new Set(pool));
    expect(await bed.store.counts(p.connectorId)).toMatchObject({ stock: 0, extracted: 100 });
  });

  it("answers each proxy with its credentials in clear and its times, under one lease", async () => {
    const p = await project("shape");
    const [id] = await fill(bed.store, p.connector, 1, 0, { country: "FR", carrier: "Orange" });
    const before = Date.now();
    const answer = await p.extract({ count: 3, lease_seconds: 120 });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.headers.get("cache-control")).toBe("no-store");
    expect(answer.body).toMatchObject({ requested: 3, returned: 1 });
    const [proxy] = answer.body.proxies;
    expect(proxy).toMatchObject({
      id,
      connector_id: p.connectorId,
      scheme: "http",
      port: 8080,
      country: "FR",
      carrier: "Orange",
    });
    expect(proxy.username).toMatch(/^user\d+$/);
    expect(proxy.password).toMatch(/^secret-\d+$/);
    expect(Date.parse(proxy.usable_until)).toBeLessThan(Date.parse(proxy.expires_at));
    const leaseEnd = Date.parse(answer.body.lease.expires_at);
    expect(leaseEnd).toBeGreaterThanOrEqual(before + 120_000);
    expect(leaseEnd).toBeLessThanOrEqual(Date.now() + 120_000);
    // The entry: extracted under the lease, out of stock, in extracted by its expiry.
    const [entry] = await bed.store.entries(p.connectorId, [id]);
    expect(entry).toMatchObject({ state: EntryState.extracted, lease: answer.body.lease.id });
    const { keys, redis } = bed.h.deps;
    expect(await redis.zscore(keys.poolStock(p.connectorId), id)).toBeNull();
    expect(Number(await redis.zscore(keys.poolExtracted(p.connectorId), id))).toBe(
      entry.expires_at,
    );
    expect(Number(await redis.zscore(keys.extractLeases, answer.body.lease.id))).toBe(leaseEnd);
    // Nothing of it in a log line: no address, credential or lease.
    const logged = JSON.stringify(bed.h.lines);
    for (const secret of [proxy.host, proxy.password, answer.body.lease.id, p.key]) {
      expect(logged).not.toContain(secret);
    }
  });

  it("all_or_nothing short of stock changes nothing", async () => {
    const p = await project("all-or-nothing");
    await fill(bed.store, p.connector, 5, 0);
    const before = await redisState(bed.h);
    const answer = await p.extract({ count: 6, mode: "all_or_nothing" });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toEqual({ requested: 6, returned: 0, lease: null, proxies: [] });
    expect(await redisState(bed.h)).toEqual(before);
    // A shortfall asks a pool run for the connector.
    expect(await poolRunsAsked(bed.h)).toContain(p.connectorId);

    const all = await p.extract({ count: 5, mode: "all_or_nothing" });
    expect(all.body.returned).toBe(5);
    const counts = bed.extraction.stats.of(p.projectId).modes.all_or_nothing;
    expect(counts).toEqual({ calls: 2, requested: 11, returned: 5, insufficient: 1 });
  });

  it("partial hands out what there is", async () => {
    const p = await project("partial");
    await fill(bed.store, p.connector, 3, 0);
    const answer = await p.extract({ count: 10 });
    expect(answer.body).toMatchObject({ requested: 10, returned: 3 });
    const none = await p.extract({ count: 10 });
    expect(none.body).toEqual({ requested: 10, returned: 0, lease: null, proxies: [] });
    expect(bed.extraction.stats.of(p.projectId).modes.partial).toEqual({
      calls: 2,
      requested: 20,
      returned: 3,
      insufficient: 2,
    });
  });

  it("filters on each proxy's record: scheme, country, carrier, time left, check age, connector", async () => {
    const p = await project("filters");
    const other = await createConnector(bed.h, p.projectId, { name: "other", reserve: 0 });
    const otherRef = { id: other, projectId: p.projectId };
    const nowMs = Date.now();
    const [de] = await fill(bed.store, p.connector, 1, 0, { country: "DE", carrier: "Telekom" });
    const [us] = await fill(bed.store, p.connector, 1, 0, { country: "US" });
    const [socks] = await fill(bed.store, p.connector, 1, 0, { scheme: "socks5", country: "US" });
    const [short] = await fill(bed.store, otherRef, 1, 0, { ttlMs: 60_000, country: "GB" });
    // Checked an hour ago.
    const [stale] = await fill(bed.store, otherRef, 1, 0, {
      nowMs: nowMs - 3_600_000,
      ttlMs: 7_200_000,
      country: "GB",
    });
    const take = async (body: Record<string, unknown>) => {
      const answer = await p.extract({ count: 10, ...body });
      expect(answer.status, answer.text).toBe(200);
      return ids(answer);
    };
    expect(await take({ carrier: "TELEKOM" })).toEqual([de]);
    expect(await take({ protocol: "socks5" })).toEqual([socks]);
    expect(await take({ country: "us" })).toEqual([us]);
    // 60 s to live, usable 10 s less: too short for a 100-second minimum.
    expect(await take({ country: "GB", min_remaining_ttl_seconds: 100 })).toEqual([stale]);
    expect(await take({ connectors: [other], max_health_check_age_seconds: 600 })).toEqual([
      short,
    ]);
  });

  it("finds a connector made after the project's list was read, when a call names it", async () => {
    const p = await project("late-connector");
    expect((await p.extract({ count: 1 })).body.returned).toBe(0);
    const late = await createConnector(bed.h, p.projectId, { name: "late", reserve: 0 });
    const [id] = await fill(bed.store, { id: late, projectId: p.projectId }, 1, 0);
    const answer = await p.extract({ count: 1, connectors: [late] });
    expect(answer.status, answer.text).toBe(200);
    expect(ids(answer)).toEqual([id]);
  });

  it("refuses a body at fault naming the field, and a connector of another project", async () => {
    const p = await project("bodies");
    const stranger = await project("stranger");
    const bad = await p.extract({ count: 0, mode: "some", country: "xx", extra: 1 });
    expect(bad.status).toBe(422);
    expect(bad.body.detail.map((d: { field: string }) => d.field).sort()).toEqual([
      "body.count",
      "body.country",
      "body.extra",
      "body.mode",
    ]);
    expect((await p.extract({ count: 1001 })).status).toBe(422);
    const foreign = await p.extract({ count: 1, connectors: [stranger.connectorId] });
    expect(foreign.status).toBe(422);
    expect(foreign.body.detail).toEqual([{
      field: "body.connectors.0",
      message: "is not a connector of this project",
    }]);
    // Past the JSON bound, told by its length alone.
    const large = await p.extract({ count: 1, carrier: "x".repeat(1024 * 1024) });
    expect(large.status).toBe(413);
    const header = await p.extract({ count: 1 }, { "idempotency-key": "é" });
    expect(header.status).toBe(422);
    expect(header.body.detail[0].field).toBe("header.idempotency-key");
  });
});

describe("idempotency", () => {
  it("a retry with the same key answers the same proxies and lease; another body is a 409", async () => {
    const p = await project("idempotent");
    await fill(bed.store, p.connector, 10, 0);
    const first = await p.extract({ count: 3, country: "DE" }, { "idempotency-key": "order-1" });
    expect(first.status, first.text).toBe(200);
    expect(first.body.returned).toBe(3);
    expect(first.headers.get("idempotent-replayed")).toBeNull();

    const before = await redisState(bed.h);
    // The same request, its defaults spelt out: the same request.
    const again = await p.extract(
      { count: 3, country: "de", mode: "partial", lease_seconds: 300 },
      { "idempotency-key": "order-1" },
    );
    expect(again.status, again.text).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(await redisState(bed.h)).toEqual(before);

    const other = await p.extract({ count: 4 }, { "idempotency-key": "order-1" });
    expect(other.status).toBe(409);
    expect(other.body.error).toMatch(/Idempotency-Key was used with another request/);
    expect(await redisState(bed.h)).toEqual(before);

    // Another key of the project does not share the first key's answers.
    const second = await createKey(bed.h, p.projectId);
    const theirs = await bed.call("POST", `/api/v1/projects/${p.projectId}/extract`, {
      key: second.key,
      body: { count: 3, country: "DE" },
      headers: { "idempotency-key": "order-1" },
    });
    expect(theirs.status).toBe(200);
    expect(ids(theirs)).not.toEqual(ids(first));

    const counts = bed.extraction.stats.of(p.projectId);
    expect(counts).toMatchObject({ replays: 1, conflicts: 1 });
    expect(counts.modes.partial.calls).toBe(2);
  });

  it("concurrent calls with one key hand out one set of proxies", async () => {
    const p = await project("idempotent-race");
    await fill(bed.store, p.connector, 50, 0);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => p.extract({ count: 2 }, { "idempotency-key": "same" })),
    );
    for (const answer of answers) expect(answer.body).toEqual(answers[0].body);
    expect(await bed.store.counts(p.connectorId)).toMatchObject({ extracted: 2, stock: 48 });
  });
});

describe("the gateway's share", () => {
  it("never hands out a routed entry, nor stock below the reserve's floor", async () => {
    const p = await project("reserve", 3);
    const pool = await fill(bed.store, p.connector, 8, 3);
    const routed = await bed.h.deps.redis.zrange(
      bed.h.deps.keys.poolRouted(p.connectorId),
      "0",
      "-1",
    );
    expect(routed).toHaveLength(3);
    const answer = await p.extract({ count: 10 });
    expect(answer.body.returned).toBe(5);
    expect(ids(answer).some((id) => routed.includes(id))).toBe(false);
    expect(new Set([...ids(answer), ...routed])).toEqual(new Set(pool));

    // The reserve grows to 6: three routed, so three of the stock are owed to the gateways.
    const q = await project("floor", 3);
    await fill(bed.store, q.connector, 8, 3);
    await bed.extraction.connectors.get(q.projectId);
    await setReserve(bed.h, q.connectorId, 6);
    await waitForReserve(q.projectId, 6);
    const capped = await q.extract({ count: 10 });
    expect(capped.body.returned).toBe(2);
    expect(await bed.store.counts(q.connectorId)).toMatchObject({ routed: 3, stock: 3 });
    const none = await q.extract({ count: 1, mode: "all_or_nothing" });
    expect(none.body.returned).toBe(0);
  });

  it("takes nothing from a connector without a reserve (everything routed) or disabled", async () => {
    const p = await project("no-reserve", null);
    await fill(bed.store, p.connector, 4, null);
    const off = await createConnector(bed.h, p.projectId, {
      name: "off",
      reserve: 0,
      enabled: false,
    });
    await fill(bed.store, { id: off, projectId: p.projectId }, 4, 0);
    const answer = await p.extract({ count: 4 });
    expect(answer.body.returned).toBe(0);
    const named = await p.extract({ count: 4, connectors: [off] });
    expect(named.body.returned).toBe(0);
  });
});

/** Until the bed's connector list for the project shows `reserve`. */
async function waitForReserve(projectId: string, reserve: number): Promise<number> {
  let found: number | null | undefined;
  await waitUntil(async () => {
    const list = await bed.extraction.connectors.get(projectId);
    found = list.eligible[0]?.reserve;
    return found === reserve;
  }, { timeoutMs: 10_000, intervalMs: 100, message: `the connector list to say ${reserve}` })
    .catch((error: Error) => {
      throw new Error(`The connector list still says ${found}`, { cause: error });
    });
  return reserve;
}

describe("leases", () => {
  it("a release retires the proxies: never routed or handed out again", async () => {
    const p = await project("release");
    await fill(bed.store, p.connector, 4, 0);
    const answer = await p.extract({ count: 3 });
    const lease = answer.body.lease.id as string;
    const release = await p.release(lease);
    expect(release.status, release.text).toBe(200);
    expect(release.body).toEqual({ returned: 0, retired: 3 });
    for (const entry of await bed.store.entries(p.connectorId, ids(answer))) {
      expect(entry).toMatchObject({ state: EntryState.draining, lease: null, routed: false });
    }
    const { redis, keys } = bed.h.deps;
    expect(await redis.zcard(keys.poolExtracted(p.connectorId))).toBe(0);
    expect(await redis.zcard(keys.poolChecking(p.connectorId))).toBe(0);
    expect(await redis.exists(keys.extractLease(lease))).toBe(0);
    expect(await redis.zscore(keys.extractLeases, lease)).toBeNull();
    // Counted as draining until their expiry, when the pool job removes them.
    expect(await bed.store.counts(p.connectorId)).toMatchObject({
      stock: 1,
      extracted: 0,
      checking: 0,
      draining: 3,
    });
    // Kept as duplicates: the provider handing them out again adds nothing.
    const proxies = answer.body.proxies as Record<string, string>[];
    const again = await bed.store.add(
      p.connector,
      proxies.map((proxy) => ({
        key: `http|${proxy.host}|8080|${proxy.username}`,
        scheme: "http",
        host: proxy.host,
        port: 8080,
        username: proxy.username,
        password: proxy.password,
        country: "DE",
        expiresAtMs: Date.parse(proxy.expires_at),
        usableUntilMs: Date.parse(proxy.usable_until),
      })),
      { nowMs: Date.now(), maxSize: 100 },
    );
    expect(again).toMatchObject({ added: 0, duplicates: 3 });
    // Never handed out again, nor routed, even with a reserve that takes every available one.
    const next = await p.extract({ count: 4 });
    expect(next.body.returned).toBe(1);
    await bed.store.maintain(p.connector, { nowMs: Date.now(), reserve: 10 });
    const routed = (await bed.store.routed(p.connectorId, Date.now())).map((entry) => entry.id);
    for (const id of ids(answer)) expect(routed).not.toContain(id);
    // A second release finds nothing.
    const twice = await p.release(lease);
    expect(twice.status).toBe(404);
    expect(bed.extraction.stats.of(p.projectId).released).toBe(1);
  });

  it("with reuse_after_release_seconds, a release returns the proxies to be checked after the cool-down", async () => {
    const p = await project("reuse", 0, 30);
    await fill(bed.store, p.connector, 3, 0);
    const answer = await p.extract({ count: 3 });
    const lease = answer.body.lease.id as string;
    const releasedAt = Date.now();
    const release = await p.release(lease);
    expect(release.status, release.text).toBe(200);
    expect(release.body).toEqual({ returned: 3, retired: 0 });
    for (const entry of await bed.store.entries(p.connectorId, ids(answer))) {
      expect(entry).toMatchObject({ state: EntryState.checking, lease: null, routed: false });
    }
    const { redis, keys } = bed.h.deps;
    for (const id of ids(answer)) {
      const due = Number(await redis.zscore(keys.poolChecking(p.connectorId), id));
      expect(due).toBeGreaterThanOrEqual(releasedAt + 30_000);
      expect(due).toBeLessThanOrEqual(Date.now() + 30_000);
    }
    expect(await poolRunsAsked(bed.h)).toContain(p.connectorId);
    // Not due a check during the cool-down; due after it.
    expect(await bed.store.checkingIds(p.connectorId, 10, Date.now())).toEqual([]);
    expect((await bed.store.checkingIds(p.connectorId, 10, Date.now() + 31_000)).sort()).toEqual(
      ids(answer).sort(),
    );
    // Not extractable while waiting, and again once a check passed.
    expect((await p.extract({ count: 3 })).body.returned).toBe(0);
    await bed.store.markChecked(
      p.connector,
      ids(answer).map((id) => ({ id, passed: true })),
      { nowMs: Date.now(), reserve: 0 },
    );
    expect((await p.extract({ count: 3 })).body.returned).toBe(3);
  });

  it("a renewal moves the lease's end; another project's key cannot touch the lease", async () => {
    const p = await project("renew");
    await fill(bed.store, p.connector, 1, 0);
    const answer = await p.extract({ count: 1, lease_seconds: 60 });
    const lease = answer.body.lease.id as string;
    const renewed = await bed.call(
      "POST",
      `/api/v1/projects/${p.projectId}/extract/${lease}/renew`,
      { key: p.key, body: { lease_seconds: 3600 } },
    );
    expect(renewed.status, renewed.text).toBe(200);
    expect(renewed.body.id).toBe(lease);
    const end = Date.parse(renewed.body.expires_at);
    expect(end).toBeGreaterThan(Date.parse(answer.body.lease.expires_at) + 3_000_000);
    const { redis, keys } = bed.h.deps;
    expect(Number(await redis.zscore(keys.extractLeases, lease))).toBe(end);
    expect(Number(await redis.hget(keys.extractLease(lease), "end"))).toBe(end);

    const q = await project("renew-stranger");
    const theirs = await bed.call(
      "POST",
      `/api/v1/projects/${q.projectId}/extract/${lease}/renew`,
      { key: q.key, body: { lease_seconds: 10 } },
    );
    expect(theirs.status).toBe(404);
    const release = await q.release(lease);
    expect(release.status).toBe(404);
    expect(await redis.exists(keys.extractLease(lease))).toBe(1);
    const missing = await bed.call(
      "POST",
      `/api/v1/projects/${p.projectId}/extract/${crypto.randomUUID()}/renew`,
      { key: p.key, body: { lease_seconds: 10 } },
    );
    expect(missing.status).toBe(404);
  });

  it("a lease past its end is ended by index hygiene, its proxies retired, and is no longer renewed", async () => {
    const p = await project("lapse");
    await fill(bed.store, p.connector, 2, 0);
    const answer = await p.extract({ count: 2, lease_seconds: 30 });
    const lease = answer.body.lease.id as string;
    const later = Date.now() + 60_000;
    const hygiene = new IndexHygieneJob({
      redis: bed.h.deps.redis,
      keys: bed.h.deps.keys,
      jobs: bed.h.deps.jobs,
      logger: bed.h.deps.logger,
      now: () => later,
    });
    // Before its end: nothing returned.
    const early = new IndexHygieneJob({
      redis: bed.h.deps.redis,
      keys: bed.h.deps.keys,
      jobs: bed.h.deps.jobs,
      logger: bed.h.deps.logger,
    });
    expect((await early.returnEndedLeases()).leases).toBe(0);
    const swept = await hygiene.returnEndedLeases();
    expect(swept).toMatchObject({ leases: 1, entries: 0, retired: 2 });
    for (const entry of await bed.store.entries(p.connectorId, ids(answer))) {
      expect(entry).toMatchObject({ state: EntryState.draining, lease: null });
    }
    const renew = await bed.call(
      "POST",
      `/api/v1/projects/${p.projectId}/extract/${lease}/renew`,
      { key: p.key, body: { lease_seconds: 60 } },
    );
    expect(renew.status).toBe(404);
  });

  it("the api returns ended leases as extractions come, counting them lapsed", async () => {
    const p = await project("lapse-api");
    await fill(bed.store, p.connector, 1, 0);
    const answer = await p.extract({ count: 1, lease_seconds: 30 });
    expect(await bed.extraction.service.sweep(Date.now() + 60_000, 100)).toBeGreaterThanOrEqual(1);
    const [entry] = await bed.store.entries(p.connectorId, ids(answer));
    expect(entry.state).toBe(EntryState.draining);
    expect(bed.extraction.stats.of(p.projectId).lapsed).toBe(1);
  });

  it("an ended lease whose entries expired meanwhile ends with nothing to return", async () => {
    const p = await project("expired");
    await fill(bed.store, p.connector, 1, 0);
    const answer = await p.extract({ count: 1 });
    // The pool job reaps past expiry: the entry is gone.
    await bed.store.maintain(p.connector, { nowMs: Date.now() + 3_600_000, reserve: 0 });
    const release = await p.release(answer.body.lease.id);
    expect(release.body).toEqual({ returned: 0, retired: 0 });
  });
});
