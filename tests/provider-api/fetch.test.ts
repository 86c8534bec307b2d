/**
 * The provider fetch path over a real Redis and the provider emulator over TLS (its CA trusted,
 * loopback admitted, as the tests' settings do), into the real activity pool:
 *
 * - each classification of seed 001 section 8.1 drives the counts, the streaks and the
 *   back-off it should (Success, Empty up to depletion, Duplicate-only, new proxies past
 *   max_size, 500, 429 with Retry-After, unreadable and late answers), and the ledger counts
 *   what answers hold, an oversupply included (it overshoots max_total once, then stops);
 * - the lead: one holder at a time, epochs that only grow, settlement that is idempotent and
 *   still works after the lead changed, permits of a worker that died lapsing into the ledger;
 * - two workers (two Redis connections) on one connector never exceed max_in_flight or
 *   max_total, and keep request_interval across both (the emulator's counters, held calls);
 * - a Redis wipe starts a new generation: the old lead's fenced steps are refused and its
 *   signal aborted, and a new lead fetches again; a Redis that stops aborts the lead (fail
 *   closed), and no lead is taken while it is away;
 * - the metrics families (promtool-clean, labelled by connector only) and the logs (no key,
 *   no query, no proxy credential).
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { Registry } from "prom-client";
import * as v from "valibot";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createLogger, type Logger } from "../../control/core/logging.ts";
import { createRedis } from "../../control/core/redis.ts";
import { liveCount } from "../../control/provider-api/pool/contract.ts";
import { CredentialSealer } from "../../control/provider-api/pool/credentials.ts";
import { RedisPoolStore } from "../../control/provider-api/pool/store.ts";
import { FetchKind } from "../../control/provider-api/answer.ts";
import {
  type ProviderApiConfig,
  ProviderApiConfigSchema,
} from "../../control/provider-api/config.ts";
import type { FetchLead, ProviderApiConnector } from "../../control/provider-api/fetch-contract.ts";
import {
  BACKOFF_MAX_MS,
  callBounds,
  FetchCoordinator,
  type FetchCoordinatorOptions,
} from "../../control/provider-api/fetch/coordinator.ts";
import { FetchMetrics } from "../../control/provider-api/fetch/metrics.ts";
import { FetchTelemetry } from "../../control/node/telemetry/fetches.ts";
import { ProviderRefiller } from "../../control/provider-api/fetch/refill.ts";
import type { Scrape } from "../../control/node/telemetry/family.ts";
import { PoolTelemetry } from "../../control/node/telemetry/pools.ts";
import { type RedisKeys, redisKeys } from "../../shared/redis-keys.ts";
import { LocalRedis } from "../../scripts/local-stores.ts";
import { freePort } from "../../testkit/ports.ts";
import {
  PROVIDER_EMULATOR_JSON,
  type ProviderEmulator,
  type ProviderEmulatorOptions,
  type ProviderExit,
  startProviderEmulator,
} from "../../testkit/upstreams/provider-emulator.ts";
import { captureLines } from "../../testkit/api-harness.ts";
import { parseSamples, promtoolCheck, requirePromtool } from "../../testkit/promtool.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { waitUntil } from "../../testkit/wait.ts";

const API_KEY = "pk-fetch-5c8e21";
const SEALER = new CredentialSealer("fetch-test-secret".repeat(3));
/** 1,000 exits, each with its own credentials (what must never reach a log). */
const EXITS: ProviderExit[] = Array.from({ length: 1000 }, (_, i) => ({
  host: `198.51.${100 + Math.floor(i / 250)}.${(i % 250) + 1}`,
  port: 9000 + (i % 7),
  username: `exit-user-${i}`,
  password: `exit-secret-${i}`,
  country: i % 2 === 0 ? "DE" : "US",
}));

const { lines, destination } = captureLines();
const logger = createLogger({ level: "debug", instance: "test", role: "worker", destination });

let redis: Redis;
const prefixes: string[] = [];
const emulators: ProviderEmulator[] = [];
const leads: FetchLead[] = [];
const never = new AbortController().signal;

