/**
 * The routing preview: which connectors and proxies of one project would serve a request with a
 * given username (and destination), and why the others would not, answered by the gateway's own
 * routing code over the controller's own compile of that one project. Nothing here restates a
 * routing rule: the username is read by the gateway's grammar (shared/username.ts), each
 * connector is judged by the router's eligibility test (shared/routing/eligibility.ts), and the
 * proxy chosen is one `acquire` of a router (shared/routing/router.ts) built on a snapshot of the
 * compile (shared/routing/snapshot.ts), as a gateway that has served nothing would answer it.
 *
 * Read-only: the compile, pools and runtime section are read as project-routing.ts reads them
 * for every reader of "who would serve"; sticky sessions are read from Redis but never written;
 * the router's dispatch counts are its own and thrown away with it. Without Redis the preview is
 * answered without runtime state (`runtime_included: false`), as the other views are.
 */
import { projectRouting, type ProjectRoutingDeps } from "./project-routing.ts";
import { errorText, ValidationError } from "../../shared/errors.ts";
import { parseUsername } from "../../shared/username.ts";
import {
  type Client,
  isRefusal,
  type Refusal,
  type Target,
  type UsernameOptions,
} from "../../shared/routing/contract.ts";
import {
  connectorVerdict,
  inDomainRule,
  Ineligible,
  inSequence,
  quarantineEndMs,
} from "../../shared/routing/eligibility.ts";
import {
  type ConnectorIndex,
  type ProjectEntry,
  type ProxyEntry,
  type RoutingSnapshot,
} from "../../shared/routing/snapshot.ts";
import { normaliseHost } from "../../shared/net/host.ts";
import { domainRuleFor } from "../../shared/routing/domain-rules.ts";

export type PreviewDeps = ProjectRoutingDeps;

/** Proxies listed at most; `total` counts them all. */
export const PREVIEW_PROXY_LIMIT = 50;

/** What the caller asks: a client's username and, optionally, its destination. */
export interface PreviewInput {
  username: string;
  target?: { host: string; port: number };
}

export interface PreviewConnector {
  id: string;
  name: string;
  weight: number;
  eligible: boolean;
  /** The router's reason code (shared/routing/eligibility.ts), null when eligible. */
  code: Ineligible | null;
  reason: string | null;
  /** Its proxies serving the place asked, whatever their health (leaving ones left out). */
  proxies_for_place: number;
  /** Of those, the healthy ones. */
  healthy: number;
  /** Of the healthy ones, those resting in a quarantine now. */
  quarantined: number;
  /** The end of its traffic block (ISO 8601), when blocked. */
  blocked_until: string | null;
}

export interface PreviewProxy {
  id: string;
  connector_id: string;
  scheme: string;
  /** `host:port` only: a proxy's login never leaves the feed. */
  address: string;
  country: string | null;
  /** Where attribution saw a fixed exit (ISO 3166-2, a city slug); null when unknown. */
  region: string | null;
  city: string | null;
  /** Its sources disagree on its country (out of routing under a strict location policy). */
  location_conflict: boolean;
  status: string;
  quarantined: boolean;
  quarantined_until: string | null;
}

export interface PreviewRefusal {
  status: number;
  proxy_status: string;
  reason: string;
  rejection: string | null;
}

export interface RoutingPreview {
  project_id: string;
  strategy: string;
  username: {
    user: string;
    country: string | null;
    state: string | null;
    city: string | null;
    session_id: string | null;
    session_minutes: number | null;
  };
  target: { host: string; port: number } | null;
  connectors: PreviewConnector[];
  proxies: { items: PreviewProxy[]; total: number };
  /** The project's connector sequence as the feed carries it: only its current one serves. */
  sequence: {
    connector_ids: string[];
    current_index: number;
    current_connector_id: string | null;
    exhausted: boolean;
  } | null;
  chosen: PreviewProxy | null;
  refusal: PreviewRefusal | null;
  /** False when Redis did not answer: no quarantine, block or sticky binding was seen. */
  runtime_included: boolean;
  compiled_at: string;
}

/**
 * Without a target the destination is one no domain rule names: a connector with an allow list
 * then shows as filtered, one with a deny list as open, which is what any unlisted site gets.
 */
const NO_TARGET: Target = { host: "", port: 443 };

