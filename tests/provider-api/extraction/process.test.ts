/**
 * Extraction through a real api process (control/main.ts, role api) over its socket: a key
 * bound to client blocks is taken from an address inside them and refused from outside; the
 * answer's credentials open with the install's secret; and /metrics shows the extraction
 * families per project and mode, clean for promtool, with no address, key or lease in a label.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CredentialSealer } from "../../../control/provider-api/pool/credentials.ts";
import { RedisPoolStore } from "../../../control/provider-api/pool/store.ts";
import { redisKeys } from "../../../shared/redis-keys.ts";
import { type ControlProcess, startControl, waitForReady } from "../../../testkit/processes.ts";
import {
  parseSamples,
  promtoolCheck,
  requirePromtool,
  samplesOf,
} from "../../../testkit/promtool.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
} from "../../../testkit/stores.ts";
import { fill } from "../../../testkit/extraction.ts";

const secret = randomBytes(32).toString("hex");
const password = `pw-${randomBytes(8).toString("hex")}`;
const prefix = testPrefix();
let database: TestDatabase;
let sql: postgres.Sql;
let redis: Redis;
let api: ControlProcess;
let token: string;

async function call(
  method: string,
  path: string,
  options: { token?: string; key?: string; body?: unknown } = {},
) {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.key) headers["x-api-key"] = options.key;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(`${api.url}${path}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await response.text();
  // deno-lint-ignore no-explicit-any -- answers are read freely; a wrong field fails.
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON.
  }
  return { status: response.status, body };
}

beforeAll(async () => {
  requirePromtool();
  database = await createTestDatabase();
  sql = postgres(database.url, { max: 2, onnotice: () => {} });
  redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
  api = await startControl({
    databaseUrl: database.url,
    prefix,
    role: "api",
    instance: "t-extraction",
    extra: {
      OCTOPROX_INTERNAL_SECRET: secret,
      OCTOPROX_ADMIN_USERNAME: "admin",
      OCTOPROX_ADMIN_PASSWORD: password,
    },
  });
  await waitForReady(api);
  const login = await call("POST", "/api/v1/auth/login", {
    body: { username: "admin", password },
  });
  token = login.body.access_token;
});

afterAll(async () => {
  await api?.stop();
  redis?.disconnect();
  await sql?.end();
  await deletePrefix(TEST_REDIS_URL, prefix);
  await database?.drop();
});

describe("a real api process", () => {
  it("takes a key from its blocks only, opens the credentials, and counts it in /metrics", async () => {
    const project = await call("POST", "/api/v1/projects", {
      token,
      body: { name: "real", username: "real" },
    });
    const projectId = project.body.id as string;
    const config = {
      fetch: { url: "https://provider.example/proxies" },
      parser: { format: "text", ttl_seconds: 600 },
      pool: { reserve_for_gateway: 0 },
    };
    const [{ id: connectorId }] = await sql<{ id: string }[]>`
      insert into connectors (project_id, name, kind, provider, config)
      values (${projectId}, 'pool', 'provider_api', 'provider_api', ${
      JSON.stringify(config)
    }::jsonb)
      returning id`;
    const store = new RedisPoolStore({
      redis,
      keys: redisKeys(prefix),
      sealer: new CredentialSealer(secret),
    });
    await fill(store, { id: connectorId, projectId }, 10, 0);

    const keyOf = async (name: string, blocks: string[]) =>
      (await call("POST", `/api/v1/projects/${projectId}/distribution-keys`, {
        token,
        body: { name, allowed_cidrs: blocks },
      })).body.key as string;
    const local = await keyOf("local", ["127.0.0.0/8", "::1/128"]);
    const remote = await keyOf("remote", ["10.0.0.0/8"]);
    const extract = (key: string, body: unknown) =>
      call("POST", `/api/v1/projects/${projectId}/extract`, { key, body });

    const taken = await extract(local, { count: 2 });
    expect(taken.status).toBe(200);
    expect(taken.body.returned).toBe(2);
    for (const proxy of taken.body.proxies) {
      expect(proxy.password).toBe(`secret-${proxy.username.slice("user".length)}`);
    }
    const refused = await extract(remote, { count: 2 });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe("This distribution key is not taken from your address");
    const short = await extract(local, { count: 20, mode: "all_or_nothing" });
    expect(short.body.returned).toBe(0);
    const released = await call(
      "POST",
      `/api/v1/projects/${projectId}/extract/${taken.body.lease.id}/release`,
      { key: local },
    );
    expect(released.body).toEqual({ returned: 0, retired: 2 });

    const response = await fetch(`${api.url}/metrics`);
    const text = await response.text();
    expect(await promtoolCheck(text)).toEqual({ code: 0, output: "" });
    const samples = parseSamples(text);
    const one = (name: string, labels: Record<string, string>) => {
      const found = samplesOf(samples, name, { project: projectId, ...labels });
      expect(found, `${name} ${JSON.stringify(labels)}`).toHaveLength(1);
      return found[0].value;
    };
    expect(one("octoprox_extraction_calls_total", { mode: "partial" })).toBe(1);
    expect(one("octoprox_extraction_requested_proxies_total", { mode: "partial" })).toBe(2);
    expect(one("octoprox_extraction_returned_proxies_total", { mode: "partial" })).toBe(2);
    expect(one("octoprox_extraction_requested_proxies_total", { mode: "all_or_nothing" }))
      .toBe(20);
    expect(one("octoprox_extraction_insufficient_total", { mode: "all_or_nothing" })).toBe(1);
    expect(one("octoprox_extraction_insufficient_total", { mode: "partial" })).toBe(0);
    expect(one("octoprox_extraction_leases_ended_total", { outcome: "released" })).toBe(1);
    expect(one("octoprox_extraction_leases_ended_total", { outcome: "lapsed" })).toBe(0);
    expect(one("octoprox_extraction_idempotency_conflicts_total", {})).toBe(0);
    for (const sample of samples.filter((s) => s.name.startsWith("octoprox_extraction_"))) {
      expect(Object.keys(sample.labels).sort()).toEqual(
        sample.labels.mode !== undefined
          ? ["mode", "project", "role"]
          : sample.labels.outcome !== undefined
          ? ["outcome", "project", "role"]
          : ["project", "role"],
      );
    }
    for (const secretText of [local, remote, taken.body.lease.id, taken.body.proxies[0].host]) {
      expect(text).not.toContain(secretText);
      expect(api.stdout.join("\n")).not.toContain(secretText);
    }
  });
});
