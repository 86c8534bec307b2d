/**
 * A project's response judging fields through the api and into the feed: rules are read once at
 * write time (a preset by name, or conditions of the operator's own), a rule that does not parse
 * is a 422 naming its place and changes nothing, the retry policy and the body prefix bound are
 * checked, and the feed carries what the gateway compiles (nothing for a project whose rules are
 * all off).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { runCli } from "../../testkit/cli.ts";
import { compile } from "../../control/feed/compile.ts";
import type { GlobalSection } from "../../shared/feed/models.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { PRESET_NAMES } from "../../shared/blocking/rules.ts";
import { DomainCounts } from "../../gateway/blocking/domain-counts.ts";
import { Cooldowns } from "../../gateway/blocking/cooldowns.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { runScript } from "../../shared/lua/loader.ts";
import { copyDomainCounts } from "../../control/metrics/domain-history.ts";
import { CompactionJob } from "../../control/jobs/compaction.ts";
import { countDay } from "../../shared/redis-keys.ts";
import { loadScriptNode } from "../../testkit/metering.ts";
import { ESCALATION_NEEDS_RULES } from "../../control/services/projects.ts";
import { SEQUENCE_OR_ESCALATION } from "../../control/services/sequences.ts";

let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const create = (body: Record<string, unknown>) =>
  h.request("POST", "/api/v1/projects", { token: h.tokens.editor, body });
const edit = (id: string, body: Record<string, unknown>) =>
  h.request("PATCH", `/api/v1/projects/${id}`, { token: h.tokens.editor, body });

describe("block rules through the api", () => {
  it("creates without rules; takes presets and rules of the operator's own, as read", async () => {
    const bare = await create({ name: "No rules", username: "norules" });
    expect(bare.status).toBe(201);
    expect(bare.body).toMatchObject({ block_rules: [], retry: null, block_body_bytes: null });
    const made = await create({
      name: "Judged",
      username: "judged",
      block_rules: [
        { preset: "cloudflare-challenge" },
        { preset: "rate-limit-429", mode: "shadow", domains: ["Shop.Example", ".example.org"] },
        {
          name: "shop-captcha",
          status: [403, 403, 429],
          header: { name: "X-Waf", pattern: "^deny" },
          body_contains: ["<title>Just a moment"],
          verdict: "blocked",
          cool_down_seconds: 120,
        },
      ],
      retry: { attempts: 4, methods: ["get", "post"], max_total_seconds: 20 },
      block_body_bytes: 4096,
    });
    expect(made.status).toBe(201);
    expect(made.body.block_rules).toEqual([
      {
        name: "cloudflare-challenge",
        mode: "on",
        preset: "cloudflare-challenge",
        verdict: "blocked",
        cool_down_seconds: 600,
      },
      {
        name: "rate-limit-429",
        mode: "shadow",
        preset: "rate-limit-429",
        domains: ["shop.example", ".example.org"],
        verdict: "rate_limited",
        cool_down_seconds: 60,
      },
      {
        name: "shop-captcha",
        mode: "on",
        status: [403, 429],
        header: { name: "x-waf", pattern: "^deny" },
        body_contains: ["<title>Just a moment"],
        verdict: "blocked",
        cool_down_seconds: 120,
      },
    ]);
    expect(made.body.retry).toEqual({
      attempts: 4,
      methods: ["GET", "POST"],
      max_total_seconds: 20,
      rebind_sticky: false,
    });
    expect(made.body.block_body_bytes).toBe(4096);
    const read = await h.request("GET", `/api/v1/projects/${made.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(read.body.block_rules).toEqual(made.body.block_rules);
    // What the api answers it takes back unchanged (a form, an exported file).
    const again = await edit(made.body.id, {
      block_rules: read.body.block_rules,
      retry: read.body.retry,
    });
    expect(again.status).toBe(200);
    expect(again.body.block_rules).toEqual(made.body.block_rules);
  });

  it("refuses a rule that does not parse with its place, and changes nothing", async () => {
    const project = await create({
      name: "Strict",
      username: "strict",
      block_rules: [{ preset: "rate-limit-429" }],
    });
    const bad = await edit(project.body.id, {
      block_rules: [
        { name: "ok-rule", status: [429], verdict: "rate_limited" },
        { name: "bad-pattern", header: { name: "x-a", pattern: "([unclosed" }, verdict: "blocked" },
        { name: "bad-header", header: { name: "x a", value: "b" }, verdict: "blocked" },
        { name: "bad-domain", status: [403], domains: ["*.example.com"], verdict: "blocked" },
        { name: "no-condition", verdict: "blocked" },
        { preset: "cloudflare-challenge", status: [403] },
        { name: "ok-rule", status: [500], verdict: "sometimes" },
      ],
      block_body_bytes: 1_000_000,
      retry: { attempts: 0, methods: ["CONNECT"] },
    });
    expect(bad.status).toBe(422);
    const fields = bad.body.detail.map((d: { field: string }) => d.field);
    expect(fields).toEqual(expect.arrayContaining([
      "body.block_rules.1.header.pattern",
      "body.block_rules.2.header.name",
      "body.block_rules.3.domains.0",
      "body.block_rules.4",
      "body.block_rules.5.status",
      "body.block_rules.6.verdict",
      "body.block_body_bytes",
      "body.retry.attempts",
      "body.retry.methods.0",
    ]));
    const pattern = bad.body.detail.find((d: { field: string }) =>
      d.field === "body.block_rules.1.header.pattern"
    );
    expect(pattern.message).toMatch(/^is not a valid regular expression/);
    const unchanged = await h.request("GET", `/api/v1/projects/${project.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(unchanged.body.block_rules.map((r: { name: string }) => r.name)).toEqual([
      "rate-limit-429",
    ]);
    expect(unchanged.body.block_body_bytes).toBeNull();
    const repeated = await edit(project.body.id, {
      block_rules: [{ preset: "rate-limit-429" }, { preset: "rate-limit-429" }],
    });
    expect(repeated.status).toBe(422);
    expect(repeated.body.detail).toEqual([{
      field: "body.block_rules.1.name",
      message: "repeats the rule name rate-limit-429",
    }]);
  });

  it("lists the presets", async () => {
    const presets = await h.request("GET", "/api/v1/block-rules/presets", {
      token: h.tokens.viewer,
    });
    expect(presets.status).toBe(200);
    expect(presets.body.map((p: { name: string }) => p.name)).toEqual([...PRESET_NAMES]);
    expect(presets.body.find((p: { name: string }) => p.name === "cloudflare-challenge"))
      .toMatchObject({
        header: { name: "cf-mitigated", value: "challenge" },
        verdict: "blocked",
      });
  });

  it("reaches the feed as stored; nothing for a project whose rules are all off", async () => {
    const keys = await deriveFeedKeys("block-rules-test-secret-0123456789abcdef");
    const feedOf = async (id: string) => {
      const compiled = await compile(h.deps.database, {
        keys,
        defaultStrategy: "round_robin",
        providers: new ProviderRegistry(),
        projectId: id,
      });
      return (JSON.parse(compiled.sections.get("global")!.json) as GlobalSection).projects[0];
    };
    const on = await create({
      name: "Fed rules",
      username: "fedrules",
      block_rules: [{ preset: "captcha-page" }],
      retry: { attempts: 2 },
    });
    expect((await feedOf(on.body.id)).blocking).toEqual({
      rules: [{
        name: "captcha-page",
        mode: "on",
        preset: "captcha-page",
        verdict: "blocked",
        cool_down_seconds: 600,
      }],
      retry: { attempts: 2, methods: ["GET", "HEAD"], max_total_seconds: 30, rebind_sticky: false },
      body_bytes: null,
    });
    const off = await create({
      name: "Off rules",
      username: "offrules",
      block_rules: [{ preset: "captcha-page", mode: "off" }],
    });
    expect((await feedOf(off.body.id)).blocking).toBeNull();
  });
});

describe("a project's sites", () => {
  it("answers what the gateways counted, by connector, with the blocked attempts' spend", async () => {
    const project = await create({
      name: "Sites",
      username: "sites",
      block_rules: [{ preset: "captcha-page" }, { preset: "rate-limit-429", mode: "shadow" }],
    });
    const id = project.body.id;
    const connector = async (name: string, traffic?: Record<string, unknown>) =>
      (await h.request("POST", `/api/v1/projects/${id}/connectors`, {
        token: h.tokens.editor,
        body: { name, kind: "static", ...(traffic ? { traffic_config: traffic } : {}) },
      })).body.id as string;
    const cheap = await connector("cheap", {
      limit_bytes: null,
      period: "day",
      price_per_gb: 2,
      currency: "EUR",
    });
    const free = await connector("free");
    // The gateway's own writer, on the api's Redis, as a gateway of this install counts.
    const counts = new DomainCounts({
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: { info() {}, warn() {} },
      writeTimeoutMs: 2_000,
    });
    counts.judged(id, "shop.example", cheap, "blocked", 500_000_000);
    counts.retried(id, "shop.example", cheap);
    counts.judged(id, "shop.example", free, "ok", 0);
    counts.judged(id, "shop.example", free, "ok", 0);
    counts.judged(id, "shop.example", cheap, "rate_limited", 250_000_000);
    counts.judged(id, "shop.example", cheap, "ok", 0);
    counts.goodBytes(id, "shop.example", cheap, 250_000_000);
    counts.goodBytes(id, "shop.example", free, 4_000);
    counts.judged(id, "news.example", free, "ok", 0);
    counts.shadow(id, "news.example", "rate-limit-429", "rate_limited");
    await counts.publishNow();
    await counts.close();
    // The gateways' cool-downs: one exit of this project on shop.example, one of another project.
    const book = new Cooldowns({
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: { info() {}, warn() {} },
    });
    book.coolDown("shop.example", "exit-1", 600_000, id);
    book.coolDown("shop.example", "exit-1", 900_000, id);
    book.coolDown("shop.example", "exit-2", 600_000, "another-project");
    book.start();
    await waitUntil(async () => (await h.deps.redis.xlen(h.deps.keys.cooldownsStream)) >= 3, {
      message: "the cool-downs to be written",
    });
    await book.close();

    const answer = await h.request("GET", `/api/v1/projects/${id}/domains?days=7`, {
      token: h.tokens.viewer,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.days).toBe(7);
    expect(answer.body.sites.map((s: { site: string }) => s.site)).toEqual([
      "shop.example",
      "news.example",
    ]);
    const [shop, news] = answer.body.sites;
    expect(shop).toMatchObject({
      cooldowns: 1,
      judged: 5,
      ok: 3,
      blocked: 1,
      rate_limited: 1,
      retries: 1,
      blocked_bytes: 750_000_000,
      ok_bytes: 250_004_000,
      shadow: [],
    });
    // Every judged byte through the priced connector, and that over the site's good answers.
    expect(shop.spend).toEqual([{ currency: "EUR", total: 2, blocked: 1.5, per_success: 2 / 3 }]);
    expect(shop.connectors).toEqual([
      {
        connector_id: cheap,
        connector_name: "cheap",
        ok: 1,
        blocked: 1,
        rate_limited: 1,
        retries: 1,
        blocked_bytes: 750_000_000,
        ok_bytes: 250_000_000,
        blocked_spend: 1.5,
        spend: 2,
        cost_per_success: 2,
        currency: "EUR",
      },
      {
        connector_id: free,
        connector_name: "free",
        ok: 2,
        blocked: 0,
        rate_limited: 0,
        retries: 0,
        blocked_bytes: 0,
        ok_bytes: 4_000,
        blocked_spend: null,
        spend: null,
        cost_per_success: null,
        currency: null,
      },
    ]);
    expect(news).toMatchObject({
      judged: 1,
      ok: 1,
      shadow: [{ rule: "rate-limit-429", verdict: "rate_limited", count: 1 }],
    });
    const limited = await h.request("GET", `/api/v1/projects/${id}/domains?limit=1&days=91`, {
      token: h.tokens.viewer,
    });
    expect(limited.status).toBe(422);
    expect(limited.body.detail[0].field).toBe("query.days");

    // The CLI prints the same: a row per site, the spend in the connector's currency.
    const api = await listen(h.app);
    const dir = await mkdtemp(join(tmpdir(), "ox-domains-cli-"));
    try {
      const run = (args: string[]) =>
        runCli({ port: api.port, token: h.tokens.viewer, configHome: dir }, args, {}, 60_000);
      const printed = await run(["domains", "sites", "--days", "2"]);
      expect(printed.code, printed.stderr).toBe(0);
      const rows = printed.stdout.split("\n");
      const shopRow = rows.find((row) => row.includes("shop.example"))!;
      const cells = shopRow.split("│").map((cell) => cell.trim()).filter((cell) => cell !== "");
      expect(cells).toEqual([
        "shop.example",
        "5",
        "1",
        "1",
        "1",
        "750.0 MB",
        "1.5000 EUR",
        "0.666667 EUR",
        "–",
        "1",
        "–",
      ]);
      expect(rows.find((row) => row.includes("news.example"))).toContain(
        "rate-limit-429 rate_limited 1",
      );
      const json = await run(["domains", "sites", "--json"]);
      expect(JSON.parse(json.stdout).sites).toHaveLength(2);
      const bad = await run(["domains", "sites", "--days", "91"]);
      expect(bad.code).toBe(2);
    } finally {
      await api.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("the per-site history in Postgres", () => {
  it("keeps the counts past Redis's week and past Redis losing them, for the project's retention", async () => {
    const made = await create({
      name: "Kept sites",
      username: "keptsites",
      block_rules: [{ preset: "captcha-page" }],
    });
    const id = made.body.id;
    const stores = { redis: h.deps.redis, keys: h.deps.keys, database: h.deps.database };
    const writer = (nowMs: number) =>
      new DomainCounts({
        redis: h.deps.redis,
        keys: h.deps.keys,
        logger: { info() {}, warn() {} },
        writeTimeoutMs: 2_000,
        nowMs: () => nowMs,
      });
    const now = Date.now();
    const long = now - 20 * 86_400_000;
    // Twenty days ago, copied by that day's flushes (twice: a copy again changes nothing).
    const old = writer(long);
    old.judged(id, "old.example", "c1", "blocked", 1_000);
    await old.close();
    expect(await copyDomainCounts(stores, long)).toBeGreaterThanOrEqual(2);
    await copyDomainCounts(stores, long);
    // Today: counted, copied, then lost by Redis and counted afresh (fewer than before).
    const today = writer(now);
    for (let i = 0; i < 3; i++) today.judged(id, "shop.example", "c1", "ok", 0);
    await today.close();
    await copyDomainCounts(stores, now);
    await h.deps.redis.del(h.deps.keys.domainCounts(id, countDay(now)));
    const again = writer(now);
    again.judged(id, "shop.example", "c1", "ok", 0);
    await again.close();
    await copyDomainCounts(stores, now);

    const sites = async (days: number) =>
      (await h.request("GET", `/api/v1/projects/${id}/domains?days=${days}`, {
        token: h.tokens.viewer,
      })).body.sites as { site: string; ok: number; blocked: number }[];
    expect(await sites(1)).toMatchObject([{ site: "shop.example", ok: 3 }]);
    expect(await sites(30)).toMatchObject([
      { site: "old.example", blocked: 1 },
      { site: "shop.example", ok: 3 },
    ]);
    // Past the project's retention, compaction removes the day's counts.
    expect((await edit(id, { metrics_retention_days: 10 })).status).toBe(200);
    await new CompactionJob({ database: h.deps.database, logger: h.deps.logger }).compact();
    expect((await sites(30)).map((site) => site.site)).toEqual(["shop.example"]);
  });
});

describe("escalation between connector tiers", () => {
  const connector = async (projectId: string, body: Record<string, unknown>) =>
    await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.editor,
      body: { kind: "static", ...body },
    });
  const priced = (price: number) => ({ limit_bytes: null, price_per_gb: price, currency: "USD" });

  it("is checked when written, reaches the feed, and refuses a sequence beside it", async () => {
    const bare = await create({ name: "No verdicts", username: "noverdicts", escalation: {} });
    expect(bare.status).toBe(422);
    expect(bare.body.detail).toEqual([{
      field: "body.escalation",
      message: ESCALATION_NEEDS_RULES,
    }]);
    const wrong = await create({
      name: "Wrong escalation",
      username: "wrongesc",
      block_rules: [{ preset: "captcha-page" }],
      escalation: { up_after_blocks: 0, probe_after_seconds: 10 ** 9, sideways: true },
    });
    expect(wrong.status).toBe(422);
    expect(wrong.body.detail.map((d: { field: string }) => d.field).sort()).toEqual([
      "body.escalation.probe_after_seconds",
      "body.escalation.sideways",
      "body.escalation.up_after_blocks",
    ]);
    const made = await create({
      name: "Escalated",
      username: "escalated",
      block_rules: [{ preset: "captcha-page" }],
      escalation: { up_after_blocks: 2 },
    });
    expect(made.status).toBe(201);
    const id = made.body.id;
    expect(made.body.escalation).toEqual({
      up_after_blocks: 2,
      probe_after_seconds: 600,
      down_after_probes: 3,
    });
    // Every rule off: nothing would ever move a site.
    const off = await edit(id, { block_rules: [{ preset: "captcha-page", mode: "off" }] });
    expect(off.status).toBe(422);
    expect(off.body.detail[0].field).toBe("body.escalation");

    const cheap = await connector(id, { name: "dc", traffic_config: priced(0.5) });
    const dear = await connector(id, { name: "resi", traffic_config: priced(8), tier: 1 });
    expect(dear.body.tier).toBe(1);
    const badTier = await connector(id, { name: "odd", tier: 100 });
    expect(badTier.status).toBe(422);
    expect(badTier.body.detail[0].field).toBe("body.tier");

    const keys = await deriveFeedKeys("block-rules-test-secret-0123456789abcdef");
    const compiled = await compile(h.deps.database, {
      keys,
      defaultStrategy: "round_robin",
      providers: new ProviderRegistry(),
      projectId: id,
    });
    const global = JSON.parse(compiled.sections.get("global")!.json) as GlobalSection;
    expect(global.projects[0].blocking?.escalation).toEqual(made.body.escalation);
    const fed = (connectorId: string) =>
      JSON.parse(compiled.sections.get(`connector:${connectorId}`)!.json).connector;
    expect(fed(cheap.body.id)).toMatchObject({ price_per_gb: 0.5 });
    expect(fed(cheap.body.id).tier).toBeUndefined();
    expect(fed(dear.body.id)).toMatchObject({ price_per_gb: 8, tier: 1 });

    const sequence = await h.request("PUT", `/api/v1/projects/${id}/sequence`, {
      token: h.tokens.editor,
      body: { connector_ids: [cheap.body.id, dear.body.id] },
    });
    expect(sequence.status).toBe(422);
    expect(sequence.body.detail[0].message).toBe(SEQUENCE_OR_ESCALATION);
    expect((await edit(id, { escalation: null })).status).toBe(200);
    expect(
      (await h.request("PUT", `/api/v1/projects/${id}/sequence`, {
        token: h.tokens.editor,
        body: { connector_ids: [cheap.body.id, dear.body.id] },
      })).status,
    ).toBe(200);
    const again = await edit(id, { escalation: {} });
    expect(again.status).toBe(422);
    expect(again.body.detail).toEqual([{
      field: "body.escalation",
      message: SEQUENCE_OR_ESCALATION,
    }]);
  });

  it("shows where each site stands, by its tier's connectors", async () => {
    const made = await create({
      name: "Tiered sites",
      username: "tieredsites",
      block_rules: [{ preset: "captcha-page" }],
      escalation: { up_after_blocks: 2, probe_after_seconds: 600 },
    });
    const id = made.body.id;
    await connector(id, { name: "resi", traffic_config: priced(8) });
    await connector(id, { name: "dc", traffic_config: priced(0.5) });
    // The gateways' script, on the api's Redis: two blocks on the cheapest tier move the site.
    const nowMs = Date.now();
    await runScript(
      h.deps.redis,
      await loadScriptNode("escalation_report"),
      [h.deps.keys.escalation(id), h.deps.keys.escalationVersion(id)],
      [
        String(nowMs),
        "2",
        "3",
        "600000",
        "1",
        "3600",
        "100",
        "shop.example",
        "0",
        "0",
        "2",
        "1",
        "0",
      ],
    );
    const answer = await h.request("GET", `/api/v1/projects/${id}/domains`, {
      token: h.tokens.viewer,
    });
    expect(answer.status).toBe(200);
    const [site] = answer.body.sites;
    const clock = new Date(nowMs).toISOString().slice(11, 16);
    expect(site).toMatchObject({
      site: "shop.example",
      judged: 0,
      escalation: {
        tier: 1,
        tier_connectors: ["resi"],
        moved: "up",
        after: 2,
        from_connectors: ["dc"],
        next_probe_at: new Date(nowMs + 600_000).toISOString(),
        summary: `shop.example: resi since ${clock} UTC after 2 blocks on dc; ` +
          "next probe down in 10 min",
      },
    });
  });
});

describe("per-domain routing rules", () => {
  it("are read when written: patterns, actions, the project's own connectors", async () => {
    const project = await create({ name: "Ruled", username: "ruled" });
    const id = project.body.id;
    const connector = (await h.request("POST", `/api/v1/projects/${id}/connectors`, {
      token: h.tokens.editor,
      body: { name: "main", kind: "static" },
    })).body.id as string;
    const saved = await edit(id, {
      domain_rules: [
        { domains: ["Shop.Example.", "*.cdn.*"], action: "connectors", connectors: [connector] },
        { domains: [".wall.example"], action: "refuse", reason: " Not here " },
      ],
    });
    expect(saved.status).toBe(200);
    expect(saved.body.domain_rules).toEqual([
      { domains: ["shop.example", "*.cdn.*"], action: "connectors", connectors: [connector] },
      { domains: [".wall.example"], action: "refuse", reason: "Not here" },
    ]);
    const bad = await edit(id, {
      domain_rules: [
        { domains: ["a b.example"], action: "refuse" },
        { domains: ["news.example"], action: "sideways" },
        { domains: ["x.example"], action: "connectors" },
        { domains: [], action: "refuse" },
        { domains: ["*"], action: "refuse" },
      ],
    });
    expect(bad.status).toBe(422);
    const fields = bad.body.detail.map((d: { field: string }) => d.field);
    expect(fields).toEqual(expect.arrayContaining([
      "body.domain_rules.0.domains.0",
      "body.domain_rules.1.action",
      "body.domain_rules.2.connectors",
      "body.domain_rules.3.domains",
      "body.domain_rules.4.domains.0",
    ]));
    expect(
      bad.body.detail.find((d: { field: string }) => d.field === "body.domain_rules.1.action")
        .message,
    ).toBe("must be one of connectors, refuse, direct");
    // Another project's connector, or none at all, is refused by its place.
    const foreign = await edit(id, {
      domain_rules: [{
        domains: ["a.example"],
        action: "connectors",
        connectors: [connector, "nope"],
      }],
    });
    expect(foreign.status).toBe(422);
    expect(foreign.body.detail).toEqual([{
      field: "body.domain_rules.0.connectors.1",
      message: "is not a connector of this project: nope",
    }]);
    const read = await h.request("GET", `/api/v1/projects/${id}`, { token: h.tokens.viewer });
    expect(read.body.domain_rules).toEqual(saved.body.domain_rules);
  });

  it("take direct from an admin only; an editor saving the project keeps an admin's", async () => {
    const project = await create({ name: "Direct", username: "directrules" });
    const id = project.body.id;
    const rules = [{ domains: ["news.example"], action: "direct" }];
    const byEditor = await edit(id, { domain_rules: rules });
    expect(byEditor.status).toBe(403);
    expect(byEditor.body.error).toBe(
      "only an admin may send a site through no upstream (direct) (body.domain_rules.0.action)",
    );
    const byAdmin = await h.request("PATCH", `/api/v1/projects/${id}`, {
      token: h.tokens.admin,
      body: { domain_rules: rules },
    });
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body.domain_rules).toEqual(rules);
    // The stored rules sent back with another field, as the dashboard's form does: taken.
    const kept = await edit(id, { description: "edited", domain_rules: rules });
    expect(kept.status).toBe(200);
    // A configuration file an editor applies may not add one either.
    const filed = await h.request("POST", "/api/v1/config/apply", {
      token: h.tokens.editor,
      body: {
        config: {
          version: 1,
          projects: [{
            name: "Filed direct",
            username: "fileddirect",
            password: "filed-direct-1",
            domain_rules: rules,
          }],
        },
      },
    });
    expect(filed.status).toBe(403);
    expect(filed.body.error).toContain("config.projects.0.domain_rules.0.action");
  });
});
