/**
 * The attributor: every worker path that learns where a proxy exits (health checks, vendor
 * syncs, enrich, re-attribution, the sighting ingest) hands what it saw here. A batch reads its
 * rows and what it judges with once, judges each exit by the one rule (shared/geo/attribute.ts),
 * and writes the rows whose location changed in one transaction (proxy-location.ts: forward
 * only, announced once). Rows it could not load (deleted meanwhile) are skipped.
 */
import { eq, inArray } from "drizzle-orm";
import { connectors, projects, proxies, type ProxyLocation } from "../../db/schema.ts";
import {
  attribute,
  type Attribution,
  CountrySource,
  type ExitFacts,
  policyOf,
} from "../../shared/geo/attribute.ts";
import type { GeoLocation } from "../../shared/geo/contract.ts";
import { slugifyCity } from "../../shared/username.ts";
import { read, type ServiceDeps } from "../core/store.ts";
import type { Logger } from "../core/logging.ts";
import type { ControlDeps } from "../core/deps.ts";
import { redisDeadline } from "../core/redis.ts";
import { errorText } from "../../shared/errors.ts";
import { applyLocations, type LocationSave } from "../services/proxy-location.ts";
import type { GeoJudgingSource } from "./judging.ts";
import type { ObservationSink, ObservationSource } from "./observation.ts";

/** An exit seen through a proxy. */
export interface SeenExit {
  proxyId: string;
  /** The exit address; null to judge again what the row already holds (re-attribution). */
  ip: string | null;
  seenAt: Date;
  /** What the echo said of the address, when it answered a location. */
  endpoint?: GeoLocation | null;
  /** The client's session whose exit this was (a pooled slot's, seen by preflight). */
  sessionId?: string | null;
  /** The process that saw it, when another than this one (a gateway). */
  instanceId?: string | null;
}

/** One row judged: what it was, what it is now, whether the write applied. */
export interface Judged {
  proxyId: string;
  connectorId: string;
  projectId: string;
  ip: string | null;
  vendorCountry: string | null;
  attribution: Attribution;
  written: boolean;
  /** The country, region, city or conflict changed. */
  moved: boolean;
}

export interface AttributorOptions {
  deps: Pick<ServiceDeps, "database" | "changes">;
  geo: GeoJudgingSource;
  /** Where each exit seen is recorded (the observation stream); none: not recorded. */
  observations?: ObservationSink;
  /** Where a row whose sources start to disagree is told, under a warn or strict policy. */
  logger?: Logger;
  /**
   * The Redis whose cached preflight verdicts of exits that moved are dropped after each commit
   * (a gateway then checks the new exit at its next request). None: left to expire.
   */
  verdicts?: Pick<ControlDeps, "redis" | "keys" | "settings">;
}

/** What the attributor did since its process started (the worker's /metrics). */
export interface AttributionCounts {
  /** Rows judged. */
  judged: number;
  /** Rows written (their location changed). */
  written: number;
  /** Of those, rows whose country, region, city or conflict moved (announced to the feed). */
  moved: number;
  /** Rows written with sources that disagree on the country. */
  conflicts: number;
}

type Row = Awaited<ReturnType<typeof loadRows>>[number];

function loadRows(deps: Pick<ServiceDeps, "database">, ids: readonly string[]) {
  return read(deps, (db) =>
    db.select({
      id: proxies.id,
      connectorId: proxies.connectorId,
      projectId: proxies.projectId,
      country: proxies.country,
      countrySource: proxies.countrySource,
      vendorCountry: proxies.vendorCountry,
      location: proxies.location,
      locationConflict: proxies.locationConflict,
      locationCheckedAt: proxies.locationCheckedAt,
      projectSources: projects.locationSources,
      projectRule: projects.locationConflictRule,
      projectPolicy: projects.locationPolicy,
    }).from(proxies)
      .innerJoin(connectors, eq(connectors.id, proxies.connectorId))
      .innerJoin(projects, eq(projects.id, proxies.projectId))
      .where(inArray(proxies.id, [...ids])));
}

const citySlug = (city: string | null | undefined) =>
  city === null || city === undefined ? null : slugifyCity(city) ?? null;

/** The vendor's promise: the column, or a country the vendor's list set before it existed. */
function vendorClaim(row: Row): string | null {
  if (row.vendorCountry !== null) return row.vendorCountry;
  return row.countrySource === CountrySource.vendor ? row.country : null;
}

/** Equal locations, whatever order Postgres' jsonb gave their keys. */
function sameLocation(a: ProxyLocation, b: ProxyLocation | null): boolean {
  if (b === null) return false;
  if (a.ip !== b.ip || a.region !== b.region || a.city !== b.city || a.asn !== b.asn) return false;
  const words = b.sources ?? [];
  return a.sources.length === words.length &&
    a.sources.every((word, i) =>
      word.source === words[i].source && word.country === words[i].country &&
      (word.database ?? null) === (words[i].database ?? null)
    );
}

export class Attributor {
  readonly #o: AttributorOptions;
  readonly counts: AttributionCounts = { judged: 0, written: 0, moved: 0, conflicts: 0 };

  constructor(options: AttributorOptions) {
    this.#o = options;
  }