export async function previewRouting(
  deps: PreviewDeps,
  projectId: string,
  input: PreviewInput,
): Promise<RoutingPreview> {
  const { router, snapshot, project, nowMs, runtimeIncluded, compiledAt } = await projectRouting(
    deps,
    projectId,
    {
      stickyReads: true,
      unavailable: (part, error) =>
        deps.logger.warn(
          { what: "routing preview", error: errorText(error) },
          part === "pools"
            ? "Provider-API pools unavailable, their connectors shown without proxies"
            : "Runtime state unavailable, shown without it",
        ),
    },
  );

  const options = readUsername(input.username, project.username);
  const target: Target = input.target ?? NO_TARGET;
  const host = normaliseHost(target.host);

  const previewConnectors: PreviewConnector[] = [];
  const candidates: PreviewProxy[] = [];
  for (const connector of snapshot.connectorsByProject.get(projectId) ?? []) {
    // A domain rule's and a sequence's other connectors are out before any test, as in the
    // router.
    const verdict = !inDomainRule(project, connector, host)
      ? Ineligible.notInDomainRule
      : inSequence(project, connector)
      ? connectorVerdict(snapshot, connector, options, host, nowMs)
      : Ineligible.outOfSequence;
    const place = connector.rowsFor(options);
    let quarantined = 0;
    for (const proxy of place.rows) {
      if (quarantineEndMs(snapshot, proxy, nowMs) !== null) quarantined++;
    }
    const blockedUntilMs = snapshot.runtime.blockedUntilMs.get(connector.id);
    const code = typeof verdict === "string" ? verdict : null;
    previewConnectors.push({
      id: connector.id,
      name: connector.connector.name,
      weight: connector.weight,
      eligible: code === null,
      code,
      reason: code === null
        ? null
        : describe(code, project, connector, options, host, place.present),
      proxies_for_place: place.present,
      healthy: place.rows.length,
      quarantined,
      blocked_until: blockedUntilMs !== undefined && blockedUntilMs > nowMs
        ? new Date(blockedUntilMs).toISOString()
        : null,
    });
    if (typeof verdict !== "string") {
      for (const proxy of verdict.rows) candidates.push(presentProxy(snapshot, proxy, nowMs));
    }
  }

  const client: Client = { projectId, options };
  let chosen: PreviewProxy | null = null;
  let refusal: Refusal | undefined = router.quotaRefusal(projectId);
  if (refusal === undefined) {
    const result = await router.acquire(client, target);
    if (isRefusal(result)) refusal = result;
    else {
      const entry = snapshot.connectors.get(result.upstream.connectorId)
        ?.proxy(result.upstream.proxyId);
      // A client that left is not the proxy's failure: the throw-away counts record nothing.
      result.release({ ok: false, phase: "client" });
      if (entry !== undefined) chosen = presentProxy(snapshot, entry, nowMs);
    }
  }

  return {
    project_id: projectId,
    strategy: project.strategy,
    username: {
      user: options.user,
      country: options.country ?? null,
      state: options.state ?? null,
      city: options.city ?? null,
      session_id: options.sessionId ?? null,
      session_minutes: options.sessionMinutes ?? null,
    },
    target: input.target ?? null,
    connectors: previewConnectors,
    proxies: { items: candidates.slice(0, PREVIEW_PROXY_LIMIT), total: candidates.length },
    sequence: project.sequence === undefined ? null : {
      connector_ids: [...project.sequence.feed.connectors],
      current_index: project.sequence.feed.current,
      current_connector_id: project.sequence.currentId ?? null,
      exhausted: project.sequence.exhausted,
    },
    chosen,
    refusal: refusal === undefined ? null : {
      status: refusal.status,
      proxy_status: refusal.proxyStatus,
      reason: refusal.reason,
      rejection: refusal.rejection ?? null,
    },
    runtime_included: runtimeIncluded,
    compiled_at: new Date(compiledAt).toISOString(),
  };
}

/**
 * The username's options as the gateway reads them: a bad option is a 422 with the sentence the
 * gateway answers 400 with; the project part must be this project's username, as the gateway
 * finds the project by it.
 */
function readUsername(username: string, projectUsername: string): UsernameOptions {
  const parsed = parseUsername(username);
  if (!parsed.ok) {
    throw new ValidationError([{ field: "body.username", message: parsed.message }]);
  }
  if (parsed.options.user !== projectUsername) {
    throw new ValidationError([{
      field: "body.username",
      message: `must start with this project's username, ${projectUsername} (such as ` +
        `${projectUsername}-cc-us), not ${parsed.options.user}`,
    }]);
  }
  return parsed.options;
}

