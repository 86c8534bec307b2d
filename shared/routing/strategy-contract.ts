/**
 * The contract between the router and its routing strategies (strategies/): what a strategy
 * sees of a request and of the gateway, and what it answers. The registry of the strategies
 * this gateway has is strategy.ts; each strategy depends on this file only, never on it.
 *
 * A strategy object belongs to one project on one gateway; the router builds it on the project's
 * first request and keeps it (cursors, session bindings) until the project's strategy changes.
 * `select` sees the eligible connectors with their healthy rows for the place, and a `usable` test
 * for what changes between requests (quarantines, this request's exclusions, concurrency limits),
 * so no request copies a candidate list. It picks the connector by weight and the proxy inside it,
 * and may return a Promise: sticky reads its Redis binding there, unseen by the router. The others
 * answer synchronously, and the router keeps that path free of awaits.
 *
 * least_used and health_based read `StrategyDeps.counts`: this gateway's transfers in flight per
 * proxy and connector, and the outcomes it saw. Built without the gateway's counters (previews),
 * they see a gateway that has served nothing.
 */
import type { Strategy } from "../roles.ts";
import type { HeldTasks } from "./sticky/held-tasks.ts";
import type { StickyStore } from "./sticky/store.ts";
import type { Target, UsernameOptions } from "./contract.ts";
import type { DispatchReader } from "./dispatch.ts";
import type { CoreLog } from "./log.ts";
import type { ConnectorIndex, ProjectEntry, ProxyEntry } from "./snapshot.ts";

/** One eligible connector and its healthy rows for the place asked. */
export interface ConnectorChoice {
  readonly connector: ConnectorIndex;
  readonly rows: readonly ProxyEntry[];
}

export interface Candidates {
  /** Eligible connectors (enabled, unblocked, domain allowed, at least one healthy row), by id. */
  readonly choices: readonly ConnectorChoice[];
  /** Not quarantined, not excluded for this request, under its concurrency limit. */
  usable(proxy: ProxyEntry): boolean;
}

export interface StrategyContext {
  readonly project: ProjectEntry;
  readonly options: UsernameOptions;
  /** The place's cache key (`""`, `DE`, `US/NY/`): strategies keep per-place state under it. */
  readonly placeKey: string;
  readonly target: Target;
  readonly counts: DispatchReader;
  /** The router's clock at the request's start: sticky's expiries run on it. */
  readonly nowMs: number;
}

export type Selection = ProxyEntry | undefined;

export interface RoutingStrategy {
  readonly name: Strategy;
  /** The proxy for one attempt, or undefined when no candidate is usable. */
  select(candidates: Candidates, context: StrategyContext): Selection | Promise<Selection>;
  /**
   * The id of the proxy the request's session is bound to, whether or not it can serve now
   * (sticky only): the router asks when sticky_quarantine may keep the session on a resting
   * proxy and answer 429 rather than move it.
   */
  heldProxy?(context: StrategyContext): string | undefined | Promise<string | undefined>;
}

export interface StrategyDeps {
  /** [0, 1), injected so tests can pin it. */
  random: () => number;
  /** This gateway's dispatch counts: transfers in flight and outcomes. */
  counts: DispatchReader;
  log: CoreLog;
  /** The sticky bindings' store, held writes and limits; absent: bindings stay local. */
  sticky?: StickyDeps;
}

export type StrategyFactory = (deps: StrategyDeps) => RoutingStrategy;

/** What sticky needs besides the common deps: where its bindings are shared, and its bounds. */
export interface StickyDeps {
  /** The bindings' shared copy; absent: they live on this gateway only (previews, tests). */
  store?: StickyStore;
  /** Holds the binding writes, so the gateway's stop waits for them. */
  held?: HeldTasks;
  /** Deadline of a binding's read on the request path, and of a write in the background. */
  requestTimeoutMs?: number;
  maxSessions?: number;
}
