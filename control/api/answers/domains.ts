/** What `GET /projects/{id}/domains` answers (control/metrics/domains.ts builds it). */
import * as v from "valibot";
import { count } from "./common.ts";

const DomainConnectorAnswer = v.strictObject({
  connector_id: v.string(),
  connector_name: v.nullable(v.string()),
  ok: count,
  blocked: count,
  rate_limited: count,
  retries: count,
  blocked_bytes: count,
  ok_bytes: count,
  blocked_spend: v.nullable(v.number()),
  spend: v.nullable(v.number()),
  cost_per_success: v.nullable(v.number()),
  currency: v.nullable(v.string()),
});

export const DomainsAnswer = v.strictObject({
  days: count,
  from: v.string(),
  to: v.string(),
  sites: v.array(v.strictObject({
    site: v.string(),
    judged: count,
    ok: count,
    blocked: count,
    rate_limited: count,
    retries: count,
    blocked_bytes: count,
    ok_bytes: count,
    /** Per currency: every judged byte's cost, the blocked part, and the cost per good answer. */
    spend: v.array(v.strictObject({
      currency: v.string(),
      total: v.number(),
      blocked: v.number(),
      per_success: v.nullable(v.number()),
    })),
    connectors: v.array(DomainConnectorAnswer),
    shadow: v.array(v.strictObject({ rule: v.string(), verdict: v.string(), count: count })),
    /** Exits cooled down for the site now after the project's verdicts. */
    cooldowns: count,
    /** Where the site stands under escalation; null: not escalated, or unmoved on the cheapest. */
    escalation: v.nullable(v.strictObject({
      tier: count,
      tier_connectors: v.array(v.string()),
      since: v.string(),
      moved: v.nullable(v.picklist(["up", "down"])),
      after: count,
      from_connectors: v.array(v.string()),
      blocks: count,
      probes: count,
      next_probe_at: v.nullable(v.string()),
      summary: v.string(),
    })),
  })),
  more: count,
});

export type DomainsPageAnswer = v.InferOutput<typeof DomainsAnswer>;
export type DomainSiteAnswer = DomainsPageAnswer["sites"][number];

/** A site's spend on blocked attempts, per currency (connectors may bill in several): "–" none. */
export function blockedSpendText(site: DomainSiteAnswer): string {
  if (site.spend.length === 0) return "–";
  return site.spend.map((entry) => `${entry.blocked.toFixed(4)} ${entry.currency}`).join(", ");
}

/** A site's cost per good answer, per currency: "–" without a price or a good answer. */
export function costPerSuccessText(site: DomainSiteAnswer): string {
  const priced = site.spend.filter((entry) => entry.per_success !== null);
  if (priced.length === 0) return "–";
  return priced.map((entry) => `${entry.per_success!.toFixed(6)} ${entry.currency}`).join(", ");
}
