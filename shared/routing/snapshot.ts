/**
 * The routing snapshot: one applied feed, indexed for the request path and never changed after it
 * is swapped into the router, so a request that started on one snapshot finishes on it.
 *
 * It holds the projects by username and by id, one index per connector (its rows parsed once, the
 * healthy rows per place worked out on first ask and kept for the life of the index), and the
 * runtime section's quarantines and traffic blocks as maps.
 *
 * Building is incremental: a section object the follower carried over keeps its index (the
 * follower hands unchanged sections over by identity), so an update of one connector costs that
 * connector, a runtime-only update costs no connector, and a changed global section rebuilds the
 * projects, and the vendor connectors too when the descriptors it carries changed.
 *
 * A vendor connector's provider is built from its section's config and credential by the same
 * registry every process uses; one whose rows are rendered per request (dynamic sessions) serves
 * every place its templates can write, within its declared countries.
 */
import {
  type CompiledDomainRule,
  compileDomainRules,
  type DomainRuleIssue,
  readDomainRules,
} from "./domain-rules.ts";
import {
  type BlockRule,
  compileBlocking,
  type CompiledBlocking,
  readBlockRule,
  readRetryPolicy,
  type RetryPolicy,
  type RuleIssue,
} from "../blocking/rules.ts";
import { type EscalationPolicy, readEscalationPolicy } from "../blocking/escalation.ts";
import { normaliseHost } from "../net/host.ts";
import type {
  ConnectorSection,
  FeedConnector,
  FeedProject,
  FeedSections,
  FeedSequence,
  RuntimeSection,
} from "../feed/models.ts";
import { normaliseCountry } from "../countries.ts";
import { slugifyCity } from "../username.ts";
import { CidrSet, CidrTable, formatCidr, openToAnyone, parseCidrs } from "../net/cidr-set.ts";
import { MAX_RETRIES_LIMIT, type ProxyStatus, type Strategy } from "../roles.ts";
import type {
  AuthResult,
  Client,
  Interception,
  UpstreamChoice,
  UsernameOptions,
} from "./contract.ts";
import { bypassIndex } from "../tls/bypass.ts";
import { Dispatch } from "./dispatch.ts";
import { DeadlineTable, hashId } from "./id-table.ts";
import type { CoreLog } from "./log.ts";
import type { DescriptorProvider } from "../vendors/provider.ts";
import { ProviderRegistry, storedDescriptors } from "../vendors/registry.ts";

/**
 * One row as the request path reads it. It is also the `UpstreamChoice` an allocation hands the
 * socket layer (one object per row, built once: fewer objects make a large update cheaper).
 */
export interface ProxyEntry extends UpstreamChoice {
  readonly id: string;
  /** `hashId(id)`, kept so runtime lookups (quarantines) hash no string per request. */
  readonly idHash: number;
  /** The proxy's dispatch slot: stable while the proxy stays in the feed. */
  readonly slot: number;
  /** The slot's epoch when the row was built: a reservation checks it is still the row's. */
  readonly slotEpoch: number;
  readonly connectorSlot: number;
  /** ISO 3166-1 alpha-2 when known. */
  readonly country: string | null;
  /** Where attribution saw a fixed exit: ISO 3166-2 (`DE-BE`) and a city slug; null: unknown. */
  readonly region: string | null;
  readonly city: string | null;
  /** Attribution's sources disagree on its country: out of routing under `strict`. */
  readonly conflict: boolean;
  readonly status: ProxyStatus;
  /** At most this many transfers at once on this gateway; 0 for no limit. */
  readonly maxConcurrency: number;
  /** No new allocation from this time on (epoch ms; a provider-API proxy's); Infinity: none. */
  readonly usableUntilMs: number;
  /** A dynamic-sessions row: its credentials are rendered per request by this provider. */
  readonly renderer?: DescriptorProvider;
}

/**
 * A connector's rows that can serve one place; also what strategies receive as one of their
 * choices, so a request builds no list of its own.
 */
export interface PlaceRows {
  readonly connector: ConnectorIndex;
  /** The healthy rows: the candidates before quarantines, exclusions and limits. */
  readonly rows: readonly ProxyEntry[];
  /** Rows serving the place whatever their health (draining and terminating ones left out). */
  readonly present: number;
}

