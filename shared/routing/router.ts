/**
 * The router: who a client is (`authenticate`) and which upstream serves one attempt (`acquire`),
 * answered from the snapshot in force and this gateway's own counts; it never waits on a store.
 *
 * acquire: eligibility first (eligibility.ts: connector enabled and not pending deletion,
 * serving the place, letting the host through its domain filter, with a healthy row, not blocked
 * by its traffic limit; rows not quarantined (by the feed, or by this gateway's rate limiter until
 * the feed carries it), not already tried for this request, under their concurrency limit), then
 * the project's strategy picks the connector by weight and the proxy inside it, then dispatch
 * reserves a slot on it. When nothing is chosen the answer says why (see refusals.ts).
 *
 * A project with a connector sequence is judged on its current connector alone, so the
 * strategy chooses among that connector's rows and the earlier connectors' proxies take no new
 * request (what runs through them finishes). When that connector cannot serve, or the sequence
 * is exhausted, the request is refused with 503 and the reason; no other connector stands in.
 */
import { domainRuleFor } from "./domain-rules.ts";
import { siteOf } from "../blocking/domain.ts";
import type { EscalationPolicy } from "../blocking/escalation.ts";
import type { EscalationTiers, EscalationView } from "./escalation-contract.ts";
import { connectorTiers } from "./tiers.ts";
import { normaliseHost } from "../net/host.ts";
import type { Strategy } from "../roles.ts";
import type { FeedSections } from "../feed/models.ts";
import { BoundedMap } from "../bounded-map.ts";
import type { IpAddress } from "../net/ip.ts";
import { parseUsername } from "../username.ts";
import type { DescriptorProvider } from "../vendors/provider.ts";
import {
  type Allocation,
  type AuthResult,
  type Client,
  DIRECT_ID,
  isRefusal,
  type MaybePromise,
  NOTHING_TRIED,
  type Refusal,
  type Router,
  type Target,
  type UpstreamChoice,
} from "./contract.ts";
import { parseBasicAuth, timingSafeEqual } from "./basic-auth.ts";
import { Dispatch } from "./dispatch.ts";
import {
  blockedNow,
  connectorVerdict,
  Ineligible,
  projectBlockedNow,
  sequenceConnector,
} from "./eligibility.ts";
import type { FeedFreshness } from "./feed-freshness.ts";
import type { DeadlineTable } from "./id-table.ts";
import { consoleLog, type CoreLog } from "./log.ts";
import { HeldTasks } from "./sticky/held-tasks.ts";
import { type ProvisionRequests, ProvisionWaits } from "./provision.ts";
import type { StickyStore } from "./sticky/store.ts";
import {
  allBusy,
  allDown,
  allQuarantined,
  allTried,
  badOptions,
  domainRefused,
  domainRuleUnserved,
  feedStale,
  notReady,
  noUpstream,
  quotaExceeded,
  sequenceExhausted,
  sequenceUnavailable,
  sessionResting,
  trafficLimited,
  unauthenticated,
} from "./refusals.ts";
import {
  buildSnapshot,
  type ConnectorIndex,
  placeKey,
  type PlaceRows,
  type ProjectEntry,
  type ProxyEntry,
  type RoutingSnapshot,
  type SequenceEntry,
  withProjectPolicies,
} from "./snapshot.ts";
import { random } from "./strategies/random.ts";
import { roundRobin } from "./strategies/round-robin.ts";
import { STRATEGY_FACTORIES } from "./strategy.ts";
import type {
  Candidates,
  RoutingStrategy,
  Selection,
  StickyDeps,
  StrategyContext,
  StrategyDeps,
  StrategyFactory,
} from "./strategy-contract.ts";

/** Sticky sessions' shared side (the gateway passes its Redis store). */
export interface StickyOptions {
  /** Where bindings are shared between gateways (shared/routing/sticky/redis-store.ts). */
  store?: StickyStore;
  /** Deadline of a binding's read on the request path (OCTOPROX_REDIS_REQUEST_TIMEOUT, 2 s). */
  requestTimeoutMs?: number;
  /** Sessions one project keeps in memory on this gateway (100,000 unless said). */
  maxSessions?: number;
}

