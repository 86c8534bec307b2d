/**
 * A project's per-domain routing rules (docs/routing.md, "Per-domain rules"): an ordered list,
 * each naming host patterns and what requests to them get: `connectors` (only those connectors
 * of the project serve them), `direct` (the gateway connects to the target itself, through no
 * upstream: admins only, and only to an address the destination guard checked) or `refuse` (a
 * 403 naming the rule's reason). The first rule whose pattern takes the target's host applies;
 * none: the project's routing as usual.
 *
 * A pattern is a host name (that name only), a `.suffix` (every name under it, not the bare
 * name), or a glob whose `*` stands for any run of characters (`*.shop.*`, `cdn-*.example`).
 *
 * One reading for the api, a configuration file and the gateway (which reads the feed's rules
 * again and skips one it cannot). Runs unchanged on Node and Deno.
 */
import { normaliseHost } from "../net/host.ts";
import { isBypassed, readBypassEntry } from "../tls/bypass.ts";

export const DOMAIN_RULE_ACTIONS = ["connectors", "refuse", "direct"] as const;
export type DomainRuleAction = (typeof DOMAIN_RULE_ACTIONS)[number];

export const DOMAIN_RULE_LIMITS = {
  rules: 50,
  patterns: 100,
  connectors: 50,
  reasonChars: 200,
  patternChars: 253,
} as const;

/** Why a non-admin's write of a `direct` rule is refused. */
export const DIRECT_ADMINS_ONLY = "only an admin may send a site through no upstream (direct)";

/** A rule as stored, carried in the feed and answered by the api. */
export interface DomainRule {
  domains: string[];
  action: DomainRuleAction;
  /** The connectors that serve the rule's hosts (action `connectors`), by id. */
  connectors?: string[];
  /** Said to a refused client, and in the routing preview. */
  reason?: string;
}

export interface DomainRuleIssue {
  path: string;
  message: string;
}

const GLOB = /^[a-z0-9*][a-z0-9*._-]*$/;

