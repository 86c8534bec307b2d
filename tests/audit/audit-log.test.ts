/**
 * The audit log as operators read it: writes by two users through the api, the CLI (the bin, a
 * child process, with an API token) and configuration files (one applied through the CLI, the
 * api's own file on SIGHUP) appear in order with who, how, the exact fields before and after,
 * and no secret; a refused write and a read write nothing; a bulk upload is one entry with its
 * count; the page filters and pages by cursor.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../../testkit/cli.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { reloadConfigFile } from "../../control/config/reload.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let dir: string;
let ciToken: string;

function octoprox(args: string[], env: Record<string, string> = {}) {
  return runCli({ port: api.port, token: ciToken, configHome: dir }, args, env);
}

// deno-lint-ignore no-explicit-any -- entries are read field by field; a wrong one fails.
async function audit(query = ""): Promise<any[]> {
  const answer = await h.request("GET", `/api/v1/audit?limit=500${query}`, {
    token: h.tokens.admin,
  });
  expect(answer.status, answer.text).toBe(200);
  return [...answer.body.items].reverse();
}

const FILE = `version: 1
projects:
  - name: catalog
    username: catalog
    password: \${CATALOG_PASSWORD}
    connectors:
      - name: main
        kind: static
        weight: 2
        proxies:
          - http://203.0.113.7:3128
          - url: socks5://u:\${UPSTREAM_PASSWORD}@203.0.113.8:1080
            country: de
`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-audit-"));
  h = await startHarness({ env: { OCTOPROX_CONFIG_FILE: join(dir, "octoprox.yaml") } });
  api = await listen(h.app);
  const token = await h.request("POST", "/api/v1/tokens", {
    token: h.tokens.editor,
    body: { name: "ci" },
  });
  expect(token.status, token.text).toBe(201);
  ciToken = token.body.token;
});

afterAll(async () => {
  await api?.close();
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the audit log", () => {
  it("shows two users' writes through the api, the CLI and configuration files in order", async () => {
    const startedAt = (await audit()).length;
    const created = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.admin,
      body: { name: "shop", username: "shop", password: "shop-secret-1" },
    });
    expect(created.status, created.text).toBe(201);
    const shopId = created.body.id;
    // Refused (422) and read: neither is an entry.
    const refused = await h.request("PATCH", `/api/v1/projects/${shopId}`, {
      token: h.tokens.admin,
      body: { max_retries: -1 },
    });
    expect(refused.status).toBe(422);
    expect(
      (await h.request("GET", `/api/v1/projects/${shopId}`, { token: h.tokens.admin }))
        .status,
    ).toBe(200);
    const patched = await h.request("PATCH", `/api/v1/projects/${shopId}`, {
      token: h.tokens.admin,
      body: { description: "Shop scraping", password: "shop-secret-2" },
    });
    expect(patched.status, patched.text).toBe(200);

    const updated = await octoprox(["projects", "update", "shop", "--description", "By the CLI"]);
    expect(updated.code, updated.stderr).toBe(0);
    const path = join(dir, "catalog.yaml");
    await writeFile(path, FILE);
    const applied = await octoprox(["apply", "-f", path, "--yes"], {
      CATALOG_PASSWORD: "catalog-secret-1",
      UPSTREAM_PASSWORD: "upstream-secret-1",
    });
    expect(applied.code, applied.stderr).toBe(0);

    // The api's own file, read on SIGHUP: the system writes, through `config`.
    await writeFile(join(dir, "octoprox.yaml"), FILE.replace("weight: 2", "weight: 3"));
    process.env.CATALOG_PASSWORD = "catalog-secret-2";
    process.env.UPSTREAM_PASSWORD = "upstream-secret-1";
    try {
      await reloadConfigFile(h.deps, "sighup");
    } finally {
      delete process.env.CATALOG_PASSWORD;
      delete process.env.UPSTREAM_PASSWORD;
    }

    const entries = (await audit()).slice(startedAt);
    const admin = { kind: "user", id: h.userIds.admin, name: "admin", user: "admin" };
    const ci = { kind: "token", id: expect.any(String), name: "ci", user: "editor" };
    const system = { kind: "system", id: null, name: "configuration file", user: null };
    const catalog = entries.find((e) => e.entity_name === "catalog")?.entity_id;
    const main = entries.find((e) => e.entity === "connector")?.entity_id;
    expect(entries.map((e) => ({ ...e, id: undefined, at: undefined }))).toEqual([
      {
        id: undefined,
        at: undefined,
        actor: admin,
        address: null,
        via: "api",
        request: "POST /api/v1/projects",
        entity: "project",
        entity_id: shopId,
        entity_name: "shop",
        action: "create",
        count: 1,
        before: null,
        after: expect.objectContaining({
          id: shopId,
          name: "shop",
          username: "shop",
          password: "********",
          description: "",
          max_retries: 1,
        }),
      },
      {
        id: undefined,
        at: undefined,
        actor: admin,
        address: null,
        via: "api",
        request: "PATCH /api/v1/projects/:id",
        entity: "project",
        entity_id: shopId,
        entity_name: "shop",
        action: "update",
        count: 1,
        before: { description: "", password: "********" },
        after: { description: "Shop scraping", password: "********" },
      },
      {
        id: undefined,
        at: undefined,
        actor: ci,
        address: "127.0.0.1",
        via: "cli",
        request: "PATCH /api/v1/projects/:id",
        entity: "project",
        entity_id: shopId,
        entity_name: "shop",
        action: "update",
        count: 1,
        before: { description: "Shop scraping" },
        after: { description: "By the CLI" },
      },
      ...[
        ["project", catalog, "catalog", expect.objectContaining({ password: "********" })],
        ["connector", main, "main", expect.objectContaining({ weight: 2, kind: "static" })],
        ["proxy", null, null, null],
      ].map(([entity, entityId, entityName, after]) => ({
        id: undefined,
        at: undefined,
        actor: ci,
        address: "127.0.0.1",
        via: "cli",
        request: "POST /api/v1/config/apply",
        entity,
        entity_id: entityId,
        entity_name: entityName,
        action: "create",
        count: entity === "proxy" ? 2 : 1,
        before: null,
        after,
      })),
      ...[
        ["project", catalog, "catalog", { password: "********" }, { password: "********" }],
        ["connector", main, "main", { weight: 2 }, { weight: 3 }],
      ].map(([entity, entityId, entityName, before, after]) => ({
        id: undefined,
        at: undefined,
        actor: system,
        address: null,
        via: "config",
        request: `SIGHUP: ${join(dir, "octoprox.yaml")}`,
        entity,
        entity_id: entityId,
        entity_name: entityName,
        action: "update",
        count: 1,
        before,
        after,
      })),
    ]);
    // In order, one transaction's entries together.
    const ids = entries.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    const text = JSON.stringify(await audit());
    for (const secret of ["shop-secret", "catalog-secret", "upstream-secret", ciToken]) {
      expect(text).not.toContain(secret);
    }
  });

  it("filters by entity, user, action, via and time, and pages by cursor", async () => {
    const byCli = await audit("&via=cli&entity=project");
    expect(byCli.length).toBeGreaterThanOrEqual(2);
    expect(byCli.every((e) => e.via === "cli" && e.entity === "project")).toBe(true);
    const byEditor = await audit("&user=EDITOR");
    expect(byEditor.length).toBeGreaterThan(0);
    expect(byEditor.every((e) => e.actor.user === "editor")).toBe(true);
    const creates = await audit("&action=create&entity=proxy");
    expect(creates.map((e) => e.count)).toEqual([2]);
    expect(await audit(`&since=${new Date(Date.now() + 60_000).toISOString()}`)).toEqual([]);

    const all = await audit();
    const pages: string[] = [];
    let cursor = "";
    for (let page = 0; page < 100; page++) {
      const answer = await h.request("GET", `/api/v1/audit?limit=2${cursor}`, {
        token: h.tokens.admin,
      });
      expect(answer.status).toBe(200);
      pages.push(...answer.body.items.map((e: { id: string }) => e.id));
      if (answer.body.next_cursor === null) break;
      cursor = `&cursor=${answer.body.next_cursor}`;
    }
    expect(pages).toEqual(all.map((e) => e.id).reverse());

    for (
      const [query, field] of [
        ["entity=planet", "query.entity"],
        ["action=explode", "query.action"],
        ["since=yesterday", "query.since"],
        ["cursor=abc", "query.cursor"],
      ]
    ) {
      const refused = await h.request("GET", `/api/v1/audit?${query}`, { token: h.tokens.admin });
      expect(refused.status, query).toBe(422);
      expect(refused.body.detail[0].field).toBe(field);
    }
    const editor = await h.request("GET", "/api/v1/audit", { token: h.tokens.editor });
    expect(editor.status).toBe(403);
  });

  it("lists a proxy upload as one entry with its count, and a quarantine lift", async () => {
    const [project] = await h.deps.database.sql`select id::text from projects where name = 'shop'`;
    const connector = await h.request("POST", `/api/v1/projects/${project.id}/connectors`, {
      token: h.tokens.editor,
      body: { name: "bulk", kind: "static" },
    });
    expect(connector.status, connector.text).toBe(201);
    const lines = Array.from({ length: 250 }, (_, i) => `http://198.51.100.${i % 250}:${1000 + i}`);
    const uploaded = await h.request(
      "POST",
      `/api/v1/projects/${project.id}/proxies/upload?connector_id=${connector.body.id}`,
      { token: h.tokens.editor, text: lines.join("\n") },
    );
    expect(uploaded.status, uploaded.text).toBeLessThan(300);
    const [last] = (await audit("&entity=proxy")).slice(-1);
    expect(last).toMatchObject({
      actor: { kind: "user", name: "editor" },
      action: "create",
      count: 250,
      entity_id: null,
    });

    const proxyId = uploaded.body.added_ids?.[0] ??
      (await h.deps.database
        .sql`select id::text from proxies where connector_id = ${connector.body.id}
        order by host limit 1`)[0].id;
    await h.deps.redis.zadd(h.deps.keys.proxyQuarantined, Date.now() + 600_000, proxyId);
    const lift = await h.request(
      "POST",
      `/api/v1/projects/${project.id}/proxies/${proxyId}/unquarantine`,
      {
        token: h.tokens.editor,
      },
    );
    expect(lift.status, lift.text).toBe(200);
    const [lifted] = (await audit("&action=lift")).slice(-1);
    expect(lifted).toMatchObject({
      actor: { kind: "user", name: "editor" },
      request: "POST /api/v1/projects/:id/proxies/:pid/unquarantine",
      entity: "proxy",
      entity_id: proxyId,
      after: { quarantined: false },
    });
  });

  it("`octoprox audit` shows the entries to an admin, filtered, and refuses an editor", async () => {
    const token = await h.request("POST", "/api/v1/tokens", {
      token: h.tokens.admin,
      body: { name: "auditor" },
    });
    const admin = { OCTOPROX_TOKEN: token.body.token };
    const shown = await octoprox(["audit", "--entity", "project", "--user", "editor"], admin);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(
      /ci \(token of editor\)\s+│\s+cli\s+│\s+update\s+│\s+project\s+│\s+shop\s+│\s+description: "Shop scraping" → "By the CLI"/,
    );
    const json = await octoprox(["audit", "--since", "1h", "--limit", "2", "--json"], admin);
    expect(json.code, json.stderr).toBe(0);
    const page = JSON.parse(json.stdout);
    expect(page.items).toHaveLength(2);
    expect(page.next_cursor).toMatch(/^\d+$/);
    // A usage error, before any request.
    const bad = await octoprox(["audit", "--since", "yesterday"], admin);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("must be a time such as 24h");
    const editor = await octoprox(["audit"]);
    expect(editor.code).toBe(1);
    expect(editor.stderr).toMatch(/admin/i);
  });

  it("audits alert channels and rules, the channel's URL and secret masked", async () => {
    const url = "http://127.0.0.1:9/hooks/T000/B000/very-secret-path";
    const channel = await h.request("POST", "/api/v1/alerts/channels", {
      token: h.tokens.admin,
      body: { name: "ops hook", url, allow_private_address: true },
    });
    expect(channel.status, channel.text).toBe(201);
    const rule = await h.request("POST", "/api/v1/alerts/rules", {
      token: h.tokens.admin,
      body: { name: "pools", kind: "pool_depleted", channel_ids: [channel.body.id] },
    });
    expect(rule.status, rule.text).toBe(201);
    const entries = (await audit()).filter((e) => e.entity.startsWith("alert_"));
    expect(entries.map((e) => [e.entity, e.action, e.entity_name])).toEqual([
      ["alert_channel", "create", "ops hook"],
      ["alert_rule", "create", "pools"],
      ["alert_rule_channel", "create", null],
    ]);
    expect(entries[0].after).toMatchObject({ url: "********", secret_sealed: "********" });
    const text = JSON.stringify(entries);
    expect(text).not.toContain("very-secret-path");
    expect(text).not.toContain(channel.body.secret);
  });
});
