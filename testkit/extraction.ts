/**
 * An extraction bed over real stores: the admin API harness (a fresh database, a Redis prefix of
 * its own) with an app whose extraction parts the test holds (for its counts), provider-API
 * connectors written to Postgres, their pools filled through the real pool store (added, then
 * checked into routed up to the reserve and stock past it), and distribution keys made through
 * the admin API.
 */
import type { Hono } from "hono";
import { createApp } from "../control/api/app.ts";
import {
  Extraction,
  type ExtractionOptions,
} from "../control/provider-api/extraction/extraction.ts";
import type { NewPoolProxy } from "../control/provider-api/pool/contract.ts";
import { poolStoreOf, type RedisPoolStore } from "../control/provider-api/pool/store.ts";
import { JobKind } from "../shared/roles.ts";
import { type Answer, type ApiHarness, type HarnessOptions, startHarness } from "./api-harness.ts";

export interface ExtractionBed {
  h: ApiHarness;
  app: Hono;
  extraction: Extraction;
  store: RedisPoolStore;
  /** A request to the bed's app (the harness's own app has extraction parts of its own). */
  call(method: string, path: string, options?: CallOptions): Promise<Answer>;
  close(): Promise<void>;
}

export interface CallOptions {
  /** A distribution key, sent as X-API-Key (or as a bearer with `bearer`). */
  key?: string;
  bearer?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export async function startBed(
  options: HarnessOptions & { extraction?: ExtractionOptions } = {},
): Promise<ExtractionBed> {
  const h = await startHarness(options);
  const extraction = new Extraction(h.deps, options.extraction);
  const app = createApp({ ...h.deps, extraction });
  const store = poolStoreOf(h.deps);
  return {
    h,
    app,
    extraction,
    store,
    async call(method, path, opts = {}) {
      const headers: Record<string, string> = { ...opts.headers };
      if (opts.key !== undefined) headers["x-api-key"] = opts.key;
      if (opts.bearer !== undefined) headers.authorization = `Bearer ${opts.bearer}`;
      let body: string | undefined;
      if (opts.body !== undefined) {
        body = JSON.stringify(opts.body);
        headers["content-type"] = "application/json";
      }
      const response = await app.request(path, { method, headers, body });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON.
      }
      return { status: response.status, headers: response.headers, body: parsed, text };
    },
    close: () => h.close(),
  };
}

/** A project through the admin API; answers its id. */
export async function createProject(h: ApiHarness, name: string): Promise<string> {
  const answer = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.admin,
    body: { name, username: name },
  });
  if (answer.status !== 201) throw new Error(`Project not created: ${answer.text}`);
  return answer.body.id as string;
}

export interface ConnectorSpec {
  name: string;
  /** `pool.reserve_for_gateway`; null routes everything. */
  reserve: number | null;
  enabled?: boolean;
  /** `pool.reuse_after_release_seconds` (default null: released proxies retire). */
  reuseAfterReleaseSeconds?: number | null;
}

/** A provider-API connector, written as the connectors service stores one. */
export async function createConnector(
  h: ApiHarness,
  projectId: string,
  spec: ConnectorSpec,
): Promise<string> {
  const config = {
    fetch: { url: "https://provider.example/proxies" },
    parser: { format: "text", ttl_seconds: 600 },
    pool: {
      target_size: 10,
      max_size: 100_000,
      reserve_for_gateway: spec.reserve,
      reuse_after_release_seconds: spec.reuseAfterReleaseSeconds ?? null,
    },
  };
  const [row] = await h.deps.database.sql<{ id: string }[]>`
    insert into connectors (project_id, name, kind, provider, enabled, config)
    values (${projectId}, ${spec.name}, 'provider_api', 'provider_api', ${spec.enabled ?? true},
      ${JSON.stringify(config)}::jsonb)
    returning id`;
  return row.id;
}

/** Changes a connector's reserve in Postgres (the extraction reads it again within seconds). */
export async function setReserve(h: ApiHarness, connectorId: string, reserve: number | null) {
  await h.deps.database.sql`
    update connectors set config = jsonb_set(config, '{pool,reserve_for_gateway}',
      ${JSON.stringify(reserve)}::jsonb)
    where id = ${connectorId}`;
}

