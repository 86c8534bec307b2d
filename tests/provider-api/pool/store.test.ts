/**
 * The activity pool over a real Redis: the first source keeps a proxy (another connector's copy,
 * of this project or another, is a duplicate, and the owner's expiry is untouched), the size cap, checks that route up to
 * the gateway reserve and stock the rest, drains at usable-until, removal at expiry with the
 * ownership, promotion of stock to the reserve, never a routed entry back to stock, purge;
 * re-checks: a failure makes an available entry suspect (out of the feed and the stock), a pass
 * puts it back where it was, `remove_after_failures` in a row remove it, gateways' evidence makes
 * it suspect but never removes it; and that no credential is in Redis in clear.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NewPoolProxy } from "../../../control/provider-api/pool/contract.ts";
import { CredentialSealer } from "../../../control/provider-api/pool/credentials.ts";
import { RedisPoolStore } from "../../../control/provider-api/pool/store.ts";
import { type RedisKeys, redisKeys } from "../../../shared/redis-keys.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../../testkit/stores.ts";

let redis: Redis;
const prefixes: string[] = [];
const sealer = new CredentialSealer("a".repeat(40));

beforeAll(() => {
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(TEST_REDIS_URL, prefix);
  redis.disconnect();
});

function bed(): { keys: RedisKeys; store: RedisPoolStore } {
  const prefix = testPrefix();
  prefixes.push(prefix);
  const keys = redisKeys(prefix);
  return { keys, store: new RedisPoolStore({ redis, keys, sealer }) };
}

const NOW = 1_800_000_000_000;
const A = { id: "conn-a", projectId: "proj" };
const B = { id: "conn-b", projectId: "proj" };
/** A connector of another project. */
const C = { id: "conn-c", projectId: "other-proj" };

function proxy(n: number, overrides: Partial<NewPoolProxy> = {}): NewPoolProxy {
  return {
    key: `http|10.0.0.${n}|8080|user${n}`,
    scheme: "http",
    host: `10.0.0.${n}`,
    port: 8080,
    username: `user${n}`,
    password: `secret-password-${n}`,
    country: "DE",
    expiresAtMs: NOW + 600_000,
    usableUntilMs: NOW + 590_000,
    ...overrides,
  };
}

