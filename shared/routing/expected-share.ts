/**
 * The share of a project's requests each of its connectors can expect, as the router splits them:
 * for one kind of request (the username's options, the destination's host) at one moment, on a
 * gateway that has served nothing. The api's traffic split shows it beside the share observed.
 *
 * Nothing here restates the choice: a connector is judged by the router's own test
 * (`inSequence`, then `connectorVerdict`), and every strategy picks among the eligible ones in
 * proportion to weight (smooth weighted round robin, weighted random, least_used's ties at
 * nothing in flight), trying another when the one picked yields no usable row
 * (strategies/common.ts, `acrossConnectors`). So an eligible connector whose healthy rows are
 * all resting, or all past their usable-until, gives its share to the others, and each one left
 * gets its weight over the sum of theirs: exactly for the weighted draws (a draw that misses is
 * drawn again among the rest), and for round_robin over whole turns (a pick that found no usable
 * row is taken back before the next, so the rest are counted once).
 *
 * What moves with traffic is left out, as a gateway that has served nothing has it: concurrency
 * limits (nothing in flight), proxies already tried by a retry, quarantines a gateway's own rate
 * limiter tripped before the feed carries them, and a sticky session's binding.
 */
import { RejectionReason, type UsernameOptions } from "./contract.ts";
import { connectorVerdict, Ineligible, inSequence, quarantineEndMs } from "./eligibility.ts";
import type { ConnectorIndex, PlaceRows, ProjectEntry, RoutingSnapshot } from "./snapshot.ts";

/**
 * Why a connector takes no request though the router's test lets it through, or is not judged
 * at all: the router's own names for these (its refusal kind, its sequence's stops).
 */
export const NotServing = {
  /** Its healthy rows all rest in a quarantine (the router answers 429 when none else serves). */
  allQuarantined: RejectionReason.allProxiesQuarantined,
  /** Its healthy rows are all past their usable-until (a provider-API pool's). */
  noUsableProxy: "no_usable_proxy",
  /** Not in the feed at all (its provider is gone): no gateway knows it. */
  notInRouting: "not_in_routing",
} as const;
export type NotServing = (typeof NotServing)[keyof typeof NotServing];

export type Exclusion = Ineligible | NotServing;

export interface ConnectorShare {
  readonly connector: ConnectorIndex;
  /** Why it takes no request; null when it takes its share. */
  readonly excluded: Exclusion | null;
  /** Its weight over the sum of the serving connectors' weights; 0 when excluded. */
  readonly share: number;
}

/** Each connector of the project in the snapshot (the router's order), with its share. */
export function expectedShares(
  snapshot: RoutingSnapshot,
  project: ProjectEntry,
  options: UsernameOptions,
  host: string,
  nowMs: number,
): ConnectorShare[] {
  const judged = (snapshot.connectorsByProject.get(project.id) ?? []).map((connector) => {
    // A sequence's other connectors are out of it before any test, as in the router.
    const verdict = inSequence(project, connector)
      ? connectorVerdict(snapshot, connector, options, host, nowMs)
      : Ineligible.outOfSequence;
    const excluded = typeof verdict === "string" ? verdict : unusable(snapshot, verdict, nowMs);
    return { connector, excluded };
  });
  let total = 0;
  for (const { connector, excluded } of judged) if (excluded === null) total += connector.weight;
  return judged.map(({ connector, excluded }) => ({
    connector,
    excluded,
    // Weights are 1 to 100, so a serving connector makes `total` positive; the guard is for a
    // feed that says otherwise.
    share: excluded === null && total > 0 ? connector.weight / total : 0,
  }));
}

/**
 * Null when one of the eligible connector's healthy rows can take a request now; otherwise why
 * none can, as the router words it when nothing else serves (a resting row makes it the 429).
 */
function unusable(snapshot: RoutingSnapshot, place: PlaceRows, nowMs: number): NotServing | null {
  let resting = false;
  for (const row of place.rows) {
    if (row.usableUntilMs <= nowMs) continue;
    if (quarantineEndMs(snapshot, row, nowMs) === null) return null;
    resting = true;
  }
  return resting ? NotServing.allQuarantined : NotServing.noUsableProxy;
}