beforeAll(() => {
  requirePromtool();
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterEach(async () => {
  await Promise.all(leads.splice(0).map((lead) => lead.release()));
  await Promise.all(emulators.splice(0).map((emulator) => emulator.close()));
});

afterAll(async () => {
  for (const prefix of prefixes) await deletePrefix(TEST_REDIS_URL, prefix);
  redis?.disconnect();
});

async function emulator(options: ProviderEmulatorOptions = {}): Promise<ProviderEmulator> {
  const started = await startProviderEmulator({
    tls: true,
    apiKey: API_KEY,
    exits: EXITS,
    perCall: 10,
    ...options,
  });
  emulators.push(started);
  return started;
}

/** Redis's clock, as the scripts read it. */
async function redisNow(client: Redis = redis): Promise<number> {
  const [seconds, micros] = await client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

interface ConfigOptions {
  fetch?: Record<string, unknown>;
  parser?: Record<string, unknown>;
  pool?: Record<string, unknown>;
}

function connectorConfig(
  provider: ProviderEmulator,
  options: ConfigOptions = {},
): ProviderApiConfig {
  return v.parse(ProviderApiConfigSchema, {
    fetch: {
      url: provider.fetchUrl,
      params: { count: "{count}" },
      auth: { type: "bearer", token: "{credential.api_key}" },
      request_interval_ms: 0,
      ...options.fetch,
    },
    parser: { format: "json", ...PROVIDER_EMULATOR_JSON, ...options.parser },
    pool: options.pool ?? {},
  });
}

function connector(provider: ProviderEmulator, options: ConfigOptions = {}): ProviderApiConnector {
  return {
    id: randomUUID(),
    projectId: "project-fetch",
    config: connectorConfig(provider, options),
    credential: { api_key: API_KEY },
  };
}

interface Bed {
  keys: RedisKeys;
  redis: Redis;
  coordinator: FetchCoordinator;
  pool: RedisPoolStore;
  refiller: ProviderRefiller;
  metrics: FetchMetrics;
  /** Takes the connector's lead (released after the test). */
  lead(connectorId: string): Promise<FetchLead>;
}

function bed(
  provider: ProviderEmulator,
  options: {
    prefix?: string;
    client?: Redis;
    coordinator?: Partial<FetchCoordinatorOptions>;
    logger?: Logger;
  } = {},
): Bed {
  const prefix = options.prefix ?? testPrefix();
  if (!prefixes.includes(prefix)) prefixes.push(prefix);
  const keys = redisKeys(prefix);
  const client = options.client ?? redis;
  const log = options.logger ?? logger;
  const coordinator = new FetchCoordinator({
    redis: client,
    keys,
    logger: log,
    permitMarginMs: 500,
    ...options.coordinator,
  });
  const pool = new RedisPoolStore({ redis: client, keys, sealer: SEALER });
  const metrics = new FetchMetrics();
  const refiller = new ProviderRefiller({
    coordinator,
    pool,
    logger: log,
    metrics,
    egress: { allowLoopback: true, ca: provider.ca },
  });
  return {
    keys,
    redis: client,
    coordinator,
    pool,
    refiller,
    metrics,
    async lead(connectorId) {
      const lead = await coordinator.lead(connectorId, never);
      if (lead === undefined) throw new Error("No lead");
      leads.push(lead);
      return lead;
    },
  };
}

describe("section 8.1: each classification drives its counts and back-off", () => {
  it("a Success adds new proxies as checking, resets the streaks and settles the ledger", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider);
    const lead = await b.lead(c.id);
    const result = await b.refiller.refill(c, 20, lead, never);
    expect(result).toEqual({
      calls: 2,
      byKind: { success: 2, empty: 0, duplicate_only: 0, error: 0 },
      added: 20,
      depleted: false,
    });
    expect(await b.refiller.stats(c.id)).toMatchObject({
      generation: lead.generation,
      success: 2,
      empty: 0,
      duplicateOnly: 0,
      error: 0,
      emptyStreak: 0,
      errorStreak: 0,
      backoffUntilMs: 0,
      ledgerUsed: 20,
      ledgerPending: 0,
      inFlight: 0,
    });
    expect(await b.pool.counts(c.id)).toMatchObject({ checking: 20, routed: 0, stock: 0 });
    expect(provider.served).toBe(20);
    // Each call asked for its count and sent the credential's key.
    expect(provider.requests.map((r) => new URL(r.url, "https://p").searchParams.get("count")))
      .toEqual(["10", "10"]);
    expect(provider.answered.unauthorized).toBe(0);
    const counts = b.metrics.snapshot().connectors[c.id];
    expect(counts.fetches).toEqual({ success: 2, empty: 0, duplicate_only: 0, error: 0 });
    expect(counts).toMatchObject({ proxies_added: 20, duplicates: 0, backoffs: 0 });
    expect(counts.duration.count).toBe(2);
  });

  it("an Empty adds to the empty streak, without a back-off, up to depletion", async () => {
    const provider = await emulator();
    provider.setMode({ kind: "empty" });
    const b = bed(provider);
    const c = connector(provider, { pool: { depleted_after_empty: 3 } });
    const lead = await b.lead(c.id);
    const result = await b.refiller.refill(c, 50, lead, never);
    expect(result).toMatchObject({
      calls: 3,
      byKind: { success: 0, empty: 3, duplicate_only: 0, error: 0 },
      added: 0,
      depleted: true,
    });
    expect(provider.calls).toBe(3);
    expect(await b.refiller.stats(c.id)).toMatchObject({
      empty: 3,
      emptyStreak: 3,
      error: 0,
      errorStreak: 0,
      backoffUntilMs: 0,
      ledgerUsed: 0,
      ledgerPending: 0,
    });
  });

  it("a Duplicate-only resets the empty streak and adds nothing; new proxies past max_size are a Success", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider, { pool: { target_size: 10, max_size: 10 } });
    const lead = await b.lead(c.id);
    expect((await b.refiller.refill(c, 10, lead, never)).byKind.success).toBe(1);
    provider.setMode({ kind: "empty" });
    expect((await b.refiller.refill(c, 10, lead, never)).byKind.empty).toBe(1);
    expect((await b.refiller.stats(c.id)).emptyStreak).toBe(1);

    provider.setMode({ kind: "duplicates" });
    const duplicate = await b.refiller.refill(c, 10, lead, never);
    expect(duplicate).toMatchObject({ calls: 1, added: 0 });
    expect(duplicate.byKind.duplicate_only).toBe(1);
    expect(await b.refiller.stats(c.id)).toMatchObject({
      success: 1,
      empty: 1,
      duplicateOnly: 1,
      emptyStreak: 0,
      backoffUntilMs: 0,
      ledgerUsed: 20,
    });
    expect(liveCount(await b.pool.counts(c.id))).toBe(10);
    expect(b.metrics.snapshot().connectors[c.id].duplicates).toBe(10);

    // The pool is full: ten proxies no upstream holds are new all the same (a Success).
    provider.setMode({ kind: "normal" });
    const full = await b.refiller.refill(c, 10, lead, never);
    expect(full).toMatchObject({ calls: 1, added: 0 });
    expect(full.byKind.success).toBe(1);
    expect(liveCount(await b.pool.counts(c.id))).toBe(10);
    expect(await b.refiller.stats(c.id)).toMatchObject({ success: 2, duplicateOnly: 1 });
  });

  it("an Error (500) backs off from 1 s, keeps the empty streak, and a later fetch ends it", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider);
    const lead = await b.lead(c.id);
    provider.setMode({ kind: "empty" });
    await b.refiller.refill(c, 10, lead, never);

    provider.setMode({ kind: "error", status: 500 });
    const before = await redisNow();
    const failed = await b.refiller.refill(c, 10, lead, never);
    const after = await redisNow();
    expect(failed).toMatchObject({ calls: 1, added: 0 });
    expect(failed.byKind.error).toBe(1);
    const stats = await b.refiller.stats(c.id);
    expect(stats).toMatchObject({
      error: 1,
      errorStreak: 1,
      rateLimited: 0,
      empty: 1,
      emptyStreak: 1,
      // The provider answered an error: it handed nothing out.
      ledgerUsed: 0,
      ledgerPending: 0,
    });
    expect(stats.backoffUntilMs).toBeGreaterThanOrEqual(before + 1000);
    expect(stats.backoffUntilMs).toBeLessThanOrEqual(after + 1000);

    // While backing off, no call is made at all.
    const calls = provider.calls;
    const backedOff = await b.refiller.refill(c, 10, lead, never);
    expect(backedOff).toMatchObject({ calls: 0, stoppedBy: "backoff" });
    expect(provider.calls).toBe(calls);

    await waitUntil(async () => (await redisNow()) >= stats.backoffUntilMs, {
      message: "the back-off to end",
    });
    provider.setMode({ kind: "normal" });
    const recovered = await b.refiller.refill(c, 10, lead, never);
    expect(recovered.byKind.success).toBe(1);
    expect(await b.refiller.stats(c.id)).toMatchObject({
      error: 1,
      errorStreak: 0,
      backoffUntilMs: 0,
      emptyStreak: 0,
    });
    expect(b.metrics.snapshot().connectors[c.id]).toMatchObject({ backoffs: 1, rate_limited: 0 });
  });

  it("a 429 counts as rate limited and backs off for its Retry-After when longer", async () => {
    const provider = await emulator();
    provider.setMode({ kind: "rate_limited", retryAfterSeconds: 30 });
    const b = bed(provider);
    const c = connector(provider);
    const lead = await b.lead(c.id);
    const before = await redisNow();
    const result = await b.refiller.refill(c, 30, lead, never);
    const after = await redisNow();
    // The first call's Error backs off: the other planned calls are not made.
    expect(result).toMatchObject({ calls: 1, stoppedBy: "backoff" });
    expect(provider.calls).toBe(1);
    const stats = await b.refiller.stats(c.id);
    expect(stats).toMatchObject({ error: 1, rateLimited: 1, errorStreak: 1, ledgerUsed: 0 });
    expect(stats.backoffUntilMs).toBeGreaterThanOrEqual(before + 30_000);
    expect(stats.backoffUntilMs).toBeLessThanOrEqual(after + 30_000);
    expect(b.metrics.snapshot().connectors[c.id]).toMatchObject({
      fetches: { error: 1 },
      rate_limited: 1,
      backoffs: 1,
    });
  });

  it("back-off doubles with each Error in a row up to 5 min, and any other fetch ends it", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider);
    const lead = await b.lead(c.id);
    const record = { actual: 0, kind: FetchKind.error, depletedAfterEmpty: 3 };
    for (let errors = 1; errors <= 11; errors++) {
      const before = await redisNow();
      const settlement = await b.coordinator.record(c.id, lead.generation, record);
      const after = await redisNow();
      const expected = Math.min(1000 * 2 ** (errors - 1), BACKOFF_MAX_MS);
      expect(settlement.errorStreak).toBe(errors);
      expect(settlement.backoffUntilMs, `error ${errors}`).toBeGreaterThanOrEqual(
        before + expected,
      );
      expect(settlement.backoffUntilMs, `error ${errors}`).toBeLessThanOrEqual(after + expected);
    }
    // A shorter Retry-After does not shorten it; a longer one (capped at an hour) lengthens it.
    const capped = await b.coordinator.record(c.id, lead.generation, {
      ...record,
      rateLimited: true,
      retryAfterMs: 10 * 3_600_000,
    });
    expect(capped.backoffUntilMs - (await redisNow())).toBeGreaterThan(3_590_000);
    const reset = await b.coordinator.record(c.id, lead.generation, {
      ...record,
      kind: FetchKind.duplicateOnly,
    });
    expect(reset).toMatchObject({ outcome: "none", errorStreak: 0, backoffUntilMs: 0 });
    expect(await b.coordinator.stats(c.id)).toMatchObject({
      error: 12,
      rateLimited: 1,
      duplicateOnly: 1,
      backoffUntilMs: 0,
    });
  });

  it("an unreadable or late answer is an Error counted in the ledger at its reservation", async () => {
    const provider = await emulator();
    const b = bed(provider);
    // The provider answers text; the connector reads JSON.
    provider.configure({ format: "text" });
    const unreadable = connector(provider);
    const leadA = await b.lead(unreadable.id);
    const first = await b.refiller.refill(unreadable, 10, leadA, never);
    expect(first.byKind.error).toBe(1);
    expect(await b.refiller.stats(unreadable.id)).toMatchObject({
      error: 1,
      ledgerUsed: 10,
      ledgerPending: 0,
    });
    expect(await b.pool.counts(unreadable.id)).toMatchObject({ checking: 0 });

    provider.configure({ format: "json" });
    provider.setMode({ kind: "slow", delayMs: 5_000 });
    const late = connector(provider, { fetch: { timeout_ms: 300 } });
    const leadB = await b.lead(late.id);
    const second = await b.refiller.refill(late, 10, leadB, never);
    expect(second.byKind.error).toBe(1);
    expect(await b.refiller.stats(late.id)).toMatchObject({ error: 1, ledgerUsed: 10 });
  });

  it("an answer beyond the estimate counts whole in the ledger, which then stops (overshooting once)", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider, { fetch: { max_total: 25 } });
    const lead = await b.lead(c.id);
    provider.queue({ kind: "oversupply", count: 30 });
    const result = await b.refiller.refill(c, 100, lead, never);
    expect(result).toMatchObject({ calls: 1, added: 30, stoppedBy: "ledger" });
    expect(provider.served).toBe(30);
    expect(await b.refiller.stats(c.id)).toMatchObject({ ledgerUsed: 30, ledgerPending: 0 });
    expect(await b.refiller.refill(c, 10, lead, never)).toMatchObject({
      calls: 0,
      stoppedBy: "ledger",
    });
    expect(provider.calls).toBe(1);

    // Within the ledger a call asks for what is left: a provider that honours {count} stops
    // exactly at max_total.
    const exact = connector(provider, { fetch: { max_total: 30 } });
    const leadExact = await b.lead(exact.id);
    provider.resetCounts();
    provider.queue({ kind: "oversupply", count: 15 });
    const capped = await b.refiller.refill(exact, 100, leadExact, never);
    expect(capped).toMatchObject({ calls: 3, added: 30, stoppedBy: "ledger" });
    expect(
      provider.requests.slice(-3).map((r) => new URL(r.url, "https://p").searchParams.get("count")),
    )
      .toEqual(["10", "10", "5"]);
    expect(provider.served).toBe(30);
    expect(await b.refiller.stats(exact.id)).toMatchObject({ ledgerUsed: 30, ledgerPending: 0 });
  });
});

