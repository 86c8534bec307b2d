/**
 * Preflight's check of one routed request: is the exit of the proxy the router chose where the
 * request requires? The requirement is the client's `-cc-`, else the country the row was
 * promised (a vendor's row) or set by hand; a country attribution merely observed is none.
 *
 * The answer comes from the verdict cache in Redis (preflight-cache.ts) when it holds one that
 * speaks to this requirement: a fixed exit's place answers any requirement, a vendor row's
 * (whose exit belongs to the session, not the row) only the one it was judged for. Otherwise one
 * echo goes through the proxy (preflight-echo.ts), and the exit is judged by the one rule of
 * attribution (shared/geo/attribute.ts) with the project's sources: the gateway's databases
 * (geo/contract.ts), the vendor's claim and the echo's own word; where no database is open, by
 * the echo's own answer alone. The verdict is cached for the project's session TTL; an echo
 * that failed, or an exit nothing placed, for 30 s, and the request goes on unchecked: preflight
 * never blocks traffic for want of an answer. Concurrent requests needing the same echo on this
 * isolate share it.
 *
 * Each echo that answered through a row with an exit of its own is a sighting for the workers
 * (sightings.ts), who judge it again and write the row.
 */
import { DEFAULT_FEED_GEO, type FeedProject } from "../../shared/feed/models.ts";
import {
  attribute,
  type AttributionPolicy,
  DEFAULT_POLICY,
  LocationSource,
  policyOf,
} from "../../shared/geo/attribute.ts";
import type { Sighting, SightingJudgement } from "../../shared/geo/sighting-wire.ts";
import { ConnectorKind } from "../../shared/roles.ts";
import type {
  MaybePromise,
  UpstreamChoice,
  UsernameOptions,
} from "../../shared/routing/contract.ts";
import type { ConnectorIndex, RoutingSnapshot } from "../../shared/routing/snapshot.ts";
import type { GeoView } from "./contract.ts";
import {
  type CachedVerdict,
  FAILED_ECHO_TTL_SECONDS,
  type VerdictCache,
} from "./preflight-cache.ts";
import { CheckResult, type PreflightCounters } from "./preflight-counters.ts";
import type { EchoAnswer } from "./preflight-echo.ts";
import type { SightingRecorder } from "./sightings.ts";

/** What a check found. */
export type Verdict =
  /** Nothing to check: the request requires no country. */
  | { result: "unchecked" }
  | { result: typeof CheckResult.pass }
  /** Nothing could say where the exit is; the request goes on. */
  | { result: typeof CheckResult.unknown }
  | {
    result: typeof CheckResult.mismatch;
    requirement: string;
    observed: string;
    ip: string | null;
    /** A vendor session slot whose own claim the exit contradicts: the worker rotates it. */
    rotates: boolean;
  };

/** A verdict of a check that ran (one with a requirement). */
type Checked = Exclude<Verdict, { result: "unchecked" }>;

const UNCHECKED: Verdict = Object.freeze({ result: "unchecked" });
const PASS: Checked = Object.freeze({ result: CheckResult.pass });
const UNKNOWN: Checked = Object.freeze({ result: CheckResult.unknown });

/** The echo through one upstream, within a deadline. */
export type Echo = (upstream: UpstreamChoice, timeoutMs: number) => Promise<EchoAnswer>;

export interface PreflightCheckerOptions {
  cache: VerdictCache;
  echo: Echo;
  /** The databases in force; undefined where this isolate opens none (the echo's word only). */
  geo?: GeoView;
  sightings?: SightingRecorder;
  counters: PreflightCounters;
  /** Who saw a sighting: `<instance>:<isolate>`. */
  instance: string;
  nowMs?: () => number;
}

export interface CheckRequest {
  snapshot: RoutingSnapshot;
  project: FeedProject;
  options: UsernameOptions;
  upstream: UpstreamChoice;
  /** The echo's whole deadline: the request's connect timeout. */
  timeoutMs: number;
}

/** What the row is, as preflight tells rows apart. */
interface RowFacts {
  /** The country a vendor promised for it; null for others and for a row of no country. */
  claim: string | null;
  /**
   * A row of Postgres whose exit is its own (not rendered per request, not a provider-API
   * pool's entry, which lives in Redis alone): its echo is a sighting the workers write.
   */
  ownExit: boolean;
  /** A vendor row: its verdict answers only the requirement it was judged for. */
  perRequirement: boolean;
  /** A vendor session slot (the pool's, not a dynamic row): the worker may rotate it. */
  slot: boolean;
  requirement: string | undefined;
}

/** Feed rows by id, per connector section (built once, when a hand-set country is asked). */
const manualRows = new WeakMap<object, Map<string, boolean>>();

function setByHand(index: ConnectorIndex, proxyId: string): boolean {
  let rows = manualRows.get(index.section);
  if (rows === undefined) {
    rows = new Map();
    for (const row of index.section.proxies) {
      if (row.country_manual === true) rows.set(row.id, true);
    }
    manualRows.set(index.section, rows);
  }
  return rows.has(proxyId);
}

function rowFacts(index: ConnectorIndex, upstream: UpstreamChoice, options: UsernameOptions) {
  const row = index.proxy(upstream.proxyId);
  const vendor = index.connector.kind === ConnectorKind.vendor;
  const dynamic = index.renderer !== undefined;
  const country = row?.country ?? null;
  const claim = vendor && !dynamic ? country : null;
  const manual = !vendor && country !== null && setByHand(index, upstream.proxyId) ? country : null;
  const facts: RowFacts = {
    claim,
    ownExit: !dynamic && index.connector.kind !== ConnectorKind.providerApi,
    perRequirement: vendor,
    slot: vendor && !dynamic && index.provider?.mode === "session",
    requirement: options.country ?? claim ?? manual ?? undefined,
  };
  return facts;
}