export interface RouterOptions {
  /** Checks a password against a project's digest (the feed codec provides it). */
  verifyPassword: (password: string, digest: string) => Promise<boolean>;
  dispatch?: Dispatch;
  log?: CoreLog;
  random?: () => number;
  nowMs?: () => number;
  /** Strategies to add or replace (tests'). */
  strategies?: Readonly<Partial<Record<Strategy, StrategyFactory>>>;
  sticky?: StickyOptions;
  /** Background work the strategies start (sticky's binding writes); `drain` waits for it. */
  held?: HeldTasks;
  /** Successful (digest, password) checks kept so the hot path rarely hashes. */
  passwordCacheSize?: number;
  /** Asks workers for country groups of "All countries" session pools (provision.ts). */
  provision?: ProvisionRequests;
  /** How long a request waits for its group (PROVISION_WAIT_MS unless said; tests). */
  provisionWaitMs?: number;
  /** OCTOPROX_FEED_MAX_STALE: past it, new requests are refused (none: never stale). */
  freshness?: FeedFreshness;
}

/** How many times a selection that lost its reservation race is tried again. */
const RESERVE_ATTEMPTS = 4;
/**
 * How long a quarantine this gateway's rate limiter tripped is kept locally at most: the feed
 * carries it to every gateway within a fraction of a second, and from then on the feed's copy
 * rules, so an api lift frees the proxy here too.
 */
export const LOCAL_QUARANTINE_MAX_MS = 10_000;
const MAX_LOCAL_QUARANTINES = 10_000;
const NO_CONNECTORS: readonly ConnectorIndex[] = [];

interface HeldStrategy {
  /** The strategy the feed named (which may not be the one serving it). */
  named: Strategy;
  strategy: RoutingStrategy;
}

/** A project's connectors in tiers, and each one's tier. */
interface Tiers {
  tiers: readonly (readonly ConnectorIndex[])[];
  byId: ReadonlyMap<string, number>;
}

/** Tiers by the project's connector list (one per snapshot build that changed connectors). */
const TIERS = new WeakMap<readonly ConnectorIndex[], Tiers>();

function tiersOf(connectors: readonly ConnectorIndex[]): Tiers {
  let known = TIERS.get(connectors);
  if (known === undefined) {
    const tiers = connectorTiers(connectors, (index) => index.connector);
    const byId = new Map<string, number>();
    tiers.forEach((tier, rank) => {
      for (const connector of tier) byId.set(connector.id, rank);
    });
    known = { tiers, byId };
    TIERS.set(connectors, known);
  }
  return known;
}

export class CoreRouter implements Router, EscalationTiers {
  readonly dispatch: Dispatch;
  /** The strategies' background writes: the gateway's stop awaits `drain()`. */
  readonly held: HeldTasks;
  private current: RoutingSnapshot | undefined;
  private readonly verifyPassword: RouterOptions["verifyPassword"];
  private readonly log: CoreLog;
  private readonly random: () => number;
  private readonly nowMs: () => number;
  private readonly freshness: FeedFreshness | undefined;
  private readonly factories: Readonly<Partial<Record<Strategy, StrategyFactory>>>;
  private readonly strategies = new Map<string, HeldStrategy>();
  private readonly warnedStrategies = new Set<string>();
  /** Password by digest, for checks that succeeded; oldest dropped first. */
  private readonly passwords = new Map<string, string>();
  private readonly passwordCacheSize: number;
  /** Accepted Proxy-Authorization values and their answer, under the snapshot that gave it. */
  private readonly accepted: BoundedMap<
    string,
    { snapshot: RoutingSnapshot; result: AuthResult }
  >;
  /** Serves a request whose strategy raised. */
  private readonly fallback: RoutingStrategy;
  private readonly stickyDeps: StickyDeps;
  /** Quarantines this gateway tripped, by proxy id: epoch ms, until the feed carries them. */
  private readonly localQuarantines = new Map<string, number>();
  /** Requests waiting for a country group; undefined when nothing asks workers for one. */
  private readonly provisioning: ProvisionWaits | undefined;
  /** Where each escalated site stands (the gateway's escalation book); undefined: no tiers. */
  private escalations: EscalationView | undefined;

  constructor(options: RouterOptions) {
    this.verifyPassword = options.verifyPassword;
    this.dispatch = options.dispatch ?? new Dispatch();
    this.log = options.log ?? consoleLog;
    this.random = options.random ?? Math.random;
    this.nowMs = options.nowMs ?? Date.now;
    this.freshness = options.freshness;
    this.factories = { ...STRATEGY_FACTORIES, ...options.strategies };
    this.passwordCacheSize = options.passwordCacheSize ?? 1024;
    this.accepted = new BoundedMap(this.passwordCacheSize);
    this.held = options.held ?? new HeldTasks();
    this.stickyDeps = { ...options.sticky, held: this.held };
    this.fallback = random({ random: this.random });
    this.provisioning = options.provision === undefined
      ? undefined
      : new ProvisionWaits(options.provision, {
        waitMs: options.provisionWaitMs,
        nowMs: this.nowMs,
      });
  }