describe("the lead and the call bookkeeping", () => {
  it("one lead at a time; each lead taken gets a larger epoch", async () => {
    const provider = await emulator();
    const prefix = testPrefix();
    const other = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      const a = bed(provider, { prefix, coordinator: { holder: "worker-a" } });
      const b = bed(provider, { prefix, client: other, coordinator: { holder: "worker-b" } });
      const id = randomUUID();
      const [first, second] = await Promise.all([
        a.coordinator.lead(id, never),
        b.coordinator.lead(id, never),
      ]);
      const taken = [first, second].filter((lead) => lead !== undefined);
      expect(taken).toHaveLength(1);
      const held = taken[0] as FetchLead;
      expect(held.epoch).toBe(1);
      await held.release();
      expect(held.signal.aborted).toBe(true);
      const next = await b.lead(id);
      expect(next.epoch).toBe(2);
      expect(next.generation).toBe(held.generation);
      expect(await a.coordinator.lead(id, never)).toBeUndefined();
      // An aborted caller's signal gives the lead up.
      await next.release();
      const controller = new AbortController();
      const third = await a.coordinator.lead(id, controller.signal);
      expect(third?.epoch).toBe(3);
      controller.abort();
      await waitUntil(async () => (await other.exists(a.keys.poolLeader(id))) === 0, {
        message: "the lead to be released",
      });
      expect(third?.signal.aborted).toBe(true);
    } finally {
      other.disconnect();
    }
  });

  it("a permit settles once, also after the lead changed; a dead worker's permit lapses into the ledger", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider, { fetch: { timeout_ms: 200, max_in_flight: 4 } });
    const bounds = callBounds(c.config.fetch);
    const first = await b.lead(c.id);
    const reserved = await b.coordinator.reserve(first, bounds);
    const lapsing = await b.coordinator.reserve(first, bounds);
    if (!reserved.ok || !lapsing.ok) throw new Error("not reserved");
    expect(await b.coordinator.stats(c.id)).toMatchObject({ ledgerPending: 20, inFlight: 2 });

    await first.release();
    const second = await b.lead(c.id);
    expect(second.epoch).toBe(first.epoch + 1);
    // The old lead's steps are refused; its permit still settles, once.
    expect(await b.coordinator.reserve(first, bounds)).toEqual({ ok: false, reason: "not_leader" });
    const record = { actual: 7, kind: FetchKind.success, depletedAfterEmpty: 3 };
    expect((await b.coordinator.settle(reserved.permit, record)).outcome).toBe("settled");
    expect((await b.coordinator.settle(reserved.permit, record)).outcome).toBe("none");
    expect(await b.coordinator.stats(c.id)).toMatchObject({
      success: 1,
      ledgerUsed: 7,
      ledgerPending: 10,
    });

    // The other permit's worker died: past its timeout and margin it lapses, counted whole.
    await waitUntil(async () => (await b.coordinator.stats(c.id)).inFlight === 0, {
      message: "the permit to lapse",
    });
    const after = await b.coordinator.reserve(second, bounds);
    expect(after.ok).toBe(true);
    expect(await b.coordinator.stats(c.id)).toMatchObject({
      ledgerUsed: 17,
      ledgerPending: 10,
      inFlight: 1,
    });
    expect((await b.coordinator.settle(lapsing.permit, record)).outcome).toBe("none");
    expect(await b.coordinator.stats(c.id)).toMatchObject({ ledgerUsed: 17, success: 1 });
  });

  it("max_in_flight bounds a refiller's calls, the rest made as permits free up", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider, { fetch: { max_in_flight: 2 } });
    const lead = await b.lead(c.id);
    const release = provider.hold();
    const refill = b.refiller.refill(c, 60, lead, never);
    await provider.whenInFlight(2);
    expect(await b.coordinator.reserve(lead, callBounds(c.config.fetch))).toMatchObject({
      ok: false,
      reason: "in_flight",
    });
    expect(await b.coordinator.stats(c.id)).toMatchObject({ inFlight: 2, ledgerPending: 20 });
    release();
    const result = await refill;
    expect(result).toMatchObject({ calls: 6, added: 60 });
    expect(provider.maxInFlight).toBe(2);
    expect(provider.served).toBe(60);
  });

  it("a refill stops rather than wait out a long interval, or permits held past its wait", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const paced = connector(provider, { fetch: { request_interval_ms: 3_600_000 } });
    const lead = await b.lead(paced.id);
    expect(await b.refiller.refill(paced, 30, lead, never)).toMatchObject({
      calls: 1,
      added: 10,
      stoppedBy: "interval",
    });
    expect(provider.calls).toBe(1);

    // Another call holds the one permit and never settles (its worker is stuck).
    const held = connector(provider, { fetch: { timeout_ms: 60_000 } });
    const heldLead = await b.lead(held.id);
    const stuck = await b.coordinator.reserve(heldLead, callBounds(held.config.fetch));
    expect(stuck.ok).toBe(true);
    const impatient = new ProviderRefiller({
      coordinator: b.coordinator,
      pool: b.pool,
      logger,
      egress: { allowLoopback: true, ca: provider.ca },
      maxWaitMs: 300,
    });
    expect(await impatient.refill(held, 10, heldLead, never)).toMatchObject({
      calls: 0,
      stoppedBy: "in_flight",
    });
    expect(provider.calls).toBe(1);
  });

  it("two workers on one connector keep max_in_flight, max_total and request_interval across both", async () => {
    const provider = await emulator();
    const prefix = testPrefix();
    const other = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    try {
      // Worker A stalls: it never renews in time, so its lead lapses while its calls are in
      // flight and worker B takes over. Only Redis keeps the two apart.
      const a = bed(provider, {
        prefix,
        logger: logger.child({ worker: "a" }),
        coordinator: { holder: "worker-a", leadTtlMs: 1500, renewEveryMs: 60_000 },
      });
      const b = bed(provider, {
        prefix,
        client: other,
        logger: logger.child({ worker: "b" }),
        coordinator: { holder: "worker-b", leadTtlMs: 5000 },
      });
      const c = connector(provider, {
        fetch: { max_in_flight: 2, max_total: 50, request_interval_ms: 200 },
      });
      const leadA = await a.lead(c.id);
      expect(await b.coordinator.lead(c.id, never)).toBeUndefined();

      const release = provider.hold();
      const refillA = a.refiller.refill(c, 100, leadA, never);
      await provider.whenInFlight(2);
      const leadB = await waitUntil(() => b.coordinator.lead(c.id, never), {
        message: "worker B to take the lapsed lead",
      });
      leads.push(leadB);
      expect(leadB.epoch).toBe(leadA.epoch + 1);
      const refillB = b.refiller.refill(c, 100, leadB, never);
      await waitUntil(
        () =>
          lines.some((line) =>
            line.worker === "b" && line.msg === "Provider fetch waiting" &&
            line.reason === "in_flight"
          ),
        { message: "worker B to wait for worker A's permits" },
      );
      expect(provider.calls).toBe(2);
      expect(provider.inFlight).toBe(2);
      release();
      const [resultA, resultB] = await Promise.all([refillA, refillB]);

      expect(resultA).toMatchObject({ calls: 2, added: 20, stoppedBy: "not_leader" });
      expect(resultB).toMatchObject({ calls: 3, added: 30, stoppedBy: "ledger" });
      expect(provider.maxInFlight).toBe(2);
      expect(provider.served).toBe(50);
      expect(await b.coordinator.stats(c.id)).toMatchObject({
        success: 5,
        ledgerUsed: 50,
        ledgerPending: 0,
        inFlight: 0,
      });
      expect(liveCount(await b.pool.counts(c.id))).toBe(50);
      const starts = lines
        .filter((line) => line.msg === "Provider fetch" && line.connector === c.id)
        .map((line) => Number(line.reserved_at_ms))
        .sort((x, y) => x - y);
      expect(starts).toHaveLength(5);
      for (let i = 1; i < starts.length; i++) {
        expect(starts[i] - starts[i - 1], `start ${i}`).toBeGreaterThanOrEqual(200);
      }
    } finally {
      other.disconnect();
    }
  });
  it("a lost lead cancels its calls in flight: settled at their reservation, nothing recorded or added", async () => {
    const provider = await emulator();
    const b = bed(provider, { coordinator: { leadTtlMs: 5000, renewEveryMs: 100 } });
    const c = connector(provider, { fetch: { max_in_flight: 2 } });
    const lead = await b.lead(c.id);
    const release = provider.hold();
    const refill = b.refiller.refill(c, 50, lead, never);
    await provider.whenInFlight(2);
    // The key lapses (as under a long stall): the next renewal finds it gone.
    await redis.del(b.keys.poolLeader(c.id));
    const result = await refill;
    expect(result).toMatchObject({ calls: 2, added: 0, stoppedBy: "not_leader" });
    expect(result.byKind).toEqual({ success: 0, empty: 0, duplicate_only: 0, error: 0 });
    expect(String(lead.signal.reason)).toMatch(/the lead key is gone/);
    await waitUntil(() => provider.inFlight === 0, { message: "the cancelled calls to close" });
    release();
    expect(provider.served).toBe(0);
    expect(await b.coordinator.stats(c.id)).toMatchObject({
      success: 0,
      error: 0,
      backoffUntilMs: 0,
      ledgerUsed: 20,
      ledgerPending: 0,
      inFlight: 0,
    });
    expect(liveCount(await b.pool.counts(c.id))).toBe(0);
  });
});

