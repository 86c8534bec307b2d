/**
 * A project's response judging fields through the api and into the feed: rules are read once at
 * write time (a preset by name, or conditions of the operator's own), a rule that does not parse
 * is a 422 naming its place and changes nothing, the retry policy and the body prefix bound are
 * checked, and the feed carries what the gateway compiles (nothing for a project whose rules are
 * all off).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { compile } from "../../control/feed/compile.ts";
import type { GlobalSection } from "../../shared/feed/models.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { PRESET_NAMES } from "../../shared/blocking/rules.ts";

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