  /** The book escalation reads sites' tiers from (set once it is built: it asks this router). */
  useEscalations(view: EscalationView): void {
    this.escalations = view;
  }

  escalation(
    projectId: string,
  ): { policy: Readonly<EscalationPolicy>; tiers: number } | undefined {
    const snapshot = this.current;
    const policy = snapshot?.projectsById.get(projectId)?.blocking?.escalation;
    if (snapshot === undefined || policy === undefined) return undefined;
    const tiers = tiersOf(snapshot.connectorsByProject.get(projectId) ?? NO_CONNECTORS);
    return tiers.tiers.length > 1 ? { policy, tiers: tiers.tiers.length } : undefined;
  }

  tierOf(projectId: string, connectorId: string): number | undefined {
    const connectors = this.current?.connectorsByProject.get(projectId);
    return connectors === undefined ? undefined : tiersOf(connectors).byId.get(connectorId);
  }

  escalatedProjects(): string[] {
    const snapshot = this.current;
    if (snapshot === undefined) return [];
    const ids: string[] = [];
    for (const [id, project] of snapshot.projectsById) {
      if (project.blocking?.escalation !== undefined && this.escalation(id) !== undefined) {
        ids.push(id);
      }
    }
    return ids;
  }

  /** Ends the waits for country groups (the gateway stops). */
  close(): void {
    this.provisioning?.close();
  }

  /** Waits for the strategies' background writes (sticky bindings); never rejects. */
  drain(): Promise<void> {
    return this.held.drain();
  }

  get ready(): boolean {
    return this.current !== undefined;
  }

  /** The snapshot in force (undefined before the first feed). */
  get snapshot(): RoutingSnapshot | undefined {
    return this.current;
  }

  /** Builds the next snapshot from a decoded feed, reusing what is unchanged, and swaps it in. */
  apply(update: FeedSections): RoutingSnapshot {
    const next = buildSnapshot(update, this.current, { dispatch: this.dispatch, log: this.log });
    if (next.stats.projectsRebuilt) {
      for (const projectId of this.strategies.keys()) {
        if (!next.projectsById.has(projectId)) this.strategies.delete(projectId);
      }
    }
    this.current = next;
    this.handOverQuarantines(next);
    this.provisioning?.swapped(next);
    return next;
  }

  /**
   * The rate limiter tripped `proxyId` until `untilMs`: excluded here at once, for at most
   * LOCAL_QUARANTINE_MAX_MS, until a feed carrying the quarantine is applied.
   */
  quarantineLocally(proxyId: string, untilMs: number): void {
    const nowMs = this.nowMs();
    const localUntilMs = Math.min(untilMs, nowMs + LOCAL_QUARANTINE_MAX_MS);
    if (localUntilMs <= nowMs) return;
    // Ended ones go at each feed; without feeds (Redis away), here, before the map grows.
    if (this.localQuarantines.size >= MAX_LOCAL_QUARANTINES) {
      for (const [id, until] of this.localQuarantines) {
        if (until <= nowMs) this.localQuarantines.delete(id);
      }
    }
    this.localQuarantines.set(proxyId, localUntilMs);
  }

  /**
   * The connector is blocked by its traffic limit now, in the snapshot in force, and its action
   * is `interrupt`: its running transfers are to stop (metering asks at each report).
   */
  interrupts(connectorId: string, projectId?: string): boolean {
    const snapshot = this.current;
    if (snapshot === undefined) return false;
    const nowMs = this.nowMs();
    if (
      blockedNow(snapshot, connectorId, nowMs) &&
      snapshot.connectors.get(connectorId)?.interrupts === true
    ) {
      return true;
    }
    if (projectId === undefined) return false;
    const quota = snapshot.projectsById.get(projectId)?.project.traffic_quota;
    return quota?.action === "interrupt" && projectBlockedNow(snapshot, projectId, nowMs);
  }

  /**
   * The refusal a project's traffic quota gives now (its limit status), as the snapshot's
   * runtime says; undefined when the project is not blocked. The admission's project-limits step
   * asks it for every request.
   */
  quotaRefusal(projectId: string): Refusal | undefined {
    const snapshot = this.current;
    if (snapshot === undefined || !projectBlockedNow(snapshot, projectId, this.nowMs())) {
      return undefined;
    }
    const quota = snapshot.projectsById.get(projectId)?.project.traffic_quota;
    return quotaExceeded(quota?.limit_status === 429 ? 429 : 509);
  }