describe("adding", () => {
  it("adds fresh proxies as checking and counts duplicates of any upstream of the project", async () => {
    const { store, keys } = bed();
    const first = await store.add(A, [proxy(1), proxy(2)], { nowMs: NOW, maxSize: 100 });
    expect(first).toMatchObject({ added: 2, duplicates: 0, overMax: 0 });
    expect(await store.counts(A.id)).toEqual({
      checking: 2,
      suspect: 0,
      routed: 0,
      stock: 0,
      extracted: 0,
      draining: 0,
    });
    // B hands out proxy 2 again with a longer life: a duplicate, and A's entry keeps its expiry.
    const second = await store.add(B, [proxy(2, { expiresAtMs: NOW + 3_600_000 }), proxy(3)], {
      nowMs: NOW,
      maxSize: 100,
    });
    expect(second).toMatchObject({ added: 1, duplicates: 1 });
    const [owned] = await store.entries(A.id, [first.ids[1]]);
    expect(owned.expires_at).toBe(NOW + 600_000);
    expect(await redis.zscore(keys.poolExpiry(A.id), first.ids[1])).toBe(String(NOW + 600_000));
    // A itself handing it out again is a duplicate too.
    expect(await store.add(A, [proxy(1)], { nowMs: NOW, maxSize: 100 })).toMatchObject({
      added: 0,
      duplicates: 1,
    });
  });

  it("holds a proxy in one pool across projects: another project's copy is a duplicate until the holder lets it go", async () => {
    const { store } = bed();
    const held = await store.add(A, [proxy(1)], { nowMs: NOW, maxSize: 100 });
    await store.markChecked(A, [{ id: held.ids[0], passed: true }], { nowMs: NOW, reserve: 0 });
    expect(await store.add(C, [proxy(1), proxy(2)], { nowMs: NOW, maxSize: 100 })).toMatchObject({
      added: 1,
      duplicates: 1,
    });
    expect(await store.counts(C.id)).toMatchObject({ checking: 1 });
    // Its holder's entry gone (here: its pool purged), the other project can take it.
    await store.purge(A);
    expect(await store.add(C, [proxy(1)], { nowMs: NOW, maxSize: 100 })).toMatchObject({
      added: 1,
      duplicates: 0,
    });
  });

  it("counts what is past max_size and skips what has already expired", async () => {
    const { store } = bed();
    const result = await store.add(
      A,
      [proxy(1), proxy(2), proxy(3, { expiresAtMs: NOW - 1 }), proxy(4)],
      { nowMs: NOW, maxSize: 2 },
    );
    expect(result).toMatchObject({ added: 2, duplicates: 0, overMax: 1 });
  });

  it("keeps credentials sealed and the uniqueness key digested", async () => {
    const { store, keys } = bed();
    const { ids } = await store.add(A, [proxy(7)], { nowMs: NOW, maxSize: 10 });
    const dump = JSON.stringify([
      await redis.hgetall(keys.poolEntries(A.id)),
      await redis.hgetall(keys.poolOwners),
    ]);
    expect(dump).not.toContain("secret-password-7");
    expect(dump).not.toContain("user7");
    const [entry] = await store.entries(A.id, ids);
    expect(store.credentials(entry)).toEqual({ username: "user7", password: "secret-password-7" });
    // Sealed for its own entry: copied onto another it does not open.
    expect(() => sealer.open("another-id", entry.credentials)).toThrow(/do not open/);
  });
});

describe("checks", () => {
  it("routes passed entries up to the reserve, stocks the rest and removes failed ones", async () => {
    const { store, keys } = bed();
    const { ids } = await store.add(A, [1, 2, 3, 4].map((n) => proxy(n)), {
      nowMs: NOW,
      maxSize: 10,
    });
    const result = await store.markChecked(A, [
      { id: ids[0], passed: true },
      { id: ids[1], passed: true },
      { id: ids[2], passed: true },
      { id: ids[3], passed: false },
    ], { nowMs: NOW + 1000, reserve: 2 });
    expect(result).toMatchObject({ routed: 2, stocked: 1, removed: 1, skipped: 0 });
    expect(await store.counts(A.id)).toMatchObject({ checking: 0, routed: 2, stock: 1 });
    // The failed proxy's ownership went with it: the provider may hand it out again.
    expect(await store.add(B, [proxy(4)], { nowMs: NOW, maxSize: 10 })).toMatchObject({
      added: 1,
    });
    const routed = await store.routed(A.id, NOW + 1000);
    expect(routed.map((e) => e.id).sort()).toEqual([ids[0], ids[1]].sort());
    expect(routed.every((e) => e.state === "available" && e.routed && e.checked_at === NOW + 1000))
      .toBe(true);
    // A stale result (the entry left meanwhile) changes nothing.
    expect(
      await store.markChecked(A, [{ id: ids[3], passed: true }], {
        nowMs: NOW + 2000,
        reserve: 2,
      }),
    ).toMatchObject({ skipped: 1, removed: 0, routed: 0 });
    expect(await redis.zscore(keys.poolRouted(A.id), ids[0])).not.toBeNull();
  });

  it("routes everything without a reserve, and drains an entry already past usable-until", async () => {
    const { store } = bed();
    const { ids } = await store.add(A, [proxy(1), proxy(2, { usableUntilMs: NOW + 500 })], {
      nowMs: NOW,
      maxSize: 10,
    });
    const result = await store.markChecked(A, ids.map((id) => ({ id, passed: true })), {
      nowMs: NOW + 1000,
      reserve: null,
    });
    expect(result).toMatchObject({ routed: 1, drained: 1 });
    expect(await store.counts(A.id)).toMatchObject({ routed: 1, draining: 1 });
  });
});