let serial = 0;

export interface FillOptions {
  nowMs?: number;
  /** Lifetime from now (default 10 minutes); usable until 10 s before. */
  ttlMs?: number;
  country?: string | null;
  carrier?: string | null;
  scheme?: string;
}

/**
 * `n` proxies added to the connector's pool and checked: routed until the routed entries reach
 * `reserve` (all of them with null), stock past it. Answers the entries' ids in order.
 */
export async function fill(
  store: RedisPoolStore,
  connector: { id: string; projectId: string },
  n: number,
  reserve: number | null,
  options: FillOptions = {},
): Promise<string[]> {
  const nowMs = options.nowMs ?? Date.now();
  const ttlMs = options.ttlMs ?? 600_000;
  const proxies: NewPoolProxy[] = [];
  for (let i = 0; i < n; i++) {
    serial += 1;
    const a = (serial >> 16) & 255;
    const b = (serial >> 8) & 255;
    const c = serial & 255;
    const host = `10.${a}.${b}.${c}`;
    proxies.push({
      key: `${options.scheme ?? "http"}|${host}|8080|user${serial}`,
      scheme: options.scheme ?? "http",
      host,
      port: 8080,
      username: `user${serial}`,
      password: `secret-${serial}`,
      country: options.country === undefined ? "DE" : options.country,
      carrier: options.carrier ?? null,
      expiresAtMs: nowMs + ttlMs,
      usableUntilMs: nowMs + ttlMs - 10_000,
    });
  }
  const ids: string[] = [];
  for (let start = 0; start < proxies.length; start += 5000) {
    const added = await store.add(connector, proxies.slice(start, start + 5000), {
      nowMs,
      maxSize: 1_000_000,
    });
    await store.markChecked(connector, added.ids.map((id) => ({ id, passed: true })), {
      nowMs,
      reserve,
    });
    ids.push(...added.ids);
  }
  return ids;
}

/** A distribution key of the project through the admin API; answers the key and its id. */
export async function createKey(
  h: ApiHarness,
  projectId: string,
  body: Record<string, unknown> = {},
): Promise<{ key: string; id: string }> {
  const answer = await h.request("POST", `/api/v1/projects/${projectId}/distribution-keys`, {
    token: h.tokens.editor,
    body: { name: `key-${++serial}`, ...body },
  });
  if (answer.status !== 201) throw new Error(`Key not created: ${answer.text}`);
  return { key: answer.body.key as string, id: answer.body.id as string };
}

/** Every key under the harness's prefix with its value, as a comparable snapshot of Redis. */
export async function redisState(h: ApiHarness): Promise<Record<string, unknown>> {
  const redis = h.deps.redis;
  const state: Record<string, unknown> = {};
  let cursor = "0";
  const names: string[] = [];
  do {
    const [next, found] = await redis.scan(
      cursor,
      "MATCH",
      `${h.deps.keys.prefix}*`,
      "COUNT",
      1000,
    );
    cursor = next;
    names.push(...found);
  } while (cursor !== "0");
  for (const name of names.sort()) {
    // The job and change streams are bookkeeping of the test's own writes, not pool state.
    if (name.includes(":jobs:") || name.includes("changes")) continue;
    const type = await redis.type(name);
    if (type === "hash") state[name] = await redis.hgetall(name);
    else if (type === "zset") state[name] = await redis.zrange(name, "0", "-1", "WITHSCORES");
    else if (type === "string") state[name] = await redis.get(name);
    else if (type === "set") state[name] = (await redis.smembers(name)).sort();
    else state[name] = type;
  }
  return state;
}

/** The connector ids asked of the pool job so far (its run-now stream). */
export async function poolRunsAsked(h: ApiHarness): Promise<string[]> {
  const entries = await h.deps.redis.xrange(h.deps.keys.jobStream(JobKind.pool), "-", "+");
  return entries.map(([, fields]) => fields[fields.indexOf("key") + 1]);
}
