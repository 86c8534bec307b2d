/**
 * Whether one connector of a project can take a request, and if not, why: the test the router
 * applies to each connector on every request (router.ts), kept in a file of its own so the api's
 * routing preview asks the very same test and its reasons are the router's, not a copy of them.
 *
 * The tests run in the router's order and the first that fails is the reason: the connector
 * takes requests (enabled, not pending deletion), has rows serving the place asked, lets the host
 * through its domain filter, has a healthy row among those, and is not blocked by its traffic
 * limit. Nothing is allocated: an eligible connector answers its cached place rows, another one
 * of the constant reasons below.
 *
 * A project with a connector sequence routes through its current connector alone: the others
 * are out of its sequence before any test (`inSequence`), and the router judges only that one.
 */
import { domainRuleFor } from "./domain-rules.ts";
import type { UsernameOptions } from "./contract.ts";
import type {
  ConnectorIndex,
  PlaceRows,
  ProjectEntry,
  ProxyEntry,
  RoutingSnapshot,
} from "./snapshot.ts";

/** Why a connector cannot take a request, as stable codes. */
export const Ineligible = {
  /** Disabled, or pending deletion. */
  notTakingRequests: "not_taking_requests",
  /** No row of it serves the place asked (country, state or city). */
  placeNotServed: "place_not_served",
  /** Its domain allow list does not hold the host, or its deny list does. */
  domainFiltered: "domain_filtered",
  /** Rows serve the place, but none of them is healthy. */
  noHealthyProxy: "no_healthy_proxy",
  /** Blocked by its traffic limit (the runtime section's block has not ended). */
  trafficBlocked: "traffic_blocked",
  /** The project routes by a sequence, and this is not its current connector (or none is). */
  outOfSequence: "out_of_sequence",
  /** A per-domain rule of the project names other connectors for the target's host. */
  notInDomainRule: "not_in_domain_rule",
} as const;
export type Ineligible = (typeof Ineligible)[keyof typeof Ineligible];

/** The connector's healthy rows for the place when it can take the request, else why not. */
export function connectorVerdict(
  snapshot: RoutingSnapshot,
  connector: ConnectorIndex,
  options: UsernameOptions,
  host: string,
  nowMs: number,
): PlaceRows | Ineligible {
  if (!connector.takesRequests) return Ineligible.notTakingRequests;
  const place = connector.rowsFor(options);
  if (place.present === 0) return Ineligible.placeNotServed;
  if (!connector.allowsHost(host)) return Ineligible.domainFiltered;
  if (place.rows.length === 0) return Ineligible.noHealthyProxy;
  if (blockedNow(snapshot, connector.id, nowMs)) return Ineligible.trafficBlocked;
  return place;
}

/**
 * Whether the project's routing lets the connector serve at all: every connector of a project
 * without a sequence; with one, only its current connector (none once it is exhausted).
 */
/**
 * Whether the project's per-domain rules let the connector serve `host`: yes without a rule for
 * it; under a `connectors` rule, only the connectors it names; under `direct`, none (a `refuse`
 * rule is the router's).
 */
export function inDomainRule(
  project: ProjectEntry,
  connector: ConnectorIndex,
  host: string,
): boolean {
  const rules = project.domainRules;
  if (rules === undefined || host === "") return true;
  const rule = domainRuleFor(rules, host);
  if (rule === undefined || rule.action === "refuse") return true;
  // `direct`: no connector serves the host at all.
  return rule.action === "connectors" && rule.connectors.has(connector.id);
}

export function inSequence(project: ProjectEntry, connector: ConnectorIndex): boolean {
  const sequence = project.sequence;
  return sequence === undefined || sequence.currentId === connector.id;
}

/**
 * The current connector of the project's sequence as the snapshot holds it; undefined when the
 * project has no sequence, the sequence is exhausted, or its current connector is not in the
 * feed (a connector of another project counts as not in the feed).
 */
export function sequenceConnector(
  snapshot: RoutingSnapshot,
  project: ProjectEntry,
): ConnectorIndex | undefined {
  const id = project.sequence?.currentId;
  if (id === undefined) return undefined;
  const connector = snapshot.connectors.get(id);
  return connector?.projectId === project.id ? connector : undefined;
}

/** The connector is blocked by its traffic limit at `nowMs`, as the snapshot's runtime says. */
export function blockedNow(snapshot: RoutingSnapshot, connectorId: string, nowMs: number): boolean {
  const blocked = snapshot.runtime.blockedUntilMs;
  if (blocked.size === 0) return false;
  const untilMs = blocked.get(connectorId);
  return untilMs !== undefined && untilMs > nowMs;
}

/**
 * The end of the proxy's quarantine as the snapshot's runtime holds it (epoch ms), or null when
 * it is not resting at `nowMs`. A gateway's router also counts the quarantines its own rate
 * limiter tripped until the feed carries them; readers without a gateway (the api's previews)
 * see these alone.
 */
export function quarantineEndMs(
  snapshot: RoutingSnapshot,
  proxy: ProxyEntry,
  nowMs: number,
): number | null {
  const untilMs = snapshot.runtime.quarantineUntilMs.get(proxy.id, proxy.idHash);
  return untilMs !== undefined && untilMs > nowMs ? untilMs : null;
}

/** The project is blocked by its traffic quota at `nowMs`, as the snapshot's runtime says. */
export function projectBlockedNow(
  snapshot: RoutingSnapshot,
  projectId: string,
  nowMs: number,
): boolean {
  const untilMs = snapshot.runtime.projectBlockedUntilMs.get(projectId);
  return untilMs !== undefined && untilMs > nowMs;
}
