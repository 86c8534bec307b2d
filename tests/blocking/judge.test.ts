/**
 * Judging one answer (shared/blocking): presets expanded, the first rule on that matches decides,
 * shadow rules are reported without deciding, domains scope a rule, the body is asked for only
 * when a rule still open looks there, and a host's site is its registrable domain.
 */
import { describe, expect, it } from "vitest";
import { judge, needsBody, rulesForHost } from "../../shared/blocking/judge.ts";
import {
  type BlockRule,
  compileBlocking,
  DEFAULT_RETRY,
  readBlockRules,
  type RuleIssue,
} from "../../shared/blocking/rules.ts";
import { siteOf } from "../../shared/blocking/domain.ts";

const header = (name: string, value: string) => ({ lower: name.toLowerCase(), value });

function compiled(raw: unknown[]) {
  const issues: RuleIssue[] = [];
  const rules = readBlockRules(raw, issues);
  expect(issues).toEqual([]);
  return compileBlocking(rules as BlockRule[], null, null)!;
}

describe("judging", () => {
  const blocking = compiled([
    { preset: "cloudflare-challenge" },
    { name: "shadow-403", mode: "shadow", status: [403], verdict: "blocked" },
    { name: "captcha", status: [403], body_contains: ["G-Recaptcha"], verdict: "blocked" },
    { name: "shop-ok", status: [403], domains: [".shop.example"], verdict: "ok" },
    { preset: "rate-limit-429", domains: ["api.example"] },
    { name: "off", mode: "off", status: [200], verdict: "blocked" },
  ]);

  it("skips rules that are off and keeps the retry defaults", () => {
    expect(blocking.rules.map((r) => r.name)).toEqual([
      "cloudflare-challenge",
      "shadow-403",
      "captcha",
      "shop-ok",
      "rate-limit-429",
    ]);
    expect(blocking.retry).toEqual(DEFAULT_RETRY);
    expect(blocking.readsBody).toBe(true);
  });

  it("decides by the first rule on that matches; shadow rules matched before it are reported", () => {
    const rules = rulesForHost(blocking, "www.example")!;
    expect(judge(rules, 200, [header("CF-Mitigated", " Challenge ")], undefined)).toEqual({
      acted: { rule: "cloudflare-challenge", verdict: "blocked", coolDownMs: 600_000 },
    });
    expect(judge(rules, 403, [], '<div class="g-recaptcha">')).toEqual({
      acted: { rule: "captcha", verdict: "blocked", coolDownMs: 300_000 },
      shadows: [{ rule: "shadow-403", verdict: "blocked", coolDownMs: 300_000 }],
    });
    // No marker in the body: the shadow rule alone, nothing acted on.
    expect(judge(rules, 403, [], "forbidden")).toEqual({
      shadows: [{ rule: "shadow-403", verdict: "blocked", coolDownMs: 300_000 }],
    });
    expect(judge(rules, 200, [header("cf-mitigated", "other")], undefined)).toEqual({});
  });

  it("scopes rules to their domains", () => {
    expect(rulesForHost(blocking, "www.example")!.map((r) => r.name)).not.toContain("shop-ok");
    const shop = rulesForHost(blocking, "a.shop.example")!;
    expect(shop.map((r) => r.name)).toContain("shop-ok");
    expect(judge(shop, 403, [], "forbidden").acted).toEqual({
      rule: "shop-ok",
      verdict: "ok",
      coolDownMs: 300_000,
    });
    expect(judge(rulesForHost(blocking, "api.example")!, 429, [], undefined).acted?.verdict)
      .toBe("rate_limited");
    expect(judge(rulesForHost(blocking, "web.example")!, 429, [], undefined).acted).toBeUndefined();
  });

  it("asks for the body only when a rule still open looks there", () => {
    const rules = rulesForHost(blocking, "www.example")!;
    expect(needsBody(rules, 403, [])).toBe(true);
    expect(needsBody(rules, 200, [])).toBe(false);
    // Decided on the head by a rule before the one with markers.
    expect(needsBody(rules, 403, [header("cf-mitigated", "challenge")])).toBe(false);
  });

  it("matches a header pattern without case, and a header's presence", () => {
    const rules = compiled([
      { preset: "aws-waf" },
      { name: "retry-after", header: { name: "Retry-After" }, verdict: "rate_limited" },
    ]).rules;
    expect(judge(rules, 405, [header("x-amzn-waf-action", "CAPTCHA")], undefined).acted?.rule)
      .toBe("aws-waf");
    expect(judge(rules, 405, [header("x-amzn-waf-action", "block")], undefined).acted)
      .toBeUndefined();
    expect(judge(rules, 503, [header("retry-after", "10")], undefined).acted?.rule).toBe(
      "retry-after",
    );
  });

  it("compiles nothing when every rule is off", () => {
    expect(compiled([{ preset: "rate-limit-429", mode: "off" }])).toBeUndefined();
  });
});

describe("a host's site", () => {
  it("is its registrable domain, private suffixes included; an address is itself", () => {
    expect(siteOf("A.B.Shop.Example.co.uk.")).toBe("example.co.uk");
    expect(siteOf("alice.github.io")).toBe("alice.github.io");
    expect(siteOf("www.shop.example")).toBe("shop.example");
    expect(siteOf("127.0.0.1")).toBe("127.0.0.1");
    expect(siteOf("[2001:db8::1]")).toBe("2001:db8::1");
    expect(siteOf("localhost")).toBe("localhost");
  });
});