/**
 * The provider of a vendor connector; undefined for every other connector, and for one whose
 * provider cannot be built here (its rows are served as the feed has them, logged).
 */
function vendorProvider(
  section: ConnectorSection,
  registry: ProviderRegistry | undefined,
  log: CoreLog | undefined,
): DescriptorProvider | undefined {
  if (section.config === null || registry === undefined) return undefined;
  const connector = section.connector;
  const built = registry.descriptorProvider(
    { provider: connector.provider, config: section.config },
    section.credential,
    true,
  );
  if (!built.ok) {
    log?.warn(
      "Connector's provider cannot be built here: its rows are routed as the feed has them",
      {
        connector: connector.id,
        provider: connector.provider,
        error: built.message,
      },
    );
    return undefined;
  }
  return built.provider;
}

/** Client-chosen places (state, city) cached per connector at most this many. */
const MAX_CACHED_PLACES = 256;

/** A row's city as the index keeps it: the feed's slug, normalised again if it is not one. */
function rowCity(city: string | null | undefined): string | null {
  if (city === null || city === undefined || city === "") return null;
  return /^[a-z0-9_]+$/.test(city) ? city : slugifyCity(city) ?? null;
}

/** Rows on their way out: neither served nor counted as "down". */
const isLeaving = (status: ProxyStatus) => status === "draining" || status === "terminating";

/**
 * A row's country as the index keeps it. The compiler stores ISO codes upper case, so the common
 * case is checked by character (no lookup per row); anything else goes through normaliseCountry.
 */
function rowCountry(country: string | null): string | null {
  if (country === null) return null;
  if (country.length === 2) {
    const a = country.charCodeAt(0);
    const b = country.charCodeAt(1);
    if (a >= 65 && a <= 90 && b >= 65 && b <= 90 && !(a === 85 && b === 75) /* UK */) {
      return country;
    }
  }
  return normaliseCountry(country) ?? country;
}

/** The place a request asks for, as the key of a connector's place cache. */
export function placeKey(options: UsernameOptions): string {
  if (options.country === undefined) return "";
  if (options.state === undefined && options.city === undefined) return options.country;
  return `${options.country}/${options.state ?? ""}/${options.city ?? ""}`;
}

function domainRule(rule: string): string {
  let r = normaliseHost(rule.trim());
  if (r.startsWith("*.")) r = r.slice(2);
  else if (r.startsWith(".")) r = r.slice(1);
  return r;
}

function matchesRule(host: string, rules: readonly string[]): boolean {
  for (const rule of rules) {
    if (
      host === rule ||
      (host.length > rule.length && host.endsWith(rule) &&
        host.charCodeAt(host.length - rule.length - 1) === 46 /* . */)
    ) {
      return true;
    }
  }
  return false;
}

/** One connector section, parsed once for the life of the section object. */
export class ConnectorIndex {
  readonly section: ConnectorSection;
  readonly connector: FeedConnector;
  readonly id: string;
  readonly projectId: string;
  readonly slot: number;
  /** 1-100: its share among the eligible connectors of its project. */
  readonly weight: number;
  /** Enabled and not pending deletion. */
  readonly takesRequests: boolean;
  /** The countries it declares; null when it declares none (it then serves any). */
  readonly declared: ReadonlySet<string> | null;
  /** What a client hears while the connector is blocked by its traffic limit. */
  readonly limitStatus: 429 | 509;
  /** Its traffic action is `interrupt`: a block also stops the transfers running through it. */
  readonly interrupts: boolean;
  /** It has a traffic limit: metering asks for a decision when it carries bytes. */
  readonly trafficLimited: boolean;
  readonly proxies: readonly ProxyEntry[];
  /** Its project's location policy is `strict`: rows whose sources disagree do not serve. */
  readonly strict: boolean;
  /** Rows for a request that names no place. */
  readonly anyPlace: PlaceRows;
  private readonly allow: readonly string[];
  private readonly deny: readonly string[];
  private readonly noPlace: PlaceRows;
  private readonly places = new Map<string, PlaceRows>();
  private byId: Map<string, ProxyEntry> | undefined;

  /** The provider a dynamic-sessions connector renders its row with, per request. */
  readonly renderer: DescriptorProvider | undefined;
  /** A vendor connector's provider, when it can be built here. */
  readonly provider: DescriptorProvider | undefined;

