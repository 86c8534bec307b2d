/**
 * A project's per-domain routing field, read by shared/routing/domain-rules.ts (the one reading
 * the gateway applies too) inside the project's valibot schema, each refusal naming its place
 * (`body.domain_rules.0.domains.1`), and who may write a `direct` rule.
 */
import * as v from "valibot";
import { ForbiddenError } from "../../shared/errors.ts";
import {
  DIRECT_ADMINS_ONLY,
  type DomainRule,
  readDomainRules,
} from "../../shared/routing/domain-rules.ts";
import { readerField } from "./validation.ts";

/** A project's per-domain routing rules (shared/routing/domain-rules.ts reads them). */
export const domainRulesField = v.pipe(v.unknown(), readerField(readDomainRules));

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
