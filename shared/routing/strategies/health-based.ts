/**
 * health_based: the outcomes this gateway saw per proxy since it started (dispatch's successes and
 * failures, recorded on release; a client that went away counts for neither), never shared
 * numbers. Connector by weighted random, then one candidate drawn at random, so traffic spreads
 * over the good proxies rather than piling onto the best one.
 *
 * Candidates among a connector's usable rows for the place:
 * - a row with fewer than `MIN_OUTCOMES` outcomes, always: otherwise the rows measured first would
 *   take all the traffic and the others would never get the requests that measure them;
 * - a measured row whose success ratio is at least the best measured row's minus `RATIO_MARGIN`:
 *   the margin is noise, so near-equal rows share the traffic, and the best is always a candidate.
 * Outcomes forget a proxy that leaves the snapshot (dispatch clears them), so one that comes back
 * starts unmeasured. Latency is recorded but not scored: a lifetime mean says little of now.
 */
import type { DispatchReader } from "../dispatch.ts";
import type { ProxyEntry } from "../snapshot.ts";
import type {
  ConnectorChoice,
  RoutingStrategy,
  Selection,
  StrategyDeps,
} from "../strategy-contract.ts";
import { acrossConnectors, randomUsable, weightedRandomIndex } from "./common.ts";

/** Outcomes before a proxy's ratio counts. */
export const MIN_OUTCOMES = 10;
/** How far under the best ratio a measured proxy may be and still take traffic. */
export const RATIO_MARGIN = 0.1;
/** Rows scored on every request up to this many; a longer list keeps its scores a while. */
const SCORE_EVERY_REQUEST_MAX = 64;
/** How long a long list's scores are kept (or until it served as many picks as it has rows). */
const SCORES_MAX_AGE_MS = 500;

interface Scored {
  readonly candidates: readonly ProxyEntry[];
  readonly atMs: number;
  picksLeft: number;
}

export function healthBased(deps: Pick<StrategyDeps, "random" | "counts">): RoutingStrategy {
  const { random, counts } = deps;
  const pick = (choices: readonly ConnectorChoice[]) => weightedRandomIndex(choices, random);
  // A long list's candidates, by the rows array (one per connector index and place).
  const scoredByRows = new WeakMap<readonly ProxyEntry[], Scored>();

  function inside(
    rows: readonly ProxyEntry[],
    usable: (proxy: ProxyEntry) => boolean,
    nowMs: number,
  ): Selection {
    if (rows.length <= SCORE_EVERY_REQUEST_MAX) {
      return drawAny(healthyCandidates(rows, counts, usable), random);
    }
    // Scoring a long list costs a pass over it: amortised over as many picks as it has rows, and
    // outcomes change little in that time. The cached list ignores `usable` (it is per request).
    let scored = scoredByRows.get(rows);
    if (scored === undefined || scored.picksLeft <= 0 || nowMs - scored.atMs >= SCORES_MAX_AGE_MS) {
      scored = { candidates: healthyCandidates(rows, counts), atMs: nowMs, picksLeft: rows.length };
      scoredByRows.set(rows, scored);
    }
    scored.picksLeft--;
    return randomUsable(scored.candidates, usable, random) ??
      // The good rows cannot serve this request: score what can.
      drawAny(healthyCandidates(rows, counts, usable), random);
  }

  return {
    name: "health_based",
    select(candidates, context) {
      return acrossConnectors(
        candidates,
        pick,
        (choice) => inside(choice.rows, candidates.usable, context.nowMs),
      );
    },
  };
}

/** The rows (usable ones only, when `usable` is given) health_based draws from; see above. */
export function healthyCandidates(
  rows: readonly ProxyEntry[],
  counts: DispatchReader,
  usable?: (proxy: ProxyEntry) => boolean,
): ProxyEntry[] {
  let best = -1;
  for (const row of rows) {
    if (usable !== undefined && !usable(row)) continue;
    const ok = counts.okCount(row.slot);
    const outcomes = ok + counts.failedCount(row.slot);
    if (outcomes >= MIN_OUTCOMES && ok / outcomes > best) best = ok / outcomes;
  }
  // A hair under, so a ratio exactly at the margin (9 of 10 against 10 of 10) is in.
  const floor = best - RATIO_MARGIN - 1e-9;
  const candidates: ProxyEntry[] = [];
  for (const row of rows) {
    if (usable !== undefined && !usable(row)) continue;
    const ok = counts.okCount(row.slot);
    const outcomes = ok + counts.failedCount(row.slot);
    if (outcomes < MIN_OUTCOMES || ok / outcomes >= floor) candidates.push(row);
  }
  return candidates;
}

function drawAny(rows: readonly ProxyEntry[], random: () => number): Selection {
  return rows.length === 0 ? undefined : rows[Math.floor(random() * rows.length)];
}