  constructor(
    section: ConnectorSection,
    dispatch: Dispatch,
    registry?: ProviderRegistry,
    log?: CoreLog,
    strict = false,
  ) {
    const connector = section.connector;
    this.strict = strict;
    this.provider = vendorProvider(section, registry, log);
    this.renderer = this.provider?.dynamic === true ? this.provider : undefined;
    this.section = section;
    this.connector = connector;
    this.id = connector.id;
    this.projectId = connector.project_id;
    this.slot = dispatch.connectorSlots.assign(connector.id);
    this.weight = Number.isFinite(connector.weight)
      ? Math.min(100, Math.max(1, Math.round(connector.weight)))
      : 1;
    this.takesRequests = connector.enabled && !connector.pending_deletion;
    const declared = new Set<string>();
    for (const code of connector.countries) {
      const country = normaliseCountry(code);
      if (country !== undefined) declared.add(country);
    }
    this.declared = declared.size === 0 ? null : declared;
    this.limitStatus = connector.traffic?.limit_status === 429 ? 429 : 509;
    this.interrupts = connector.traffic?.action === "interrupt";
    this.trafficLimited = connector.traffic !== null;
    this.allow = connector.domain_allow.map(domainRule).filter((r) => r !== "");
    this.deny = connector.domain_deny.map(domainRule).filter((r) => r !== "");

    const rows = section.proxies;
    const proxies: ProxyEntry[] = new Array(rows.length);
    const healthy: ProxyEntry[] = [];
    let present = 0;
    let kept = 0;
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i];
      const slot = dispatch.proxySlots.assign(row.id);
      // The gateway's table of proxies is full: this one is not routed here (counted there).
      if (slot < 0) continue;
      const entry: ProxyEntry = {
        id: row.id,
        idHash: hashId(row.id),
        slot,
        slotEpoch: dispatch.epochOf(slot),
        connectorSlot: this.slot,
        country: rowCountry(row.country),
        region: typeof row.region === "string" && row.region !== ""
          ? row.region.toUpperCase()
          : null,
        city: rowCity(row.city),
        conflict: row.location_conflict === true,
        status: row.status,
        maxConcurrency: row.max_concurrency !== null && row.max_concurrency > 0
          ? Math.floor(row.max_concurrency)
          : 0,
        usableUntilMs: typeof row.usable_until_ms === "number" ? row.usable_until_ms : Infinity,
        proxyId: row.id,
        connectorId: this.id,
        scheme: row.scheme,
        host: row.host,
        port: row.port,
        username: row.username,
        password: row.password,
        rateLimit: connector.rate_limit,
        renderer: this.renderer,
      };
      proxies[kept++] = entry;
      if (strict && entry.conflict) continue;
      if (!isLeaving(row.status)) present++;
      if (row.status === "healthy") healthy.push(entry);
    }
    if (kept < rows.length) proxies.length = kept;
    this.proxies = proxies;
    this.anyPlace = { connector: this, rows: healthy, present };
    this.noPlace = { connector: this, rows: [], present: 0 };
  }

  /**
   * The rows that can serve the place: a connector that declares countries serves only those; a
   * proxy with a known country must match exactly; a proxy of unknown country serves only through
   * its connector's list. Never widened to another country.
   */
  rowsFor(options: UsernameOptions): PlaceRows {
    const country = options.country;
    if (country === undefined) return this.anyPlace;
    // Rendered per request: its row serves every place the provider writes, nothing else.
    if (this.renderer !== undefined) {
      return this.renderer.servesPlace(options, this.declared) ? this.anyPlace : this.noPlace;
    }
    // A state or city is served by exits attribution saw there, or by a dynamic-sessions row
    // that renders it (above); never widened to the country. The keys are the client's, so the
    // cache of such places is bounded.
    const key = placeKey(options);
    let rows = this.places.get(key);
    if (rows === undefined) {
      rows = this.computePlace(country, options.state, options.city);
      if (key === country || this.places.size < MAX_CACHED_PLACES) this.places.set(key, rows);
    }
    return rows;
  }

  private computePlace(
    country: string,
    state: string | undefined,
    city: string | undefined,
  ): PlaceRows {
    const declared = this.declared;
    if (declared !== null && !declared.has(country)) return this.noPlace;
    const throughList = declared !== null;
    const region = state === undefined ? undefined : `${country}-${state}`;
    const healthy: ProxyEntry[] = [];
    let present = 0;
    for (const entry of this.proxies) {
      if (entry.country === null ? !throughList : entry.country !== country) continue;
      if (region !== undefined && entry.region !== region) continue;
      if (city !== undefined && entry.city !== city) continue;
      if (this.strict && entry.conflict) continue;
      if (isLeaving(entry.status)) continue;
      present++;
      if (entry.status === "healthy") healthy.push(entry);
    }
    return present === 0 ? this.noPlace : { connector: this, rows: healthy, present };
  }

  /**
   * An "All countries" session pool that can add a group for `country` on demand (the provision
   * job): it takes requests, declares no countries, writes the country into its sessions, and
   * its vendor serves it.
   */
  provisions(country: string): boolean {
    const provider = this.provider;
    if (provider === undefined || !this.takesRequests || this.declared !== null) return false;
    const type = provider.type;
    return type.mode === "session" && !provider.dynamic && provider.renders.country &&
      (type.countries === undefined || type.countries.includes(country));
  }

  /** The domain filter: an allow list must match the host (or a name above it); a deny list must not. */
  allowsHost(host: string): boolean {
    if (this.allow.length !== 0 && !matchesRule(host, this.allow)) return false;
    if (this.deny.length !== 0 && matchesRule(host, this.deny)) return false;
    return true;
  }

  /** A row by id (for strategies that hold a binding); the map is built on first ask. */
  proxy(id: string): ProxyEntry | undefined {
    if (this.byId === undefined) {
      this.byId = new Map();
      for (const entry of this.proxies) this.byId.set(entry.id, entry);
    }
    return this.byId.get(id);
  }
}