  /**
   * Whether a connector or a project has a traffic limit (a connector's traffic_config, a
   * project's quota) in the snapshot in force: metering asks for a decision of each one a window
   * carried bytes of.
   */
  trafficLimited(connectorId: string): boolean {
    return this.current?.connectors.get(connectorId)?.trafficLimited === true;
  }

  /** A project as the snapshot in force has it (its limits, its counts' slot). */
  project(projectId: string): ProjectEntry | undefined {
    return this.current?.projectsById.get(projectId);
  }

  quotaLimited(projectId: string): boolean {
    return this.current?.projectsById.get(projectId)?.project.traffic_quota != null;
  }

  /** Proxies excluded by a quarantine this gateway tripped and the feed does not carry yet. */
  get localQuarantineCount(): number {
    return this.localQuarantines.size;
  }

  /** Drops the local quarantines the feed now carries, and those that ended. */
  private handOverQuarantines(snapshot: RoutingSnapshot): void {
    if (this.localQuarantines.size === 0) return;
    const nowMs = this.nowMs();
    const carried = snapshot.runtime.quarantineUntilMs;
    for (const [proxyId, untilMs] of this.localQuarantines) {
      if (untilMs <= nowMs || carried.get(proxyId) !== undefined) {
        this.localQuarantines.delete(proxyId);
      }
    }
  }

  authenticate(proxyAuthorization: string | null, clientIp?: IpAddress): MaybePromise<AuthResult> {
    const snapshot = this.current;
    if (proxyAuthorization === null) {
      return (clientIp !== undefined && snapshot !== undefined
        ? passwordlessClient(snapshot, clientIp)
        : undefined) ?? { ok: false, refusal: unauthenticated };
    }
    // A keep-alive client sends the same header with every request: its answer under this
    // snapshot is kept (a new snapshot, which may change passwords or names, asks afresh).
    if (snapshot !== undefined) {
      const accepted = this.accepted.get(proxyAuthorization);
      if (accepted !== undefined && accepted.snapshot === snapshot) return accepted.result;
    }
    const credentials = parseBasicAuth(proxyAuthorization);
    if (credentials === undefined) return { ok: false, refusal: unauthenticated };
    const parsed = parseUsername(credentials.username);
    if (!parsed.ok) return { ok: false, refusal: badOptions(parsed.message) };
    if (snapshot === undefined) return { ok: false, refusal: notReady };
    const project = snapshot.projectsByUsername.get(parsed.options.user);
    if (project === undefined) return { ok: false, refusal: unauthenticated };
    // ParsedUsername and the contract's UsernameOptions are one shape; this assignment keeps them so.
    const client: Client = withProjectPolicies(
      {
        projectId: project.id,
        options: parsed.options,
        connectTimeoutMs: project.connectTimeoutMs,
        maxRetries: project.maxRetries,
      },
      project.interception,
      project.blocking,
    );
    const digest = project.passwordDigest;
    const known = this.passwords.get(digest);
    if (known !== undefined && timingSafeEqual(known, credentials.password)) {
      return this.accept(proxyAuthorization, snapshot, client);
    }
    return this.verify(credentials.password, digest, client).then((result) =>
      result.ok ? this.accept(proxyAuthorization, snapshot, result.client) : result
    );
  }

  private accept(header: string, snapshot: RoutingSnapshot, client: Client): AuthResult {
    const result: AuthResult = { ok: true, client };
    this.accepted.set(header, { snapshot, result });
    return result;
  }

  private async verify(password: string, digest: string, client: Client): Promise<AuthResult> {
    let ok = false;
    try {
      ok = await this.verifyPassword(password, digest);
    } catch {
      ok = false;
    }
    if (!ok) return { ok: false, refusal: unauthenticated };
    if (!this.passwords.has(digest) && this.passwords.size >= this.passwordCacheSize) {
      const oldest = this.passwords.keys().next();
      if (oldest.done !== true) this.passwords.delete(oldest.value);
    }
    this.passwords.set(digest, password);
    return { ok: true, client };
  }

  /**
   * Answers without a Promise unless the strategy reads Redis (sticky) or the request waits for
   * a country group to be provisioned.
   */
  acquire(
    client: Client,
    target: Target,
    exclude: ReadonlySet<string> = NOTHING_TRIED,
  ): MaybePromise<Allocation | Refusal> {
    return this.acquireOnce(client, target, exclude, true);
  }