/** The install's policy as the feed's global section has it, then the project's own. */
function projectPolicy(snapshot: RoutingSnapshot, project: FeedProject): AttributionPolicy {
  const geo = snapshot.sections.global.geo ?? DEFAULT_FEED_GEO;
  const install = policyOf(DEFAULT_POLICY, geo.sources, geo.conflict_rule);
  return policyOf(install, project.location_sources, project.location_conflict_rule);
}

function verdictOf(
  facts: RowFacts,
  requirement: string,
  observed: string | null,
  ip: string | null,
): Checked {
  if (observed === null) return UNKNOWN;
  if (observed === requirement) return PASS;
  return {
    result: CheckResult.mismatch,
    requirement,
    observed,
    ip,
    rotates: facts.slot && facts.claim !== null && observed !== facts.claim,
  };
}

export class PreflightChecker {
  readonly #o: PreflightCheckerOptions;
  readonly #nowMs: () => number;
  /** Echoes under way on this isolate, by project, proxy and requirement. */
  readonly #echoing = new Map<string, Promise<Checked>>();

  constructor(options: PreflightCheckerOptions) {
    this.#o = options;
    this.#nowMs = options.nowMs ?? Date.now;
  }

  check(request: CheckRequest): MaybePromise<Verdict> {
    const index = request.snapshot.connectors.get(request.upstream.connectorId);
    if (index === undefined) return UNCHECKED;
    const facts = rowFacts(index, request.upstream, request.options);
    const requirement = facts.requirement;
    if (requirement === undefined) return UNCHECKED;
    return this.#judged(request, facts, requirement).then((verdict) => {
      this.#o.counters.checks[verdict.result]++;
      return verdict;
    });
  }

  async #judged(request: CheckRequest, facts: RowFacts, requirement: string): Promise<Checked> {
    const { project, upstream } = request;
    const cached = await this.#o.cache.read(project.id, upstream.proxyId);
    const answer = cached === undefined ? undefined : this.#fromCache(cached, facts, requirement);
    if (answer !== undefined) {
      this.#o.counters.cacheHits++;
      return answer;
    }
    const key = `${project.id}:${upstream.proxyId}:${requirement}`;
    let echoing = this.#echoing.get(key);
    if (echoing === undefined) {
      echoing = this.#echo(request, facts, requirement).finally(() => this.#echoing.delete(key));
      this.#echoing.set(key, echoing);
    }
    return await echoing;
  }

  /** What a cached verdict says of this requirement; undefined when it cannot say. */
  #fromCache(cached: CachedVerdict, facts: RowFacts, requirement: string): Checked | undefined {
    // An echo that failed lately: the request goes on unchecked until the next try.
    if (cached.failed) return UNKNOWN;
    if (cached.requirement === requirement) {
      return verdictOf(facts, requirement, cached.country, cached.ip);
    }
    // A fixed exit is where it is whatever was asked; a vendor's answers the session asked.
    if (!facts.perRequirement && cached.country !== null) {
      return verdictOf(facts, requirement, cached.country, cached.ip);
    }
    return undefined;
  }

  async #echo(request: CheckRequest, facts: RowFacts, requirement: string): Promise<Checked> {
    const { snapshot, project, upstream } = request;
    const { cache, counters } = this.#o;
    let echoed: EchoAnswer;
    try {
      echoed = await this.#o.echo(upstream, request.timeoutMs);
      counters.echoesAnswered++;
    } catch {
      counters.echoesFailed++;
      cache.write(project.id, upstream.proxyId, {
        requirement,
        country: null,
        ip: null,
        failed: true,
      }, FAILED_ECHO_TTL_SECONDS);
      return UNKNOWN;
    }
    const observedAt = this.#nowMs();
    const judged = this.#judge(snapshot, project, facts, echoed);
    const observed = judged.country;
    // An exit nothing placed may be placed by a database update: it is asked again soon.
    const ttl = observed === null ? FAILED_ECHO_TTL_SECONDS : project.session_ttl_seconds;
    cache.write(project.id, upstream.proxyId, {
      requirement,
      country: observed,
      ip: echoed.ip,
      failed: false,
    }, ttl);
    if (facts.ownExit) {
      const sighting: Sighting = {
        observedAt,
        projectId: project.id,
        connectorId: upstream.connectorId,
        proxyId: upstream.proxyId,
        ip: echoed.ip,
        instanceId: this.#o.instance,
        requirement,
        mode: project.location_preflight,
        judged,
        endpoint: echoed.place,
      };
      this.#o.sightings?.record(sighting);
    }
    return verdictOf(facts, requirement, observed, echoed.ip);
  }

  /**
   * Where the exit is: by attribution's rule over the databases in force, the vendor's claim and
   * the echo's word, in the project's order. Without databases (an isolate that opens none, or
   * before the first have opened) the echo's own answer is all there is: judging the vendor's
   * claim against it alone would let the claim win every tie.
   */
  #judge(
    snapshot: RoutingSnapshot,
    project: FeedProject,
    facts: RowFacts,
    echoed: EchoAnswer,
  ): SightingJudgement {
    const stack = this.#o.geo?.stack();
    if (stack === undefined) {
      const country = echoed.place?.country ?? null;
      return { country, source: country === null ? null : LocationSource.endpoint, database: null };
    }
    const attribution = attribute(
      { ip: echoed.ip, vendorCountry: facts.claim, manualCountry: null, endpoint: echoed.place },
      projectPolicy(snapshot, project),
      stack,
    );
    const database = attribution.sources.find((word) => word.database !== undefined);
    return {
      country: attribution.country,
      source: attribution.countrySource,
      database: database?.database ?? null,
    };
  }
}