/** Who may use a project from where, indexed once per snapshot (see shared/net/cidr-set.ts). */
export interface ProjectAccess {
  /** The client addresses it takes requests from; undefined: every address. */
  readonly allowed: CidrSet | undefined;
  /**
   * Its password-less blocks let every address in (within the allowed ones): a gateway
   * listening beyond loopback serves it with a password only (strict mode).
   */
  readonly openToAnyone: boolean;
  /** The answer for a client its password-less blocks select: the project, no options. */
  readonly byAddress: AuthResult | undefined;
}

/** A project's connector sequence, as the router reads it. */
export interface SequenceEntry {
  /**
   * The connector that serves the project; undefined once the sequence is exhausted, or when
   * its index names no connector (the router then refuses, as for a connector not in routing).
   */
  readonly currentId: string | undefined;
  /** The current connector's place, from 1, and how many the sequence names (for reasons). */
  readonly position: number;
  readonly length: number;
  readonly exhausted: boolean;
  readonly feed: FeedSequence;
}

export interface ProjectEntry {
  readonly id: string;
  readonly username: string;
  readonly passwordDigest: string;
  readonly strategy: Strategy;
  /** connection_timeout_seconds in ms; undefined when the feed gives no usable one. */
  readonly connectTimeoutMs: number | undefined;
  /** max_retries; undefined when the feed gives no usable one. */
  readonly maxRetries: number | undefined;
  readonly access: ProjectAccess;
  /** Its counts' slot in dispatch (requests in flight, for its max_connections). */
  readonly slot: number;
  /** Sequential routing: only the sequence's current connector serves. Undefined: none. */
  readonly sequence: SequenceEntry | undefined;
  /**
   * Its TLS interception, frozen and shared by every client of the project; undefined when its
   * tunnels stay raw (mode off, or a mode this gateway does not serve).
   */
  readonly interception: Interception | undefined;
  /** Its response judging, compiled once; undefined when it has no rule on or in shadow. */
  readonly blocking: CompiledBlocking | undefined;
  /** Its per-domain routing rules, compiled once; undefined when it has none. */
  readonly domainRules: readonly CompiledDomainRule[] | undefined;
  readonly project: FeedProject;
}

export interface RuntimeIndex {
  readonly section: RuntimeSection;
  /** Quarantined proxies: epoch ms they rest until, by proxy id (look up with `idHash`). */
  readonly quarantineUntilMs: DeadlineTable;
  /** Connectors blocked by their traffic limit: epoch ms until, by connector id. */
  readonly blockedUntilMs: ReadonlyMap<string, number>;
  /** Projects blocked by their traffic quota: epoch ms until, by project id. */
  readonly projectBlockedUntilMs: ReadonlyMap<string, number>;
}

