/**
 * A project's response judging fields, read by shared/blocking/rules.ts (the one reading the
 * gateway applies too) inside the project's valibot schema, each refusal naming its place:
 * `body.block_rules.2.header.pattern`.
 *
 * - `block_rules`: the ordered rules (a preset by name, or conditions of the operator's own);
 * - `retry`: how a judged answer is retried on another exit (null: the defaults);
 * - `block_body_bytes`: how much of a body the rules' markers are looked for in (null: 8 KiB);
 * - `domain_rules`: per-domain routing (shared/routing/domain-rules.ts), read the same way.
 */
import * as v from "valibot";
import {
  BLOCK_RULE_LIMITS,
  bodyBytesIssue,
  readBlockRules,
  readRetryPolicy,
  type RuleIssue,
} from "../../shared/blocking/rules.ts";
import {
  DIRECT_ADMINS_ONLY,
  type DomainRule,
  readDomainRules,
} from "../../shared/routing/domain-rules.ts";
import { ForbiddenError } from "../../shared/errors.ts";

/** valibot's path items for a reader's `[2].header.pattern`. */
function pathOf(input: unknown, path: string) {
  const keys = path.replace(/\[(\d+)\]/g, ".$1").split(".").filter((key) => key !== "");
  return keys.map((key) => ({
    type: "unknown" as const,
    origin: "value" as const,
    input,
    key,
    value: undefined,
  }));
}

function reading<T>(read: (raw: unknown, issues: RuleIssue[]) => T | undefined) {
  return v.rawTransform<unknown, T>(({ dataset, addIssue, NEVER }) => {
    const issues: RuleIssue[] = [];
    const value = read(dataset.value, issues);
    if (value !== undefined && issues.length === 0) return value;
    for (const issue of issues) {
      const path = pathOf(dataset.value, issue.path);
      addIssue({
        message: issue.message,
        ...(path.length === 0 ? {} : { path: path as [typeof path[0], ...typeof path] }),
      });
    }
    return NEVER;
  });
}

export const blockRulesField = v.pipe(v.unknown(), reading(readBlockRules));

export const retryField = v.nullable(v.pipe(v.unknown(), reading(readRetryPolicy)));

export const blockBodyBytesField = v.nullable(
  v.pipe(
    v.unknown(),
    v.rawTransform<unknown, number>(({ dataset, addIssue, NEVER }) => {
      const issue = bodyBytesIssue(dataset.value);
      if (issue === undefined) return dataset.value as number;
      addIssue({ message: issue });
      return NEVER;
    }),
  ),
);

/** A project's per-domain routing rules (shared/routing/domain-rules.ts reads them). */
export const domainRulesField = v.pipe(v.unknown(), reading(readDomainRules));

/** Rules in one key order (Postgres' jsonb keeps its own), for telling two lists apart. */
function canonical(rules: readonly DomainRule[]): string {
  return JSON.stringify(
    rules.map((rule) => [rule.domains, rule.action, rule.connectors ?? null, rule.reason ?? null]),
  );
}

/**
 * A write of `direct` rules by a role below admin (docs/routing.md, "Per-domain rules"): a
 * ForbiddenError naming the first such rule, unless the rules are the ones already stored (an
 * editor saving a project's other fields keeps its admin's rules).
 */
export function checkDirectRules(
  rules: readonly DomainRule[] | undefined,
  stored: readonly DomainRule[] | undefined,
  admin: boolean,
  field = "body.domain_rules",
): void {
  if (admin || rules === undefined) return;
  const index = rules.findIndex((rule) => rule.action === "direct");
  if (index < 0) return;
  if (stored !== undefined && canonical(stored) === canonical(rules)) return;
  throw new ForbiddenError(`${DIRECT_ADMINS_ONLY} (${field}.${index}.action)`);
}

export { BLOCK_RULE_LIMITS };