/** A pattern as stored: a host or `.suffix` as the bypass list reads it, or a lower-case glob. */
export function readDomainPattern(
  raw: unknown,
): { ok: true; pattern: string } | { ok: false; message: string } {
  if (typeof raw !== "string") return { ok: false, message: "must be text" };
  const text = raw.trim().toLowerCase().replace(/\.$/, "");
  if (!text.includes("*")) {
    const read = readBypassEntry(text);
    return read.ok ? { ok: true, pattern: read.entry } : read;
  }
  if (text.length > DOMAIN_RULE_LIMITS.patternChars || !GLOB.test(text)) {
    return {
      ok: false,
      message: "must be a host name, a .suffix, or a glob of letters, digits, . _ - and *",
    };
  }
  if (text.replaceAll("*", "").replaceAll(".", "") === "") {
    return { ok: false, message: "must name something besides * and dots" };
  }
  return { ok: true, pattern: text };
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A project's rules as written; undefined with `issues` told when any is refused. */
export function readDomainRules(
  raw: unknown,
  issues: DomainRuleIssue[],
): DomainRule[] | undefined {
  if (!Array.isArray(raw) || raw.length > DOMAIN_RULE_LIMITS.rules) {
    issues.push({
      path: "",
      message: `must be a list of at most ${DOMAIN_RULE_LIMITS.rules} rules`,
    });
    return undefined;
  }
  const before = issues.length;
  const rules: DomainRule[] = [];
  raw.forEach((entry, index) => {
    const at = `[${index}]`;
    if (!isObject(entry)) {
      issues.push({ path: at, message: "must be an object: domains, action" });
      return;
    }
    for (const key of Object.keys(entry)) {
      if (!["domains", "action", "connectors", "reason"].includes(key)) {
        issues.push({ path: `${at}.${key}`, message: "is not a field of a domain rule" });
      }
    }
    const domains: string[] = [];
    if (
      !Array.isArray(entry.domains) || entry.domains.length === 0 ||
      entry.domains.length > DOMAIN_RULE_LIMITS.patterns
    ) {
      issues.push({
        path: `${at}.domains`,
        message:
          `must be a list of 1-${DOMAIN_RULE_LIMITS.patterns} host names, .suffixes or globs`,
      });
    } else {
      entry.domains.forEach((pattern, p) => {
        const read = readDomainPattern(pattern);
        if (read.ok) domains.push(read.pattern);
        else issues.push({ path: `${at}.domains[${p}]`, message: read.message });
      });
    }
    const action = entry.action;
    if (!(DOMAIN_RULE_ACTIONS as readonly unknown[]).includes(action)) {
      issues.push({
        path: `${at}.action`,
        message: `must be one of ${DOMAIN_RULE_ACTIONS.join(", ")}`,
      });
    }
    const rule: DomainRule = { domains: [...new Set(domains)], action: action as DomainRuleAction };
    if (action === "connectors") {
      const list = entry.connectors;
      if (
        !Array.isArray(list) || list.length === 0 ||
        list.length > DOMAIN_RULE_LIMITS.connectors ||
        !list.every((id) => typeof id === "string" && id.length > 0 && id.length <= 64)
      ) {
        issues.push({
          path: `${at}.connectors`,
          message: `must list 1-${DOMAIN_RULE_LIMITS.connectors} connector ids of this project`,
        });
      } else rule.connectors = [...new Set(list as string[])];
    } else if (entry.connectors !== undefined) {
      issues.push({ path: `${at}.connectors`, message: "is for action connectors only" });
    }
    if (entry.reason !== undefined) {
      if (
        typeof entry.reason !== "string" || entry.reason.trim() === "" ||
        entry.reason.length > DOMAIN_RULE_LIMITS.reasonChars || /[\r\n]/.test(entry.reason)
      ) {
        issues.push({
          path: `${at}.reason`,
          message: `must be one line of 1-${DOMAIN_RULE_LIMITS.reasonChars} characters`,
        });
      } else rule.reason = entry.reason.trim();
    }
    rules.push(rule);
  });
  return issues.length === before ? rules : undefined;
}

/** A rule as the router applies it: its patterns split by kind, its connectors as a set. */
export interface CompiledDomainRule {
  action: DomainRuleAction;
  /** Host names and `.suffixes` (matched as the bypass list is). */
  hosts: readonly string[];
  globs: readonly RegExp[];
  connectors: ReadonlySet<string>;
  reason: string | undefined;
  /** The patterns as written, for the routing preview. */
  domains: readonly string[];
}

function globExpression(pattern: string): RegExp {
  const source = pattern.split("*").map((part) => part.replace(/[.\\-]/g, "\\$&")).join(".*");
  return new RegExp(`^${source}$`);
}

/** The rules the router applies (undefined: none); a rule that would not apply is left out. */
export function compileDomainRules(
  rules: readonly DomainRule[],
): readonly CompiledDomainRule[] | undefined {
  const compiled: CompiledDomainRule[] = [];
  for (const rule of rules) {
    if (!(DOMAIN_RULE_ACTIONS as readonly string[]).includes(rule.action)) continue;
    compiled.push({
      action: rule.action,
      hosts: Object.freeze(rule.domains.filter((pattern) => !pattern.includes("*"))),
      globs: rule.domains.filter((pattern) => pattern.includes("*")).map(globExpression),
      connectors: new Set(rule.connectors ?? []),
      reason: rule.reason,
      domains: Object.freeze([...rule.domains]),
    });
  }
  return compiled.length === 0 ? undefined : Object.freeze(compiled);
}

/** The first rule whose patterns take `host`, or undefined. */
export function domainRuleFor(
  rules: readonly CompiledDomainRule[],
  host: string,
): CompiledDomainRule | undefined {
  const name = normaliseHost(host);
  for (const rule of rules) {
    if (rule.hosts.length > 0 && isBypassed(rule.hosts, name)) return rule;
    for (const glob of rule.globs) if (glob.test(name)) return rule;
  }
  return undefined;
}