export interface BuildStats {
  connectorsIndexed: number;
  connectorsReused: number;
  proxiesIndexed: number;
  projectsRebuilt: boolean;
  runtimeRebuilt: boolean;
  /** Proxies gone from the feed whose slots still have transfers in flight. */
  slotsLeavingBusy: number;
  /** Proxies of the feed left out of this build: the table of proxies was full. */
  proxiesRefused: number;
}

export interface RoutingSnapshot {
  readonly sections: FeedSections;
  readonly projectsByUsername: ReadonlyMap<string, ProjectEntry>;
  readonly projectsById: ReadonlyMap<string, ProjectEntry>;
  /**
   * Every project's password-less blocks: a client without credentials is the project of the
   * most specific block holding its address, when exactly one project lists that block.
   */
  readonly passwordless: CidrTable<ProjectEntry>;
  readonly connectors: ReadonlyMap<string, ConnectorIndex>;
  /** Each project's connectors, by id. */
  readonly connectorsByProject: ReadonlyMap<string, readonly ConnectorIndex[]>;
  readonly runtime: RuntimeIndex;
  /** The shipped descriptors and those the global section carries. */
  readonly providers: ProviderRegistry;
  /** The global section's descriptors as JSON: a change rebuilds the vendor connectors. */
  readonly descriptorsJson: string;
  /** Projects whose location policy is `strict`: a change rebuilds their connectors. */
  readonly strictProjects: ReadonlySet<string>;
  /** The process's dispatch counts, carried from snapshot to snapshot. */
  readonly dispatch: Dispatch;
  readonly stats: BuildStats;
}

export interface BuildOptions {
  /** The dispatch counts for a first build (later builds take the previous snapshot's). */
  dispatch?: Dispatch;
  log?: CoreLog;
}

/** Builds a snapshot from a decoded feed, reusing what `previous` indexed from the same objects. */
export function buildSnapshot(
  update: FeedSections,
  previous?: RoutingSnapshot,
  options: BuildOptions = {},
): RoutingSnapshot {
  const dispatch = previous?.dispatch ?? options.dispatch ?? new Dispatch();
  const stats: BuildStats = {
    connectorsIndexed: 0,
    connectorsReused: 0,
    proxiesIndexed: 0,
    projectsRebuilt: false,
    runtimeRebuilt: false,
    slotsLeavingBusy: 0,
    proxiesRefused: 0,
  };

  let projectsByUsername: ReadonlyMap<string, ProjectEntry>;
  let projectsById: ReadonlyMap<string, ProjectEntry>;
  let passwordless: CidrTable<ProjectEntry>;
  if (previous !== undefined && previous.sections.global === update.global) {
    projectsByUsername = previous.projectsByUsername;
    projectsById = previous.projectsById;
    passwordless = previous.passwordless;
  } else {
    ({ projectsByUsername, projectsById, passwordless } = indexProjects(
      update,
      dispatch,
      options.log,
    ));
    stats.projectsRebuilt = true;
  }

  // Descriptors change rarely: the registry (and every vendor connector built from it) is kept
  // while the global section carries the same ones.
  const descriptorsJson = JSON.stringify(update.global.descriptors);
  let providers: ProviderRegistry;
  const sameDescriptors = previous !== undefined && previous.descriptorsJson === descriptorsJson;
  if (sameDescriptors) providers = previous.providers;
  else {
    providers = new ProviderRegistry();
    providers.setCustomDescriptors(storedDescriptors(update.global.descriptors));
  }

  const strictProjects = previous !== undefined && previous.sections.global === update.global
    ? previous.strictProjects
    : new Set(
      update.global.projects.filter((p) => p.location_policy === "strict").map((p) => p.id),
    );
  const sameStrict = previous !== undefined &&
    sameMembers(previous.strictProjects, strictProjects);

  let connectors: ReadonlyMap<string, ConnectorIndex>;
  let connectorsByProject: ReadonlyMap<string, readonly ConnectorIndex[]>;
  if (
    previous !== undefined && sameDescriptors && sameStrict &&
    sameConnectors(previous.connectors, update.connectors)
  ) {
    connectors = previous.connectors;
    connectorsByProject = previous.connectorsByProject;
    stats.connectorsReused = connectors.size;
  } else {
    dispatch.proxySlots.beginBuild();
    const built = new Map<string, ConnectorIndex>();
    for (const [id, section] of update.connectors) {
      const old = previous?.connectors.get(id);
      const strict = strictProjects.has(section.connector.project_id);
      if (
        old !== undefined && old.section === section && old.strict === strict &&
        (sameDescriptors || section.config === null)
      ) {
        built.set(id, old);
        stats.connectorsReused++;
      } else {
        const index = new ConnectorIndex(section, dispatch, providers, options.log, strict);
        built.set(id, index);
        stats.connectorsIndexed++;
        stats.proxiesIndexed += index.proxies.length;
        stats.proxiesRefused += index.section.proxies.length - index.proxies.length;
      }
    }
    if (previous !== undefined) retireDeparted(previous.connectors, built, dispatch);
    connectors = built;
    connectorsByProject = groupByProject(built);
  }
  stats.slotsLeavingBusy = dispatch.sweep();

  let runtime: RuntimeIndex;
  if (previous !== undefined && previous.sections.runtime === update.runtime) {
    runtime = previous.runtime;
  } else {
    runtime = indexRuntime(update.runtime);
    stats.runtimeRebuilt = true;
  }

  return {
    sections: update,
    projectsByUsername,
    projectsById,
    passwordless,
    connectors,
    connectorsByProject,
    runtime,
    providers,
    descriptorsJson,
    strictProjects,
    dispatch,
    stats,
  };
}

