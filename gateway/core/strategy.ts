/**
 * Routing strategies: one interface for every way a project picks its upstream.
 *
 * A strategy object belongs to one project on one gateway; the router builds it on the project's
 * first request and keeps it (cursors, and in the next issue session bindings) until the project's
 * strategy changes. `select` sees the eligible connectors with their healthy rows for the place,
 * and a `usable` test for what changes between requests (quarantines, this request's exclusions,
 * concurrency limits), so no request copies a candidate list. It picks the connector by weight and
 * the proxy inside it, and may return a Promise: sticky reads its Redis binding there, unseen by
 * the router. The others answer synchronously, and the router keeps that path free of awaits.
 *
 * least_used and health_based (next issue) read `context.counts`: transfers in flight per proxy and
 * connector, and the outcomes this gateway saw.
 */
import type { Strategy } from "../../shared/roles.ts";
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
  readonly nowMs: number;
}

export type Selection = ProxyEntry | undefined;

export interface RoutingStrategy {
  readonly name: Strategy;
  /** The proxy for one attempt, or undefined when no candidate is usable. */
  select(candidates: Candidates, context: StrategyContext): Selection | Promise<Selection>;
}

export interface StrategyDeps {
  /** [0, 1), injected so tests can pin it. */
  random: () => number;
  counts: DispatchReader;
  log: CoreLog;
}

export type StrategyFactory = (deps: StrategyDeps) => RoutingStrategy;

// ---------------------------------------------------------------------------------------------
// Building blocks the strategies share.

/**
 * Tries connectors in the order `pick` gives until one yields a usable proxy: a connector whose
 * rows are all unusable for this request gives its share to the others.
 */
export function acrossConnectors(
  candidates: Candidates,
  pick: (choices: readonly ConnectorChoice[]) => number,
  inside: (choice: ConnectorChoice) => Selection,
): Selection {
  let choices = candidates.choices;
  for (;;) {
    if (choices.length === 0) return undefined;
    const k = choices.length === 1 ? 0 : pick(choices);
    const proxy = inside(choices[k]);
    if (proxy !== undefined) return proxy;
    choices = choices.filter((_, i) => i !== k);
  }
}

/** Weighted random: a connector in proportion to its weight. */
export function weightedRandomIndex(
  choices: readonly ConnectorChoice[],
  random: () => number,
): number {
  let total = 0;
  for (const choice of choices) total += choice.connector.weight;
  let r = random() * total;
  for (let i = 0; i < choices.length; i++) {
    r -= choices[i].connector.weight;
    if (r < 0) return i;
  }
  return choices.length - 1;
}

/** The first usable row from `start` on, wrapping; its index or -1. */
export function firstUsableFrom(
  rows: readonly ProxyEntry[],
  start: number,
  usable: (proxy: ProxyEntry) => boolean,
): number {
  const n = rows.length;
  for (let k = 0; k < n; k++) {
    const i = start + k < n ? start + k : start + k - n;
    if (usable(rows[i])) return i;
  }
  return -1;
}

/**
 * Smooth weighted round robin (weights 3:1 give A A B A): each pick adds every eligible
 * connector's weight to its running score, takes the highest and takes the total off it.
 * Scores are kept per connector id, so a connector that drops out for a while rejoins fairly.
 */
export class SmoothWeights {
  private readonly scores = new Map<string, number>();

  pick(choices: readonly ConnectorChoice[]): number {
    let total = 0;
    let best = 0;
    let bestScore = -Infinity;
    for (let i = 0; i < choices.length; i++) {
      const { id, weight } = choices[i].connector;
      const score = (this.scores.get(id) ?? 0) + weight;
      this.scores.set(id, score);
      total += weight;
      if (score > bestScore) {
        bestScore = score;
        best = i;
      }
    }
    this.scores.set(choices[best].connector.id, bestScore - total);
    return best;
  }
}

// ---------------------------------------------------------------------------------------------

/** Places a strategy keeps state for before it starts afresh. */
const MAX_PLACES = 4096;

/**
 * round_robin: connectors by smooth weighted round robin, then each connector's rows in turn from
 * a cursor kept per connector and place (a row that cannot serve now is skipped, not waited on).
 */
export function roundRobin(): RoutingStrategy {
  const weightsByPlace = new Map<string, SmoothWeights>();
  const cursors = new Map<string, Map<string, number>>();
  return {
    name: "round_robin",
    select(candidates, context) {
      let weights = weightsByPlace.get(context.placeKey);
      if (weights === undefined) {
        // Place keys may one day hold client-chosen text (states, cities): keep the state bounded.
        if (weightsByPlace.size >= MAX_PLACES) {
          weightsByPlace.clear();
          cursors.clear();
        }
        weights = new SmoothWeights();
        weightsByPlace.set(context.placeKey, weights);
      }
      const chosen = weights;
      return acrossConnectors(candidates, (choices) => chosen.pick(choices), (choice) => {
        let byPlace = cursors.get(choice.connector.id);
        if (byPlace === undefined) {
          byPlace = new Map();
          cursors.set(choice.connector.id, byPlace);
        }
        const rows = choice.rows;
        const cursor = byPlace.get(context.placeKey) ?? 0;
        const i = firstUsableFrom(rows, cursor < rows.length ? cursor : 0, candidates.usable);
        if (i === -1) return undefined;
        byPlace.set(context.placeKey, i + 1);
        return rows[i];
      });
    },
  };
}

/** random: a connector by weighted random, then any usable row of it with equal chance. */
export function random(deps: StrategyDeps): RoutingStrategy {
  const rnd = deps.random;
  return {
    name: "random",
    select(candidates) {
      return acrossConnectors(candidates, (choices) => weightedRandomIndex(choices, rnd), (
        choice,
      ) => {
        const rows = choice.rows;
        const start = Math.floor(rnd() * rows.length);
        // Probe a few random rows first so unusable runs do not favour the row after them.
        for (let tries = 0; tries < 3; tries++) {
          const row = rows[tries === 0 ? start : Math.floor(rnd() * rows.length)];
          if (candidates.usable(row)) return row;
        }
        const i = firstUsableFrom(rows, start, candidates.usable);
        return i === -1 ? undefined : rows[i];
      });
    },
  };
}

/**
 * The strategies this gateway has. The next issue adds least_used, health_based and sticky here.
 */
export const STRATEGY_FACTORIES: Readonly<Partial<Record<Strategy, StrategyFactory>>> = {
  round_robin: roundRobin,
  random,
};
