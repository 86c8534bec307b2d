/**
 * Building blocks the strategies share: trying connectors until one yields a usable row, weighted
 * picks, and scans that start anywhere in a row list.
 */
import type { Candidates, ConnectorChoice, Selection } from "../strategy-contract.ts";
import type { ProxyEntry } from "../snapshot.ts";

/** Places (`""`, `DE`, ...) a strategy keeps per-place state for before it starts afresh. */
export const MAX_PLACES = 4096;

/**
 * Tries connectors in the order `pick` gives until one yields a usable proxy: a connector whose
 * rows are all unusable for this request gives its share to the others. `unpick` takes back a
 * pick that found nothing usable, before the next among the rest, so a stateful pick counts one
 * pick per request (round_robin's scores would otherwise count the rest twice).
 */
export function acrossConnectors(
  candidates: Candidates,
  pick: (choices: readonly ConnectorChoice[]) => number,
  inside: (choice: ConnectorChoice) => Selection,
  unpick?: (choices: readonly ConnectorChoice[], k: number) => void,
): Selection {
  let choices = candidates.choices;
  for (;;) {
    if (choices.length === 0) return undefined;
    const picked = choices.length !== 1;
    const k = picked ? pick(choices) : 0;
    const proxy = inside(choices[k]);
    if (proxy !== undefined) return proxy;
    if (picked) unpick?.(choices, k);
    choices = choices.filter((_, i) => i !== k);
  }
}

/** A connector in proportion to its weight, for a point `u` in [0, 1). */
export function weightedIndexAt(choices: readonly ConnectorChoice[], u: number): number {
  let total = 0;
  for (const choice of choices) total += choice.connector.weight;
  let r = u * total;
  for (let i = 0; i < choices.length; i++) {
    r -= choices[i].connector.weight;
    if (r < 0) return i;
  }
  return choices.length - 1;
}

/** Weighted random: a connector in proportion to its weight. */
export function weightedRandomIndex(
  choices: readonly ConnectorChoice[],
  random: () => number,
): number {
  return weightedIndexAt(choices, random());
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
 * Any usable row with equal chance. A few random probes first, so an unusable run does not
 * favour the row after it; then a scan from a random start.
 */
export function randomUsable(
  rows: readonly ProxyEntry[],
  usable: (proxy: ProxyEntry) => boolean,
  random: () => number,
): Selection {
  const n = rows.length;
  if (n === 0) return undefined;
  const start = Math.floor(random() * n);
  for (let tries = 0; tries < 3; tries++) {
    const row = rows[tries === 0 ? start : Math.floor(random() * n)];
    if (usable(row)) return row;
  }
  const i = firstUsableFrom(rows, start, usable);
  return i === -1 ? undefined : rows[i];
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

  /** Takes back the pick of `k` among `choices` (it found nothing usable): scores as before. */
  unpick(choices: readonly ConnectorChoice[], k: number): void {
    let total = 0;
    for (const choice of choices) total += choice.connector.weight;
    for (let i = 0; i < choices.length; i++) {
      const { id, weight } = choices[i].connector;
      const score = (this.scores.get(id) ?? 0) - weight + (i === k ? total : 0);
      this.scores.set(id, score);
    }
  }
}