function sameMembers(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a === b) return true;
  if (a.size !== b.size) return false;
  for (const member of a) if (!b.has(member)) return false;
  return true;
}

function indexProjects(update: FeedSections, dispatch: Dispatch, log: CoreLog | undefined) {
  const projectsByUsername = new Map<string, ProjectEntry>();
  const projectsById = new Map<string, ProjectEntry>();
  const passwordless = new CidrTable<ProjectEntry>();
  /** Each password-less network and the projects listing it, to find blocks two projects list. */
  const listed = new Map<string, string[]>();
  for (const project of update.global.projects) {
    const blocks = projectBlocks(project, log);
    const connectTimeoutMs = project.connection_timeout_seconds > 0
      ? project.connection_timeout_seconds * 1000
      : undefined;
    const maxRetries = Number.isInteger(project.max_retries) && project.max_retries >= 0
      ? Math.min(project.max_retries, MAX_RETRIES_LIMIT)
      : undefined;
    const interception = interceptionOf(project, log);
    const blocking = blockingOf(project, log);
    const domainRules = domainRulesOf(project, log);
    // Built once: every password-less request of the project shares it (nothing changes it).
    const byAddress: AuthResult | undefined = blocks.passwordless.length === 0
      ? undefined
      : Object.freeze({
        ok: true,
        client: Object.freeze(
          withProjectPolicies(
            {
              projectId: project.id,
              options: Object.freeze({ user: project.username }),
              connectTimeoutMs,
              maxRetries,
            },
            interception,
            blocking,
          ),
        ),
      });
    const entry: ProjectEntry = {
      id: project.id,
      username: project.username,
      passwordDigest: project.password_digest,
      strategy: project.strategy,
      connectTimeoutMs,
      maxRetries,
      access: {
        allowed: blocks.allowed === undefined ? undefined : new CidrSet(blocks.allowed),
        openToAnyone: openToAnyone(blocks.passwordless, blocks.allowed),
        byAddress,
      },
      slot: dispatch.projectSlots.assign(project.id),
      sequence: sequenceEntry(project.sequence),
      interception,
      blocking,
      domainRules,
      project,
    };
    if (byAddress !== undefined) {
      for (const cidr of blocks.passwordless) {
        passwordless.add(cidr, entry);
        const block = formatCidr(cidr);
        const seen = listed.get(block);
        if (seen === undefined) listed.set(block, [project.id]);
        else if (!seen.includes(project.id)) seen.push(project.id);
      }
    }
    projectsById.set(project.id, entry);
    if (projectsByUsername.has(project.username)) {
      // The database keeps usernames unique; two here mean a broken compile, so serve neither.
      log?.warn("Two projects in the feed share a username: neither is served", {
        username: project.username,
      });
      continue;
    }
    projectsByUsername.set(project.username, entry);
  }
  for (const [block, projects] of listed) {
    // The api refuses this; a feed carrying it anyway reaches neither project by that block.
    if (projects.length > 1) {
      log?.warn("Projects share a password-less block: no client reaches either through it", {
        block,
        projects: projects.join(", "),
      });
    }
  }
  return { projectsByUsername, projectsById, passwordless };
}

