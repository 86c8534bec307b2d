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
  blocked_spend: v.nullable(v.number()),
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
    connectors: v.array(DomainConnectorAnswer),
    shadow: v.array(v.strictObject({ rule: v.string(), verdict: v.string(), count: count })),
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
  const byCurrency = new Map<string, number>();
  for (const connector of site.connectors) {
    if (connector.blocked_spend === null || connector.currency === null) continue;
    byCurrency.set(
      connector.currency,
      (byCurrency.get(connector.currency) ?? 0) + connector.blocked_spend,
    );
  }
  if (byCurrency.size === 0) return "–";
  return [...byCurrency].map(([currency, amount]) => `${amount.toFixed(4)} ${currency}`).join(
    ", ",
  );
}