describe("re-checks and suspects", () => {
  /** Two routed entries and one in stock, checked at NOW. */
  async function available(store: RedisPoolStore) {
    const { ids } = await store.add(A, [1, 2, 3].map((n) => proxy(n)), {
      nowMs: NOW,
      maxSize: 10,
    });
    await store.markChecked(A, ids.map((id) => ({ id, passed: true })), {
      nowMs: NOW,
      reserve: 2,
    });
    const routed = (await store.routed(A.id, NOW)).map((e) => e.id);
    const stock = ids.filter((id) => !routed.includes(id));
    expect(routed).toHaveLength(2);
    return { routed, stock: stock[0] };
  }

  it("makes a failed routed or stock entry suspect, restores it on a pass, removes it at the threshold", async () => {
    const { store, keys } = bed();
    const { routed, stock } = await available(store);
    const failed = await store.markChecked(A, [
      { id: routed[0], passed: false },
      { id: stock, passed: false },
      { id: routed[1], passed: true },
    ], { nowMs: NOW + 5000, reserve: 2, removeAfterFailures: 3 });
    expect(failed).toMatchObject({ suspected: 2, rechecked: 1, removed: 0 });
    expect(await store.counts(A.id)).toMatchObject({ routed: 1, stock: 0, suspect: 2 });
    // Neither the feed nor extraction sees a suspect.
    expect((await store.routed(A.id, NOW + 5000)).map((e) => e.id)).toEqual([routed[1]]);
    expect(await redis.zscore(keys.poolStock(A.id), stock)).toBeNull();
    const [suspect] = await store.entries(A.id, [routed[0]]);
    expect(suspect).toMatchObject({ state: "suspect", failures: 1, routed: true });

    // A second failure (of three allowed) keeps it suspect; then a pass puts each back where
    // it was: the routed one in the feed, the stock one in stock.
    expect(
      await store.markChecked(A, [{ id: routed[0], passed: false }], {
        nowMs: NOW + 6000,
        reserve: 2,
        removeAfterFailures: 3,
      }),
    ).toMatchObject({ suspected: 0, removed: 0 });
    expect((await store.entries(A.id, [routed[0]]))[0].failures).toBe(2);
    const back = await store.markChecked(A, [
      { id: routed[0], passed: true },
      { id: stock, passed: true },
    ], { nowMs: NOW + 7000, reserve: 2, removeAfterFailures: 3 });
    expect(back).toMatchObject({ restored: 2, restoredRouted: 1 });
    expect(await store.counts(A.id)).toMatchObject({ routed: 2, stock: 1, suspect: 0 });
    expect((await store.entries(A.id, [routed[0]]))[0]).toMatchObject({
      state: "available",
      failures: 0,
      checked_at: NOW + 7000,
    });

    // The default threshold, two in a row: the second failure removes it, ownership and all.
    const ownerField = (await store.entries(A.id, [routed[0]]))[0].key;
    expect(await redis.hget(keys.poolOwners, ownerField)).toBe(`${A.id}/${routed[0]}`);
    await store.markChecked(A, [{ id: routed[0], passed: false }], {
      nowMs: NOW + 8000,
      reserve: 2,
    });
    expect(
      await store.markChecked(A, [{ id: routed[0], passed: false }], {
        nowMs: NOW + 9000,
        reserve: 2,
      }),
    ).toMatchObject({ removed: 1 });
    expect(await store.entries(A.id, [routed[0]])).toEqual([]);
    expect(await redis.zscore(keys.poolSuspect(A.id), routed[0])).toBeNull();
    expect(await redis.hget(keys.poolOwners, ownerField)).toBeNull();
  });

  it("takes gateways' evidence: available entries named turn suspect, never removed by it alone", async () => {
    const { store, keys } = bed();
    const { routed, stock } = await available(store);
    const [checking] = (await store.add(A, [proxy(9)], { nowMs: NOW, maxSize: 10 })).ids;
    await redis.hset(keys.poolEvidence(A.id), routed[0], "3", checking, "1", "no-such-id", "2");
    const taken = await store.takeEvidence(A, { removeAfterFailures: 2 });
    expect(taken).toEqual({ suspected: 1, suspectedRouted: 1, named: 3 });
    expect(await redis.exists(keys.poolEvidence(A.id))).toBe(0);
    // The checking entry waits for its first check as before.
    expect((await store.entries(A.id, [checking]))[0].state).toBe("checking");
    expect((await store.routed(A.id, NOW)).map((e) => e.id)).toEqual([routed[1]]);

    // More evidence against a suspect, or with a threshold of one, removes nothing.
    await redis.hset(keys.poolEvidence(A.id), routed[0], "5", stock, "1");
    expect(await store.takeEvidence(A, { removeAfterFailures: 1 })).toMatchObject({
      suspected: 1,
      suspectedRouted: 0,
    });
    expect(await store.entries(A.id, [routed[0], stock])).toMatchObject([
      { state: "suspect", failures: 1 },
      { state: "suspect", failures: 0 },
    ]);
    // A failed check then removes the one the gateways named (two in a row by default).
    expect(
      await store.markChecked(A, [{ id: routed[0], passed: false }], {
        nowMs: NOW + 1000,
        reserve: 2,
      }),
    ).toMatchObject({ removed: 1 });
  });

  it("answers due re-checks longest unchecked first and forgets entries no longer available", async () => {
    const { store, keys } = bed();
    const { routed, stock } = await available(store);
    await store.markChecked(A, [{ id: routed[1], passed: true }], {
      nowMs: NOW + 5000,
      reserve: 2,
    });
    expect((await store.dueRechecks(A.id, NOW + 1, 10)).map((e) => e.id).sort()).toEqual(
      [routed[0], stock].sort(),
    );
    expect((await store.dueRechecks(A.id, NOW + 6000, 10)).map((e) => e.id)).toHaveLength(3);
    // A suspect is re-checked from the suspect set, not as a due re-check.
    await store.markChecked(A, [{ id: routed[0], passed: false }], {
      nowMs: NOW + 6000,
      reserve: 2,
    });
    expect((await store.suspects(A.id, 10)).map((e) => e.id)).toEqual([routed[0]]);
    expect((await store.dueRechecks(A.id, NOW + 6000, 10)).map((e) => e.id).sort()).toEqual(
      [routed[1], stock].sort(),
    );
    // An entry that left the available sets behind the index's back is dropped from it.
    await redis.hdel(keys.poolEntries(A.id), stock);
    expect((await store.dueRechecks(A.id, NOW + 6000, 10)).map((e) => e.id)).toEqual([routed[1]]);
    expect(await redis.zscore(keys.poolChecked(A.id), stock)).toBeNull();
  });

  it("drains a suspect past its usable-until", async () => {
    const { store } = bed();
    const { ids } = await store.add(A, [proxy(1, { usableUntilMs: NOW + 10_000 })], {
      nowMs: NOW,
      maxSize: 10,
    });
    await store.markChecked(A, [{ id: ids[0], passed: true }], { nowMs: NOW, reserve: null });
    await store.markChecked(A, [{ id: ids[0], passed: false }], { nowMs: NOW + 1, reserve: null });
    expect((await store.counts(A.id)).suspect).toBe(1);
    const pass = await store.maintain(A, { nowMs: NOW + 10_000, reserve: null });
    expect(pass).toMatchObject({ drained: 1 });
    expect(pass.counts).toMatchObject({ suspect: 0, draining: 1 });
  });
});