describe("losing Redis", () => {
  it("a wipe starts a new generation: the old lead is refused and aborted, a new lead fetches", async () => {
    const provider = await emulator();
    const prefix = testPrefix();
    // One lead renews slowly (its fenced steps meet Redis first), the other often.
    const slow = bed(provider, { prefix, coordinator: { renewEveryMs: 60_000 } });
    const fast = bed(provider, { prefix, coordinator: { leadTtlMs: 3000, renewEveryMs: 100 } });
    const c = connector(provider);
    const watched = connector(provider);
    const lead = await slow.lead(c.id);
    const watchedLead = await fast.lead(watched.id);
    expect((await slow.refiller.refill(c, 10, lead, never)).byKind.success).toBe(1);
    const before = await slow.coordinator.reserve(lead, callBounds(c.config.fetch));
    if (!before.ok) throw new Error("not reserved");

    await deletePrefix(TEST_REDIS_URL, prefix);

    expect(lead.signal.aborted).toBe(false);
    expect(await slow.coordinator.reserve(lead, callBounds(c.config.fetch))).toEqual({
      ok: false,
      reason: "not_leader",
    });
    const calls = provider.calls;
    expect(await slow.refiller.refill(c, 10, lead, never)).toMatchObject({
      calls: 0,
      stoppedBy: "not_leader",
    });
    expect(provider.calls).toBe(calls);
    const stale = await slow.coordinator.settle(before.permit, {
      actual: 10,
      kind: FetchKind.success,
      depletedAfterEmpty: 3,
    });
    expect(stale.outcome).toBe("stale");

    await waitUntil(() => watchedLead.signal.aborted, { message: "the watched lead to abort" });
    expect(String(watchedLead.signal.reason)).toMatch(/generation changed|lead key is gone/);

    await lead.release();
    const next = await slow.lead(c.id);
    expect(next.generation).not.toBe(lead.generation);
    expect(next.epoch).toBe(1);
    const refilled = await slow.refiller.refill(c, 10, next, never);
    expect(refilled).toMatchObject({ calls: 1, added: 10 });
    expect(await slow.refiller.stats(c.id)).toMatchObject({
      generation: next.generation,
      success: 1,
      ledgerUsed: 10,
    });
    expect(await slow.pool.counts(c.id)).toMatchObject({ checking: 10 });
  });

  it("a renewal that cannot reach Redis aborts the lead at once, and no lead is taken meanwhile", async () => {
    const provider = await emulator();
    const folder = await mkdtemp(join(tmpdir(), "octoprox-fetch-"));
    const server = new LocalRedis({ dir: folder, port: await freePort() });
    await server.start();
    const client = createRedis(server.url);
    try {
      await waitUntil(async () => (await client.ping()) === "PONG", {
        message: "the private Redis",
      });
      const b = bed(provider, {
        client,
        coordinator: { leadTtlMs: 5000, renewEveryMs: 100, replyTimeoutMs: 500 },
      });
      const c = connector(provider);
      const lead = await b.lead(c.id);
      expect((await b.refiller.refill(c, 10, lead, never)).byKind.success).toBe(1);

      await server.stop({ kill: true });
      await waitUntil(() => lead.signal.aborted, { message: "the lead to abort" });
      expect(String(lead.signal.reason)).toMatch(/did not reach Redis/);
      const calls = provider.calls;
      expect(await b.refiller.refill(c, 10, lead, never)).toMatchObject({
        calls: 0,
        stoppedBy: "not_leader",
      });
      expect(provider.calls).toBe(calls);
      expect(await b.coordinator.lead(c.id, never)).toBeUndefined();

      // Back, empty: a new generation, and fetching again.
      await server.start();
      const next = await waitUntil(() => b.coordinator.lead(c.id, never), {
        message: "a lead once Redis is back",
      });
      leads.push(next);
      expect(next.generation).not.toBe(lead.generation);
      expect((await b.refiller.refill(c, 10, next, never)).byKind.success).toBe(1);
    } finally {
      client.disconnect();
      await server.stop({ kill: true });
      await rm(folder, { recursive: true, force: true });
    }
  });
});

