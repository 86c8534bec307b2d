/**
 * A project's connectors ranked in tiers for cost-aware escalation (shared/blocking/escalation.ts):
 * by the connector's explicit `tier` (none: 0), then by its `price_per_gb` (none: 0, as for the
 * operator's own proxies), cheapest first; connectors equal in both make one tier. So without any
 * explicit tier the connectors rank by price alone, and a `tier` set on one lifts it (and those
 * beside it) above every connector with a lower one, whatever they cost.
 *
 * The gateway's router and the api's view of a site's tier both rank with this one function.
 * Runs unchanged on Node and Deno.
 */

/** What ranking needs of a connector. */
export interface TierFacts {
  id: string;
  tier?: number | null;
  price_per_gb?: number | null;
}

/** The connectors in tiers, cheapest first; within a tier, in the order given. */
export function connectorTiers<C>(
  connectors: readonly C[],
  facts: (connector: C) => TierFacts,
): C[][] {
  const keyed = connectors.map((connector, index) => {
    const known = facts(connector);
    return { connector, index, tier: known.tier ?? 0, price: known.price_per_gb ?? 0 };
  });
  keyed.sort((a, b) => a.tier - b.tier || a.price - b.price || a.index - b.index);
  const tiers: C[][] = [];
  let last: (typeof keyed)[number] | undefined;
  for (const entry of keyed) {
    if (last !== undefined && last.tier === entry.tier && last.price === entry.price) {
      tiers[tiers.length - 1].push(entry.connector);
    } else tiers.push([entry.connector]);
    last = entry;
  }
  return tiers;
}