describe("maintenance", () => {
  it("drains at usable-until, removes at expiry with the ownership, promotes stock", async () => {
    const { store } = bed();
    const { ids } = await store.add(A, [
      proxy(1, { usableUntilMs: NOW + 10_000, expiresAtMs: NOW + 20_000 }),
      proxy(2, { usableUntilMs: NOW + 50_000, expiresAtMs: NOW + 60_000 }),
      proxy(3, { usableUntilMs: NOW + 40_000, expiresAtMs: NOW + 45_000 }),
    ], { nowMs: NOW, maxSize: 10 });
    await store.markChecked(A, ids.map((id) => ({ id, passed: true })), {
      nowMs: NOW,
      reserve: 1,
    });
    expect(await store.counts(A.id)).toMatchObject({ routed: 1, stock: 2 });
    // Proxy 1 was routed first; past its usable-until it drains and the longest-lived stock
    // (proxy 2) is promoted in its place.
    const pass = await store.maintain(A, { nowMs: NOW + 15_000, reserve: 1 });
    expect(pass).toMatchObject({ expired: 0, drained: 1, promoted: 1 });
    expect(pass.counts).toMatchObject({ routed: 1, stock: 1, draining: 1 });
    expect((await store.routed(A.id, NOW + 15_000)).map((e) => e.id)).toEqual([ids[1]]);
    // Draining, proxy 1 is still owned: handed out again, it is a duplicate.
    expect(await store.add(B, [proxy(1)], { nowMs: NOW + 15_000, maxSize: 10 })).toMatchObject({
      duplicates: 1,
    });
    // At its expiry it leaves, and its ownership with it.
    const later = await store.maintain(A, { nowMs: NOW + 20_000, reserve: 1 });
    expect(later).toMatchObject({ expired: 1 });
    expect(later.counts.draining).toBe(0);
    expect(
      await store.add(B, [proxy(1, { expiresAtMs: NOW + 90_000, usableUntilMs: NOW + 80_000 })], {
        nowMs: NOW + 20_000,
        maxSize: 10,
      }),
    ).toMatchObject({ added: 1 });
  });

  it("never moves a routed entry back to stock when the reserve shrinks", async () => {
    const { store } = bed();
    const { ids } = await store.add(A, [proxy(1), proxy(2)], { nowMs: NOW, maxSize: 10 });
    await store.markChecked(A, ids.map((id) => ({ id, passed: true })), {
      nowMs: NOW,
      reserve: null,
    });
    const pass = await store.maintain(A, { nowMs: NOW + 1, reserve: 0 });
    expect(pass.counts).toMatchObject({ routed: 2, stock: 0 });
  });

  it("bounds the removals of one pass and says more remain", async () => {
    const { store } = bed();
    await store.add(A, [1, 2, 3].map((n) => proxy(n, { expiresAtMs: NOW + 10 })), {
      nowMs: NOW,
      maxSize: 10,
    });
    const pass = await store.maintain(A, { nowMs: NOW + 20, reserve: null, maxRemovals: 2 });
    expect(pass).toMatchObject({ expired: 2, more: true });
    expect(await store.maintain(A, { nowMs: NOW + 20, reserve: null, maxRemovals: 2 }))
      .toMatchObject({ expired: 1, more: false });
  });

  it("purges a connector's pool and gives up its ownership", async () => {
    const { store, keys } = bed();
    await store.add(A, [proxy(1), proxy(2)], { nowMs: NOW, maxSize: 10 });
    await store.add(B, [proxy(3)], { nowMs: NOW, maxSize: 10 });
    expect(await store.purge(A)).toBe(2);
    expect(await redis.exists(keys.poolEntries(A.id), keys.poolChecking(A.id))).toBe(0);
    expect(await redis.hlen(keys.poolOwners)).toBe(1);
    expect(await store.add(B, [proxy(1)], { nowMs: NOW, maxSize: 10 })).toMatchObject({
      added: 1,
    });
  });
});