const INTERCEPTION_MODES: ReadonlySet<string> = new Set(["plain", "match_ua", "override_ua"]);
const INTERCEPTION_BROWSERS: ReadonlySet<string> = new Set(["chrome", "firefox", "edge", "random"]);

/**
 * A project's interception as clients carry it: its mode, browser and bypass list (frozen, the
 * list's match index built here, once per snapshot). Off, absent, or a mode or browser this
 * gateway does not serve (a later release's): undefined, so its tunnels stay raw, the last logged.
 */
function interceptionOf(project: FeedProject, log: CoreLog | undefined): Interception | undefined {
  const feed = project.tls_mitm;
  if (feed === null || feed === undefined || feed.mode === "off") return undefined;
  const browser = feed.browser ?? undefined;
  const served = INTERCEPTION_MODES.has(feed.mode) &&
    (feed.mode === "override_ua"
      ? browser !== undefined && INTERCEPTION_BROWSERS.has(browser)
      : browser === undefined);
  if (!served) {
    log?.warn("A project's TLS interception mode is not served here: its tunnels stay raw", {
      project: project.id,
      mode: feed.mode,
      browser,
    });
    return undefined;
  }
  const bypass = Object.freeze([...feed.bypass]);
  bypassIndex(bypass);
  return Object.freeze({
    mode: feed.mode as Interception["mode"],
    ...(browser === undefined ? {} : { browser: browser as Interception["browser"] }),
    bypass,
  });
}

/** The client with its project's interception and judging, those it has (absent otherwise). */
export function withProjectPolicies(
  client: Client,
  interception: Interception | undefined,
  blocking: CompiledBlocking | undefined,
): Client {
  if (interception !== undefined) client.interception = interception;
  if (blocking !== undefined) client.blocking = blocking;
  return client;
}

/**
 * A project's per-domain routing rules as the router applies them, read again here (a list a
 * later release wrote that this one cannot read is dropped whole and logged: a rule left out
 * would route its hosts as if it were absent, which a refusal rule must not).
 */
function domainRulesOf(
  project: FeedProject,
  log: CoreLog | undefined,
): readonly CompiledDomainRule[] | undefined {
  const feed = project.domain_rules;
  if (feed === null || feed === undefined || feed.length === 0) return undefined;
  const issues: DomainRuleIssue[] = [];
  const rules = readDomainRules(feed, issues);
  if (rules === undefined) {
    log?.warn("A project's domain rules are not read here: its hosts are refused", {
      project: project.id,
      issue: issues[0] === undefined ? "" : `${issues[0].path}: ${issues[0].message}`,
    });
    // Fail closed: every host refused, rather than routed past rules that could not be read.
    return [{
      action: "refuse",
      hosts: [],
      globs: [/^/],
      connectors: new Set(),
      reason: "This project's domain rules cannot be read by this gateway",
      domains: ["*"],
    }];
  }
  return compileDomainRules(rules);
}

/**
 * A project's rules as the gateway applies them, read again here (a rule a later release wrote
 * that this one cannot read is skipped and logged; the rest apply). Undefined without a rule on
 * or in shadow.
 */
