/**
 * `octoprox distribution-keys` and `octoprox extract` against a real api process: a key made
 * and listed over the admin login, proxies extracted with it (as JSON, as URLs, again with an
 * Idempotency-Key), the lease renewed and released; no key is a usage error; a distribution key
 * opens no admin command; a revoked key is refused with its own hint. `octoprox connectors pool`
 * shows the pool's counts and asks a run; `octoprox sequence` sets, shows and clears a sequence.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CredentialSealer } from "../../control/provider-api/pool/credentials.ts";
import { RedisPoolStore } from "../../control/provider-api/pool/store.ts";
import { fill } from "../../testkit/extraction.ts";
import { Cluster } from "../../testkit/cluster.ts";
import { JobKind } from "../../shared/roles.ts";
import { CliUser } from "./support.ts";

// The api seals and opens pool credentials with the install's secret; the test fills the pool
// with the same one.
const secret = randomBytes(32).toString("hex");
let cluster: Cluster;
const user = new CliUser();
let projectId: string;

interface Answer {
  requested: number;
  returned: number;
  lease: { id: string; expires_at: string } | null;
  proxies: { id: string; host: string; port: number; username: string; password: string }[];
}

beforeAll(async () => {
  cluster = await Cluster.create({ env: { OCTOPROX_INTERNAL_SECRET: secret } });
  await cluster.start("api");
  await user.loginWithToken(cluster, "extract-test");
  const project = await cluster.request("POST", "/api/v1/projects", {
    name: "crawl",
    username: "crawl",
  });
  projectId = project.body.id;
  const config = {
    fetch: { url: "https://provider.example/proxies" },
    parser: { format: "text", ttl_seconds: 600 },
    pool: { reserve_for_gateway: 2 },
  };
  const [{ id }] = await cluster.sql<{ id: string }[]>`
    insert into connectors (project_id, name, kind, provider, config)
    values (${projectId}, 'pool', 'provider_api', 'provider_api', ${JSON.stringify(config)}::jsonb)
    returning id`;
  const store = new RedisPoolStore({
    redis: cluster.redis,
    keys: cluster.keys,
    sealer: new CredentialSealer(secret),
  });
  // Two routed for the gateways, ten in stock.
  await fill(store, { id, projectId }, 12, 2);
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  user.remove();
  await cluster?.close();
});

describe("connectors pool", () => {
  it("shows a provider-API pool's counts, and asks a run with --run", async () => {
    const pool = await user.json<{ counts: Record<string, number>; live: number }>([
      "connectors",
      "pool",
      "pool",
      "--project",
      "crawl",
    ]);
    expect(pool.counts).toMatchObject({ routed: 2, checking: 0 });
    expect(pool.live).toBe(pool.counts.routed + pool.counts.stock);
    const stream = cluster.keys.jobStream(JobKind.pool);
    const before = await cluster.redis.xlen(stream);
    const shown = await user.run(["connectors", "pool", "pool", "--project", "crawl", "--run"]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/Asked a pool run of pool/);
    expect(shown.stdout).toMatch(/Routed\s+2/);
    expect(await cluster.redis.xlen(stream)).toBe(before + 1);
  });
});

describe("sequence", () => {
  it("sets, shows and clears a project's connector sequence", async () => {
    const backup = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      name: "backup",
      kind: "static",
    });
    expect(backup.status).toBe(201);
    const none = await user.run(["sequence", "show", "crawl"]);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toContain("has no sequence");
    const set = await user.json<{ connector_ids: string[]; on_end: string; current_index: number }>(
      ["sequence", "set", "crawl", "pool", "backup", "--on-end", "loop"],
    );
    expect(set).toMatchObject({ on_end: "loop", current_index: 0 });
    expect(set.connector_ids[1]).toBe(backup.body.id);
    const shown = await user.run(["sequence", "show", "crawl"]);
    expect(shown.stdout).toMatch(/1\s+│?\s*pool\s+│?\s*current/);
    const refused = await user.run(["sequence", "set", "crawl", "pool", "--on-end", "never"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/connector_ids|on_end/);
    const cleared = await user.run(["sequence", "clear", "crawl", "--yes"]);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect((await cluster.request("GET", `/api/v1/projects/${projectId}/sequence`)).status)
      .toBe(404);
  });
});

describe("extract", () => {
  it("makes a key, extracts with it, renews and releases the lease", async () => {
    const created = await user.json<{ key: string; prefix: string }>([
      "distribution-keys",
      "create",
      "crawl",
      "crawler",
      "--allow",
      "127.0.0.0/8",
      "--allow",
      "::1/128",
    ]);
    expect(created.key).toMatch(/^oxd_/);
    const listed = await user.json<{ name: string; active: boolean; key?: string }[]>([
      "distribution-keys",
      "list",
      "crawl",
    ]);
    expect(listed).toMatchObject([{ name: "crawler", active: true }]);
    expect(listed[0].key).toBeUndefined();
    const shown = await user.run(["distribution-keys", "list", "crawl"]);
    expect(shown.stdout).toContain("127.0.0.0/8, ::1/128");
    expect(shown.stdout).not.toContain(created.key);

    const key = created.key;
    const first = await user.json<Answer>([
      "extract",
      projectId,
      "--count",
      "3",
      "--key",
      key,
      "--lease",
      "120",
    ]);
    expect(first).toMatchObject({ requested: 3, returned: 3 });

    // The key from the environment, the project by name (the admin login looks it up), URLs.
    const urls = await user.run(["extract", "crawl", "--count", "2", "--urls"], {
      env: { OCTOPROX_DISTRIBUTION_KEY: key },
    });
    expect(urls.code, urls.stderr).toBe(0);
    const lines = urls.stdout.trim().split("\n");
    expect(lines).toHaveLength(2);
    for (const text of lines) expect(text).toMatch(/^http:\/\/user\d+:secret-\d+@10\.[\d.]+:8080$/);
    expect(urls.stderr).toMatch(/Returned 2 of 2; lease [0-9a-f-]+ until/);

    // An Idempotency-Key: the retry answers the same proxies and lease.
    const once = ["extract", projectId, "--count", "2", "--key", key, "--idempotency-key", "job-7"];
    const a = await user.json<Answer>(once);
    const b = await user.json<Answer>(once);
    expect(b).toEqual(a);

    // Three left in stock past the two the gateways keep: all_or_nothing of four takes none.
    const none = await user.json<Answer>([
      "extract",
      projectId,
      "--count",
      "4",
      "--mode",
      "all_or_nothing",
      "--key",
      key,
    ]);
    expect(none).toEqual({ requested: 4, returned: 0, lease: null, proxies: [] });

    const lease = first.lease!.id;
    const renewed = await user.json<{ id: string; expires_at: string }>([
      "extract",
      "renew",
      projectId,
      lease,
      "--lease",
      "900",
      "--key",
      key,
    ]);
    expect(Date.parse(renewed.expires_at)).toBeGreaterThan(Date.parse(first.lease!.expires_at));
    const released = await user.run(["extract", "release", projectId, lease, "--key", key]);
    expect(released.code, released.stderr).toBe(0);
    expect(released.stdout).toContain("3 proxies retired");
  });

  it("needs a key, and a key opens no admin command; a revoked key is refused", async () => {
    const missing = await user.run(["extract", projectId, "--count", "1"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("OCTOPROX_DISTRIBUTION_KEY");

    const { key } = await user.json<{ key: string }>([
      "distribution-keys",
      "create",
      "crawl",
      "short-lived",
    ]);
    const asAdmin = await user.run(["projects", "list"], { env: { OCTOPROX_TOKEN: key } });
    expect(asAdmin.code).toBe(1);
    expect(asAdmin.stderr).toContain("401 A distribution key calls a project's extraction API");

    const revoked = await user.run(["distribution-keys", "revoke", "crawl", "short-lived", "-y"]);
    expect(revoked.code, revoked.stderr).toBe(0);
    const refused = await cluster.until(async () => {
      const run = await user.run(["extract", projectId, "--count", "1", "--key", key]);
      return run.code === 1 ? run : undefined;
    }, { message: "the revoked key refused", timeoutMs: 10_000 });
    expect(refused.stderr).toContain("401 Invalid, expired or revoked distribution key");
    expect(refused.stderr).toContain("(check the distribution key");
  });
});