  private acquireOnce(
    client: Client,
    target: Target,
    exclude: ReadonlySet<string>,
    mayProvision: boolean,
  ): MaybePromise<Allocation | Refusal> {
    const snapshot = this.current;
    if (snapshot === undefined) return notReady;
    const project = snapshot.projectsById.get(client.projectId);
    if (project === undefined) return unauthenticated;
    const options = client.options;
    const nowMs = this.nowMs();
    const freshness = this.freshness;
    if (freshness !== undefined) {
      const staleMs = freshness.staleForMs(nowMs);
      if (staleMs !== undefined) return feedStale(staleMs, freshness.maxStaleMs);
    }
    const host = normaliseHost(target.host);

    // A per-domain rule comes first: a refusal, or the connectors it names (sequence or not).
    const rule = project.domainRules === undefined
      ? undefined
      : domainRuleFor(project.domainRules, host);
    if (rule?.action === "refuse") return domainRefused(host, rule.reason);
    if (rule?.action === "direct") return directAllocation(target);
    const sequence = rule === undefined ? project.sequence : undefined;
    const all = snapshot.connectorsByProject.get(project.id) ?? NO_CONNECTORS;
    let connectors = all;
    if (rule !== undefined) {
      connectors = all.filter((connector) => rule.connectors.has(connector.id));
      if (connectors.length === 0) return domainRuleUnserved(host);
    }
    // A sequence routes through its current connector alone (on_unavailable reject: the only
    // answer so far, and the one a gateway gives to a value it does not know).
    if (sequence !== undefined) {
      if (sequence.exhausted) return sequenceExhausted;
      const current = sequenceConnector(snapshot, project);
      if (current === undefined) {
        return sequenceUnavailable(sequence, "not_in_routing", false, options);
      }
      connectors = [current];
    }

    // Escalation: the site's tier first, then those above it, then those below (a tier that
    // cannot serve hands the request on). A sticky session that may not move is not tiered.
    const blocking = project.blocking;
    if (
      blocking?.escalation !== undefined && sequence === undefined &&
      this.escalations !== undefined &&
      (options.sessionId === undefined || blocking.retry.rebind_sticky)
    ) {
      const tiers = tiersOf(all);
      if (tiers.tiers.length > 1) {
        const level = this.escalations.level(project.id, siteOf(host));
        const top = tiers.tiers.length - 1;
        const at = level === undefined ? 0 : Math.min(level.tier, top);
        const first = level?.probing === true && at > 0 ? at - 1 : at;
        const order: number[] = [];
        for (let tier = first; tier <= top; tier++) order.push(tier);
        for (let tier = first - 1; tier >= 0; tier--) order.push(tier);
        const inTier = (tier: number) =>
          rule === undefined
            ? tiers.tiers[tier]
            : tiers.tiers[tier].filter((connector) => rule.connectors.has(connector.id));
        return this.serveTiers(snapshot, project, client, target, exclude, mayProvision, host, {
          order,
          inTier,
          nowMs,
        });
      }
    }
    return this.serve(
      snapshot,
      project,
      client,
      target,
      exclude,
      mayProvision,
      host,
      connectors,
      sequence,
      nowMs,
    );
  }

  /**
   * Tries the tiers in order until one serves (the first refusal answers when none does). An
   * empty tier (a domain rule narrows each) is passed.
   */
  private serveTiers(
    snapshot: RoutingSnapshot,
    project: ProjectEntry,
    client: Client,
    target: Target,
    exclude: ReadonlySet<string>,
    mayProvision: boolean,
    host: string,
    tiers: {
      order: readonly number[];
      inTier: (tier: number) => readonly ConnectorIndex[];
      nowMs: number;
    },
    from = 0,
    refused?: Refusal,
  ): MaybePromise<Allocation | Refusal> {
    for (let step = from; step < tiers.order.length; step++) {
      const connectors = tiers.inTier(tiers.order[step]);
      if (connectors.length === 0) continue;
      const result = this.serve(
        snapshot,
        project,
        client,
        target,
        exclude,
        mayProvision,
        host,
        connectors,
        undefined,
        tiers.nowMs,
      );
      if (result instanceof Promise) {
        return result.then((settled) =>
          isRefusal(settled)
            ? this.serveTiers(
              snapshot,
              project,
              client,
              target,
              exclude,
              mayProvision,
              host,
              tiers,
              step + 1,
              refused ?? settled,
            )
            : settled
        );
      }
      if (!isRefusal(result)) return result;
      refused ??= result;
    }
    return refused ?? domainRuleUnserved(host);
  }