function blockingOf(project: FeedProject, log: CoreLog | undefined): CompiledBlocking | undefined {
  const feed = project.blocking;
  if (feed === null || feed === undefined) return undefined;
  const rules: BlockRule[] = [];
  feed.rules.forEach((raw, index) => {
    const issues: RuleIssue[] = [];
    const rule = readBlockRule(raw, `[${index}]`, issues);
    if (rule !== undefined) rules.push(rule);
    else {
      log?.warn("A project's block rule is not read here: it is skipped", {
        project: project.id,
        rule: index,
        issue: issues[0] === undefined ? "" : `${issues[0].path}: ${issues[0].message}`,
      });
    }
  });
  let retry: RetryPolicy | null = null;
  if (feed.retry !== null) {
    const issues: RuleIssue[] = [];
    retry = readRetryPolicy(feed.retry, issues) ?? null;
    if (retry === null) {
      log?.warn("A project's retry policy is not read here: the defaults apply", {
        project: project.id,
      });
    }
  }
  let escalation: EscalationPolicy | null = null;
  if (feed.escalation !== null && feed.escalation !== undefined) {
    const issues: RuleIssue[] = [];
    escalation = readEscalationPolicy(feed.escalation, issues) ?? null;
    if (escalation === null) {
      log?.warn("A project's escalation is not read here: its connectors are not tiered", {
        project: project.id,
      });
    }
  }
  return compileBlocking(rules, retry, feed.body_bytes, escalation);
}

/** A project's sequence as the router reads it; undefined when it has none. */
function sequenceEntry(sequence: FeedSequence | null | undefined): SequenceEntry | undefined {
  if (sequence === null || sequence === undefined) return undefined;
  const index = sequence.current;
  const named = Number.isInteger(index) && index >= 0 && index < sequence.connectors.length;
  return {
    currentId: named && !sequence.exhausted ? sequence.connectors[index] : undefined,
    position: named ? index + 1 : 0,
    length: sequence.connectors.length,
    exhausted: sequence.exhausted,
    feed: sequence,
  };
}

/**
 * A project's blocks, parsed. One that does not parse (the api refuses them) is left out with
 * a warning, which narrows what it lets in: an allowed list of only bad blocks allows nothing.
 */
function projectBlocks(project: FeedProject, log: CoreLog | undefined) {
  const bad = (field: string) => (text: string) =>
    log?.warn("A client address block in the feed does not parse: left out", {
      project: project.id,
      field,
      block: text,
    });
  const allowed = project.allowed_cidrs.length === 0
    ? undefined
    : parseCidrs(project.allowed_cidrs, bad("allowed_cidrs"));
  return {
    allowed,
    passwordless: parseCidrs(project.passwordless_cidrs, bad("passwordless_cidrs")),
  };
}

function sameConnectors(
  indexes: ReadonlyMap<string, ConnectorIndex>,
  sections: ReadonlyMap<string, ConnectorSection>,
): boolean {
  if (indexes.size !== sections.size) return false;
  for (const [id, section] of sections) {
    if (indexes.get(id)?.section !== section) return false;
  }
  return true;
}

/**
 * Hands the slots of rows that left to the dispatch's sweep: rows of a replaced or dropped index
 * that no index of this build assigned again (found by slot, so no id is hashed).
 */
function retireDeparted(
  previous: ReadonlyMap<string, ConnectorIndex>,
  built: ReadonlyMap<string, ConnectorIndex>,
  dispatch: Dispatch,
): void {
  const slots = dispatch.proxySlots;
  for (const [id, old] of previous) {
    if (built.get(id) === old) continue;
    for (const entry of old.proxies) {
      if (!slots.assignedThisBuild(entry.slot)) slots.retire(entry.id);
    }
  }
}

function groupByProject(
  connectors: ReadonlyMap<string, ConnectorIndex>,
): Map<string, ConnectorIndex[]> {
  const byProject = new Map<string, ConnectorIndex[]>();
  for (const index of connectors.values()) {
    let list = byProject.get(index.projectId);
    if (list === undefined) {
      list = [];
      byProject.set(index.projectId, list);
    }
    list.push(index);
  }
  for (const list of byProject.values()) {
    list.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
  return byProject;
}

function indexRuntime(section: RuntimeSection): RuntimeIndex {
  const q = section.quarantines;
  const quarantineUntilMs = new DeadlineTable(q.length, (i) => q[i].proxy_id, (i) => q[i].until_ms);
  const blockedUntilMs = new Map<string, number>();
  for (const b of section.traffic_blocks) blockedUntilMs.set(b.connector_id, b.until_ms);
  const projectBlockedUntilMs = new Map<string, number>();
  for (const b of section.project_blocks) projectBlockedUntilMs.set(b.project_id, b.until_ms);
  return { section, quarantineUntilMs, blockedUntilMs, projectBlockedUntilMs };
}
