/**
 * Judging one answer against a project's compiled rules (rules.ts): first the rules whose domains
 * take the target's host, then, on the head, whether any rule still open needs the body's first
 * bytes, then the verdict. Pure and allocation-light: the gateway calls it per judged answer.
 *
 * Runs unchanged on Node and Deno.
 */
import { isBypassed } from "../tls/bypass.ts";
import type { CompiledBlocking, CompiledRule, Verdict } from "./rules.ts";

/** A header as the judge reads it: `lower` is the name in lower case. */
export interface JudgedHeader {
  readonly lower: string;
  readonly value: string;
}

/** A rule's finding. */
export interface Finding {
  rule: string;
  verdict: Verdict;
  coolDownMs: number;
}

/** What judging found: the verdict acted on (none: ok), and the shadow rules that matched first. */
export interface Judgement {
  acted?: Finding;
  shadows?: Finding[];
}

export const NOTHING_FOUND: Judgement = Object.freeze({});

/** The rules that apply to `host` (undefined when none does). */
export function rulesForHost(
  blocking: CompiledBlocking,
  host: string,
): readonly CompiledRule[] | undefined {
  const all = blocking.rules;
  if (!blocking.scoped) return all;
  const applying = all.filter((rule) =>
    rule.domains === undefined || isBypassed(rule.domains, host)
  );
  return applying.length === 0 ? undefined : applying;
}

function headerMatches(rule: CompiledRule, headers: readonly JudgedHeader[]): boolean {
  const condition = rule.header;
  if (condition === undefined) return true;
  for (const header of headers) {
    if (header.lower !== condition.name) continue;
    if (condition.value !== undefined) {
      if (header.value.trim().toLowerCase() === condition.value) return true;
    } else if (condition.pattern !== undefined) {
      if (condition.pattern.test(header.value.trim())) return true;
    } else return true;
  }
  return false;
}

/** Whether the rule's status and header conditions hold. */
function headMatches(
  rule: CompiledRule,
  status: number,
  headers: readonly JudgedHeader[],
): boolean {
  if (rule.statuses !== undefined && !rule.statuses.has(status)) return false;
  return headerMatches(rule, headers);
}

/**
 * Whether the verdict depends on the body: some rule before the first that decides on its head
 * alone looks for markers and its head conditions hold.
 */
export function needsBody(
  rules: readonly CompiledRule[],
  status: number,
  headers: readonly JudgedHeader[],
): boolean {
  for (const rule of rules) {
    if (!headMatches(rule, status, headers)) continue;
    if (rule.markers !== undefined) return true;
    if (!rule.shadow) return false;
  }
  return false;
}

/**
 * The verdict on an answer: the first rule on (not in shadow) that matches decides; the shadow
 * rules that matched before it are reported beside. `body` is the decoded prefix in lower case
 * (undefined: not read, and rules with markers do not match).
 */
export function judge(
  rules: readonly CompiledRule[],
  status: number,
  headers: readonly JudgedHeader[],
  body: string | undefined,
): Judgement {
  let shadows: Finding[] | undefined;
  for (const rule of rules) {
    if (!headMatches(rule, status, headers)) continue;
    if (rule.markers !== undefined) {
      if (body === undefined) continue;
      let found = false;
      for (const marker of rule.markers) {
        if (body.includes(marker)) {
          found = true;
          break;
        }
      }
      if (!found) continue;
    }
    const finding = { rule: rule.name, verdict: rule.verdict, coolDownMs: rule.coolDownMs };
    if (rule.shadow) {
      (shadows ??= []).push(finding);
      continue;
    }
    return shadows === undefined ? { acted: finding } : { acted: finding, shadows };
  }
  return shadows === undefined ? NOTHING_FOUND : { shadows };
}