  /** Serves the request from these connectors (a sequence's current one, or a tier's). */
  private serve(
    snapshot: RoutingSnapshot,
    project: ProjectEntry,
    client: Client,
    target: Target,
    exclude: ReadonlySet<string>,
    mayProvision: boolean,
    host: string,
    connectors: readonly ConnectorIndex[],
    sequence: SequenceEntry | undefined,
    nowMs: number,
  ): MaybePromise<Allocation | Refusal> {
    const options = client.options;
    let choices: PlaceRows[] | undefined;
    let domainExcluded = false;
    let down = false;
    let limitStatus: 429 | 509 | undefined;
    let refused: Ineligible | undefined;
    for (const connector of connectors) {
      const verdict = connectorVerdict(snapshot, connector, options, host, nowMs);
      if (typeof verdict !== "string") {
        (choices ??= []).push(verdict);
        continue;
      }
      refused = verdict;
      if (verdict === Ineligible.domainFiltered) domainExcluded = true;
      else if (verdict === Ineligible.noHealthyProxy) down = true;
      else if (verdict === Ineligible.trafficBlocked) limitStatus ??= connector.limitStatus;
    }
    if (choices === undefined) {
      if (mayProvision && limitStatus === undefined && options.country !== undefined) {
        const waiting = this.provisionGroups(connectors, options);
        if (waiting !== undefined) {
          return waiting.then(() => this.acquireOnce(client, target, exclude, false));
        }
      }
      // A traffic limit keeps its own answer (its status and token), with a sequence too.
      if (limitStatus !== undefined) return trafficLimited(limitStatus);
      if (sequence !== undefined && refused !== undefined) {
        const pendingDeletion = connectors[0].connector.pending_deletion;
        return sequenceUnavailable(sequence, refused, pendingDeletion, options);
      }
      if (down) return allDown;
      return noUpstream(options, domainExcluded);
    }

    const attempt = new Attempt(
      this.dispatch,
      snapshot,
      this.localQuarantines,
      choices,
      exclude,
      nowMs,
      sequence,
    );
    const strategy = this.strategyFor(project);
    const context: StrategyContext = {
      project,
      options,
      placeKey: placeKey(options),
      target,
      counts: this.dispatch,
      nowMs,
    };
    const held = strategy.heldProxy !== undefined && options.sessionId !== undefined &&
        holdsSessions(project, choices)
      ? strategy.heldProxy(context)
      : undefined;
    const result = held === undefined
      ? attempt.run(strategy, context)
      : held instanceof Promise
      ? held.then((proxyId) => attempt.runUnlessResting(proxyId, project, strategy, context))
      : attempt.runUnlessResting(held, project, strategy, context);
    if (!(result instanceof Promise)) return result;
    // A strategy is meant to fail open itself (sticky places a session afresh when Redis fails);
    // one that raises anyway still gets the request served.
    return result.catch((error: unknown) => {
      if (!this.warnedStrategies.has(`failed:${strategy.name}`)) {
        this.warnedStrategies.add(`failed:${strategy.name}`);
        this.log.warn("Routing strategy failed: request placed at random", {
          strategy: strategy.name,
          error: error instanceof Error ? error.message : String(error),
        });
      }
      return attempt.run(this.fallback, context);
    });
  }

  /**
   * The wait for the country groups that could serve the request: "All countries" session pools
   * among the connectors the request may use without healthy rows for the country, which have
   * none at all or were asked for by this gateway lately (a group still being checked).
   * Undefined: nothing to wait for.
   */
  private provisionGroups(
    connectors: readonly ConnectorIndex[],
    options: Client["options"],
  ): Promise<boolean> | undefined {
    const provisioning = this.provisioning;
    const country = options.country;
    if (provisioning === undefined || country === undefined) return undefined;
    const pools: ConnectorIndex[] = [];
    const keys: string[] = [];
    for (const connector of connectors) {
      if (!connector.provisions(country)) continue;
      const place = connector.rowsFor(options);
      const key = `${connector.id}:${country}`;
      if (place.rows.length !== 0) continue;
      if (place.present !== 0 && !provisioning.recentlyAsked(key)) continue;
      pools.push(connector);
      keys.push(key);
    }
    if (pools.length === 0) return undefined;
    const ids = pools.map((pool) => pool.id);
    return provisioning.provide(
      keys,
      (next) => ids.some((id) => (next.connectors.get(id)?.rowsFor(options).rows.length ?? 0) > 0),
    );
  }