describe("metrics and logs", () => {
  it("renders the worker's families promtool-clean, labelled by connector only", async () => {
    const provider = await emulator();
    const b = bed(provider);
    const c = connector(provider);
    const lead = await b.lead(c.id);
    await b.refiller.refill(c, 20, lead, never);
    provider.setMode({ kind: "rate_limited", retryAfterSeconds: 1 });
    await b.refiller.refill(c, 10, lead, never);

    const registry = new Registry();
    registry.setDefaultLabels({ role: "worker" });
    const scrape: Scrape = { snapshot: undefined as never, nowMs: Date.now() };
    new FetchTelemetry(registry, () => scrape, () => b.metrics.snapshot());
    const text = await registry.metrics();
    const check = await promtoolCheck(text);
    expect(check.output).toBe("");
    expect(check.code).toBe(0);
    const samples = parseSamples(text);
    const value = (name: string, labels: Record<string, string>) =>
      samples.find((s) =>
        s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)
      )?.value;
    const ofConnector = { connector: c.id };
    expect(value("octoprox_provider_fetch_backoffs_total", ofConnector)).toBe(1);
    expect(value("octoprox_provider_fetch_proxies_added_total", ofConnector)).toBe(20);
    expect(value("octoprox_provider_fetch_duplicates_total", ofConnector)).toBe(0);
    expect(value("octoprox_provider_fetch_duration_seconds_count", ofConnector)).toBe(3);
    expect(value("octoprox_provider_fetch_duration_seconds_bucket", { ...ofConnector, le: "+Inf" }))
      .toBe(3);
    for (const sample of samples) {
      expect(Object.keys(sample.labels).sort()).toEqual(
        expect.arrayContaining(["connector", "role"]),
      );
      for (const label of Object.keys(sample.labels)) {
        expect(["connector", "le", "role"]).toContain(label);
      }
    }
    expect(text).not.toContain("127.0.0.1");
    expect(text).not.toContain(API_KEY);
    // A process of role all registers the controller's pool families beside these: no clash.
    const both = new Registry();
    new PoolTelemetry(both, () => scrape);
    expect(() => new FetchTelemetry(both, () => scrape, () => b.metrics.snapshot())).not
      .toThrow();
  });

  it("one line a fetch, one warning an Error; no line holds the key, a query or a proxy's login", async () => {
    const provider = await emulator();
    const b = bed(provider, { logger: logger.child({ test: "logs" }) });
    // The key travels in the query here: it must not reach a line either.
    const c = connector(provider, {
      fetch: { auth: { type: "api_key", value: "{credential.api_key}", query: "api_key" } },
    });
    const lead = await b.lead(c.id);
    await b.refiller.refill(c, 20, lead, never);
    provider.setMode({ kind: "error", status: 500 });
    await b.refiller.refill(c, 10, lead, never);
    const mine = lines.filter((line) => line.test === "logs");
    const fetches = mine.filter((line) => line.msg === "Provider fetch");
    expect(fetches.map((line) => [line.level, line.kind])).toEqual([
      ["debug", "success"],
      ["debug", "success"],
      ["debug", "error"],
    ]);
    const warnings = mine.filter((line) => line.msg === "Provider fetch failed; backing off");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: "warn", connector: c.id, status: 500 });
    expect(warnings[0].error).toBe(`${new URL(provider.fetchUrl).host}/proxies answered 500`);
    // Every line of this file's tests, failures and all.
    const text = lines.map((line) => JSON.stringify(line)).join("\n");
    expect(text).not.toContain(API_KEY);
    expect(text).not.toContain("api_key=");
    expect(text).not.toContain("count=");
    expect(text).not.toMatch(/exit-user-\d+|exit-secret-\d+/);
    expect(text).not.toMatch(/198\.51\.\d+\.\d+/);
  });
});
