/**
 * Per-domain routing rules as the router reads and matches them (shared/routing/domain-rules.ts):
 * host names, `.suffixes` and globs, the first rule that takes a host applies, and a pattern that
 * does not parse is refused with why.
 */
import { describe, expect, it } from "vitest";
import {
  compileDomainRules,
  domainRuleFor,
  type DomainRuleIssue,
  readDomainPattern,
  readDomainRules,
} from "../../shared/routing/domain-rules.ts";

function rules(raw: unknown[]) {
  const issues: DomainRuleIssue[] = [];
  const read = readDomainRules(raw, issues);
  expect(issues).toEqual([]);
  return compileDomainRules(read!)!;
}

describe("per-domain rules", () => {
  const compiled = rules([
    { domains: ["shop.example"], action: "refuse", reason: "no" },
    { domains: [".shop.example", "*.cdn.*"], action: "connectors", connectors: ["c1"] },
    { domains: ["cdn-*.example"], action: "connectors", connectors: ["c2"] },
  ]);
  const which = (host: string) => {
    const rule = domainRuleFor(compiled, host);
    return rule === undefined ? "none" : `${rule.action}:${[...rule.connectors].join(",")}`;
  };

  it("matches a name, names under a suffix, and globs, the first rule first", () => {
    expect(which("shop.example")).toBe("refuse:");
    expect(which("SHOP.example.")).toBe("refuse:");
    expect(which("www.shop.example")).toBe("connectors:c1");
    expect(which("img.cdn.net")).toBe("connectors:c1");
    expect(which("cdn-eu.example")).toBe("connectors:c2");
    expect(which("cdn.example")).toBe("none");
    expect(which("myshop.example")).toBe("none");
  });

  it("reads patterns as stored and refuses what does not parse", () => {
    expect(readDomainPattern(" Shop.Example. ")).toEqual({ ok: true, pattern: "shop.example" });
    expect(readDomainPattern("*.Shop.*")).toEqual({ ok: true, pattern: "*.shop.*" });
    expect(readDomainPattern("*.*").ok).toBe(false);
    expect(readDomainPattern("a b.example").ok).toBe(false);
    expect(readDomainPattern("shop.example:443").ok).toBe(false);
  });
});