  /**
   * The project's strategy object, built on its first request and kept until the feed names
   * another. A strategy this router has no implementation of (only when `options.strategies`
   * takes one away) is served as round_robin, with one warning: the compiler is meant to be the
   * one place that picks a default.
   */
  private strategyFor(project: ProjectEntry): RoutingStrategy {
    const held = this.strategies.get(project.id);
    if (held !== undefined && held.named === project.strategy) return held.strategy;
    let factory = this.factories[project.strategy];
    if (factory === undefined) {
      const key = `${project.id}:${project.strategy}`;
      if (!this.warnedStrategies.has(key)) {
        this.warnedStrategies.add(key);
        this.log.warn("Routing strategy not available yet: served as round_robin", {
          project: project.id,
          strategy: project.strategy,
        });
      }
      factory = this.factories.round_robin ?? roundRobin;
    }
    const deps: StrategyDeps = {
      random: this.random,
      counts: this.dispatch,
      log: this.log,
      sticky: this.stickyDeps,
    };
    const strategy = factory(deps);
    this.strategies.set(project.id, { named: project.strategy, strategy });
    return strategy;
  }
}

/**
 * sticky_quarantine holds a session on a resting proxy of this connector: set for the project,
 * or in the connector's rate-limit settings.
 */
function holdsSessionsOn(project: ProjectEntry, connector: ConnectorIndex): boolean {
  return project.project.sticky_quarantine ||
    connector.connector.rate_limit?.sticky_quarantine === true;
}

/** sticky_quarantine may hold a session on one of the connectors this request could use. */
function holdsSessions(project: ProjectEntry, choices: readonly PlaceRows[]): boolean {
  for (const choice of choices) if (holdsSessionsOn(project, choice.connector)) return true;
  return false;
}

/** One acquire's candidates: the usable test, reservation and, when nothing is left, the refusal. */
class Attempt implements Candidates {
  readonly choices: readonly PlaceRows[];
  readonly usable: (proxy: ProxyEntry) => boolean;
  private readonly dispatch: Dispatch;
  private readonly exclude: ReadonlySet<string>;
  private readonly quarantineUntilMs: DeadlineTable;
  private readonly localQuarantines: ReadonlyMap<string, number>;
  private readonly nowMs: number;
  /** The project's sequence, whose current connector is the one choice. */
  private readonly sequence: SequenceEntry | undefined;
  /** Proxies whose reservation was lost to a concurrent request (another isolate or await). */
  private lost: Set<string> | undefined;

  constructor(
    dispatch: Dispatch,
    snapshot: RoutingSnapshot,
    localQuarantines: ReadonlyMap<string, number>,
    choices: readonly PlaceRows[],
    exclude: ReadonlySet<string>,
    nowMs: number,
    sequence?: SequenceEntry,
  ) {
    this.dispatch = dispatch;
    this.sequence = sequence;
    this.localQuarantines = localQuarantines;
    this.choices = choices;
    this.exclude = exclude;
    this.quarantineUntilMs = snapshot.runtime.quarantineUntilMs;
    this.nowMs = nowMs;
    // A proxy past its usable-until takes no new request here, whatever the feed still says.
    this.usable = (proxy) =>
      proxy.usableUntilMs > nowMs && !this.excluded(proxy) && !this.quarantined(proxy) &&
      !this.full(proxy);
  }

  run(
    strategy: RoutingStrategy,
    context: StrategyContext,
    attempts = RESERVE_ATTEMPTS,
  ): Allocation | Refusal | Promise<Allocation | Refusal> {
    for (let left = attempts; left > 0; left--) {
      const selection = strategy.select(this, context);
      if (selection instanceof Promise) {
        return selection.then((proxy) => {
          const done = this.reserve(proxy, context);
          return done ?? this.run(strategy, context, left - 1);
        });
      }
      const done = this.reserve(selection, context);
      if (done !== undefined) return done;
    }
    return this.refusal();
  }