/** A proxy without its login: the feed's row carries the filled credentials, never shown. */
function presentProxy(snapshot: RoutingSnapshot, proxy: ProxyEntry, nowMs: number): PreviewProxy {
  const untilMs = quarantineEndMs(snapshot, proxy, nowMs);
  const host = proxy.host.includes(":") ? `[${proxy.host}]` : proxy.host;
  return {
    id: proxy.id,
    connector_id: proxy.connectorId,
    scheme: proxy.scheme,
    address: `${host}:${proxy.port}`,
    country: proxy.country,
    region: proxy.region,
    city: proxy.city,
    location_conflict: proxy.conflict,
    status: proxy.status,
    quarantined: untilMs !== null,
    quarantined_until: untilMs === null ? null : new Date(untilMs).toISOString(),
  };
}

/** Why no row of the connector serves the place asked: the location rules, in the router's order. */
function describePlace(
  connector: ConnectorIndex,
  options: UsernameOptions,
): string {
  const country = options.country;
  if (country === undefined) {
    return connector.strict && connector.proxies.some((p) => p.conflict)
      ? "The connector's proxies in routing all have sources that disagree on their country " +
        "(location_policy strict)"
      : "The connector has no proxy in routing";
  }
  if (connector.declared !== null && !connector.declared.has(country)) {
    return `The connector serves only ${[...connector.declared].sort().join(", ")}, not ${country}`;
  }
  const inCountry = connector.proxies.filter((p) =>
    p.country === country || (p.country === null && connector.declared !== null)
  );
  if (inCountry.length === 0) {
    return connector.declared === null && connector.proxies.some((p) => p.country === null)
      ? `The connector has no proxy seen in ${country}; proxies of unknown country serve a ` +
        "country only through the connector's list"
      : `The connector has no proxy in ${country}`;
  }
  if (options.state !== undefined || options.city !== undefined) {
    const place = [
      options.state === undefined ? undefined : `state ${options.state}`,
      options.city === undefined ? undefined : `city ${options.city}`,
    ].filter((part) => part !== undefined).join(", ");
    const located = inCountry.filter((p) => p.region !== null || p.city !== null).length;
    return `No proxy of the connector was seen in ${country}, ${place} (${located} of its ` +
      `${inCountry.length} in ${country} have a known state or city): a request is never ` +
      "widened to its country";
  }
  if (connector.strict && inCountry.every((p) => p.conflict)) {
    return `Its proxies in ${country} have sources that disagree on their country, and the ` +
      `project's location_policy is strict`;
  }
  return `The connector has no proxy in ${country}`;
}

/** The router's reason code in words, with what of the connector made it so. */
function describe(
  code: Ineligible,
  project: ProjectEntry,
  connector: ConnectorIndex,
  options: UsernameOptions,
  host: string,
  present: number,
): string {
  const feed = connector.connector;
  switch (code) {
    case Ineligible.notTakingRequests:
      return feed.pending_deletion ? "The connector is being deleted" : "The connector is disabled";
    case Ineligible.placeNotServed:
      return describePlace(connector, options);
    case Ineligible.domainFiltered:
      if (feed.domain_allow.length !== 0) {
        return host === ""
          ? "The connector serves only the domains of its allow list; give a target to check one"
          : `The connector's domain allow list does not hold ${host}`;
      }
      return `The connector's domain deny list holds ${host}`;
    case Ineligible.noHealthyProxy:
      return `None of the connector's ${present} proxies for this place is healthy`;
    case Ineligible.trafficBlocked:
      return "The connector is blocked by its traffic limit";
    case Ineligible.outOfSequence: {
      const sequence = project.sequence;
      if (sequence?.exhausted === true) {
        return "The project's connector sequence is exhausted: no connector serves";
      }
      const at = sequence?.feed.connectors.indexOf(connector.id) ?? -1;
      const place = at === -1
        ? "The connector is not in the project's sequence"
        : `The connector is ${at + 1} of ${sequence?.length} in the project's sequence`;
      return `${place}; only its current one (${sequence?.position} of ${sequence?.length}) ` +
        "serves";
    }
    case Ineligible.notInDomainRule: {
      const rule = project.domainRules === undefined
        ? undefined
        : domainRuleFor(project.domainRules, host);
      const patterns = rule?.domains.join(", ") ?? "?";
      return rule?.action === "direct"
        ? `The project's domain rule for ${host} (${patterns}) sends it direct, through no upstream`
        : `The project's domain rule for ${host} (${patterns}) names other connectors`;
    }
  }
}