  /**
   * Judges the exits seen and writes the rows they moved; the newest sighting per proxy wins.
   * With `source`, each exit with an address is recorded as an observation of that source (a
   * re-attribution judges again what was seen, and records nothing).
   */
  async apply(seen: readonly SeenExit[], source?: ObservationSource): Promise<Judged[]> {
    if (seen.length === 0) return [];
    // In a batch, a proxy's newest sighting is the one judged.
    const newest = new Map<string, SeenExit>();
    for (const exit of seen) {
      const held = newest.get(exit.proxyId);
      if (held === undefined || held.seenAt.getTime() <= exit.seenAt.getTime()) {
        newest.set(exit.proxyId, exit);
      }
    }
    const [rows, judging] = await Promise.all([
      loadRows(this.#o.deps, [...newest.keys()]),
      this.#o.geo.judging(),
    ]);
    const judged: Judged[] = [];
    const saves: LocationSave[] = [];
    for (const row of rows) {
      const exit = newest.get(row.id)!;
      const ip = exit.ip ?? row.location?.ip ?? null;
      const vendorCountry = vendorClaim(row);
      const facts: ExitFacts = {
        ip,
        vendorCountry,
        manualCountry: row.countrySource === CountrySource.manual ? row.country : null,
        endpoint: exit.endpoint ?? null,
      };
      const policy = policyOf(judging.policy, row.projectSources, row.projectRule);
      const attribution = attribute(facts, policy, judging.stack);
      const location: ProxyLocation = {
        ip,
        region: attribution.region,
        city: attribution.city,
        asn: attribution.asn,
        sources: attribution.sources,
      };
      const moved = attribution.country !== row.country ||
        attribution.region !== (row.location?.region ?? null) ||
        citySlug(attribution.city) !== citySlug(row.location?.city) ||
        attribution.conflict !== row.locationConflict;
      const same = !moved && attribution.countrySource === row.countrySource &&
        sameLocation(location, row.location);
      judged.push({
        proxyId: row.id,
        connectorId: row.connectorId,
        projectId: row.projectId,
        ip,
        vendorCountry,
        attribution,
        written: false,
        moved,
      });
      // Seeing the same exit judged the same way again writes nothing.
      if (same) continue;
      saves.push({
        id: row.id,
        connectorId: row.connectorId,
        loadedCheckedAt: row.locationCheckedAt,
        loadedCountrySource: row.countrySource,
        seenAt: exit.seenAt,
        country: attribution.country,
        countrySource: attribution.countrySource,
        conflict: attribution.conflict,
        location,
        routingChanged: moved,
      });
    }
    if (source !== undefined) this.#observe(judged, newest, source);
    const written = await applyLocations(this.#o.deps, saves);
    for (const entry of judged) entry.written = written.has(entry.proxyId);
    this.#count(judged, rows);
    await this.#dropVerdicts(judged, rows);
    return judged;
  }

  /** Drops the cached preflight verdicts of the written rows whose exit moved to another IP. */
  async #dropVerdicts(judged: readonly Judged[], rows: readonly Row[]): Promise<void> {
    const verdicts = this.#o.verdicts;
    if (verdicts === undefined) return;
    const before = new Map(rows.map((row) => [row.id, row.location?.ip ?? null]));
    const keys = judged.filter((entry) => {
      const was = before.get(entry.proxyId) ?? null;
      return entry.written && was !== null && entry.ip !== null && entry.ip !== was;
    }).map((entry) => verdicts.keys.preflightVerdict(entry.projectId, entry.proxyId));
    if (keys.length === 0) return;
    try {
      await redisDeadline(
        verdicts.settings.redisRequestTimeoutMs,
        () => verdicts.redis.del(...keys),
      );
    } catch (error) {
      // They expire with the session TTL: a gateway trusts them a while longer, no more.
      this.#o.logger?.warn(
        { verdicts: keys.length, error: errorText(error) },
        "Preflight verdicts of exits that moved not dropped; they expire on their own",
      );
    }
  }

  #count(judged: readonly Judged[], rows: readonly Row[]): void {
    const c = this.counts;
    c.judged += judged.length;
    const before = new Map(rows.map((row) => [row.id, row]));
    for (const entry of judged) {
      if (!entry.written) continue;
      c.written++;
      if (entry.moved) c.moved++;
      if (!entry.attribution.conflict) continue;
      c.conflicts++;
      const row = before.get(entry.proxyId)!;
      // A conflict is news once: told when it starts, where the policy cares.
      if (row.locationConflict || row.projectPolicy === "off") continue;
      this.#o.logger?.warn(
        {
          proxy_id: entry.proxyId,
          connector_id: entry.connectorId,
          project_id: entry.projectId,
          ip: entry.ip,
          country: entry.attribution.country,
          sources: entry.attribution.sources,
          location_policy: row.projectPolicy,
        },
        row.projectPolicy === "strict"
          ? "Proxy's location sources disagree: out of routing under the strict location policy"
          : "Proxy's location sources disagree",
      );
    }
  }

  #observe(
    judged: readonly Judged[],
    newest: ReadonlyMap<string, SeenExit>,
    source: ObservationSource,
  ): void {
    const sink = this.#o.observations;
    if (sink === undefined) return;
    for (const entry of judged) {
      const exit = newest.get(entry.proxyId)!;
      if (exit.ip === null) continue;
      const a = entry.attribution;
      sink.record({
        observedAt: exit.seenAt.getTime(),
        ip: exit.ip,
        projectId: entry.projectId,
        connectorId: entry.connectorId,
        proxyId: entry.proxyId,
        source,
        sessionId: exit.sessionId ?? null,
        instanceId: exit.instanceId ?? null,
        country: a.country,
        region: a.region,
        city: a.city,
        asn: a.asn,
        claimedCountry: entry.vendorCountry,
        sources: a.sources.filter((w) => w.country !== null && w.country === a.country)
          .map((w) => w.database ?? w.source),
      });
    }
  }
}