  /**
   * 429 when the session's proxy rests under sticky_quarantine (its project's, or its own
   * connector's): still in routing and healthy for the place, only quarantined. Otherwise the
   * strategy selects as usual (and moves the session when its proxy cannot serve).
   */
  runUnlessResting(
    heldProxyId: string | undefined,
    project: ProjectEntry,
    strategy: RoutingStrategy,
    context: StrategyContext,
  ): Allocation | Refusal | Promise<Allocation | Refusal> {
    if (heldProxyId !== undefined) {
      for (const choice of this.choices) {
        const proxy = choice.connector.proxy(heldProxyId);
        if (proxy === undefined) continue;
        if (
          holdsSessionsOn(project, choice.connector) && this.quarantined(proxy) &&
          choice.rows.includes(proxy)
        ) return sessionResting;
        break;
      }
    }
    return this.run(strategy, context);
  }

  /** An allocation, the refusal when nothing was selected, or undefined to select again. */
  private reserve(proxy: Selection, context: StrategyContext): Allocation | Refusal | undefined {
    if (proxy === undefined) return this.refusal();
    const lease = this.dispatch.acquire(
      proxy.renderer === undefined ? proxy : rendered(proxy, proxy.renderer, context),
      proxy.slot,
      proxy.connectorSlot,
      proxy.maxConcurrency,
      proxy.slotEpoch,
    );
    if (lease !== undefined) return lease;
    (this.lost ??= new Set()).add(proxy.id);
    return undefined;
  }

  private excluded(proxy: ProxyEntry): boolean {
    return (this.exclude.size !== 0 && this.exclude.has(proxy.id)) ||
      (this.lost !== undefined && this.lost.has(proxy.id));
  }

  private quarantined(proxy: ProxyEntry): boolean {
    if (this.quarantineUntilMs.size !== 0) {
      const untilMs = this.quarantineUntilMs.get(proxy.id, proxy.idHash);
      if (untilMs !== undefined && untilMs > this.nowMs) return true;
    }
    if (this.localQuarantines.size === 0) return false;
    const localUntilMs = this.localQuarantines.get(proxy.id);
    return localUntilMs !== undefined && localUntilMs > this.nowMs;
  }

  private full(proxy: ProxyEntry): boolean {
    return proxy.maxConcurrency !== 0 && this.dispatch.inFlight(proxy.slot) >= proxy.maxConcurrency;
  }

  /** Why no healthy row of an eligible connector could take the request (the slow path). */
  private refusal(): Refusal {
    let quarantined = 0;
    let busy = 0;
    let live = 0;
    for (const choice of this.choices) {
      for (const proxy of choice.rows) {
        if (this.exclude.has(proxy.id)) continue;
        // Past its usable-until a provider-API proxy is as good as down until the feed drops it.
        if (proxy.usableUntilMs <= this.nowMs) continue;
        live++;
        if (this.quarantined(proxy)) quarantined++;
        else if (this.full(proxy) || this.lost?.has(proxy.id) === true) busy++;
      }
    }
    if (busy !== 0) return allBusy;
    if (quarantined !== 0) return allQuarantined;
    if (live === 0 && this.exclude.size === 0) {
      // A sequence's current connector with nothing usable left: no other one stands in.
      return this.sequence === undefined
        ? allDown
        : sequenceUnavailable(this.sequence, "no_usable_proxy", false);
    }
    return allTried;
  }
}

/**
 * A dynamic-sessions row with its credentials rendered for this request: the client's session
 * hashed with the project id into the vendor's, its place in the vendor's syntax.
 */
function rendered(
  proxy: ProxyEntry,
  renderer: DescriptorProvider,
  context: StrategyContext,
): UpstreamChoice {
  const { username, password } = renderer.renderRequest(context.project.id, context.options);
  return { ...proxy, username, password };
}

/**
 * The project a client without credentials is by its address: that of the most specific
 * password-less block holding it, when exactly one project lists that block (two listing the
 * same block reach neither by it: the request must give credentials). Undefined: none.
 */
function passwordlessClient(
  snapshot: RoutingSnapshot,
  clientIp: IpAddress,
): AuthResult | undefined {
  const match = snapshot.passwordless.match(clientIp);
  if (match === undefined || match.values.length !== 1) return undefined;
  return match.values[0].access.byAddress;
}

/**
 * A per-domain rule's `direct`: the gateway connects to the target itself. Nothing of the
 * routing's counts is held (no proxy, no connector): the allocation's commit and release do
 * nothing.
 */
function directAllocation(target: Target): Allocation {
  return {
    upstream: {
      proxyId: DIRECT_ID,
      connectorId: DIRECT_ID,
      scheme: "http",
      host: target.host,
      port: target.port,
      username: null,
      password: null,
      direct: true,
    },
    commit() {},
    release() {},
  };
}
