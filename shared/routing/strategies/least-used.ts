/**
 * least_used: the transfers in flight on this gateway right now (dispatch's reserved + active),
 * never shared numbers: a restart starts from zero, which is what a gateway with nothing open has.
 *
 * Connector: the lowest in-flight ÷ weight. Its in-flight count covers all its proxies, not only
 * those eligible for this request, so a filtered request does not take a busy connector with a
 * few eligible rows for an idle one. Connectors tied on it (with sequential traffic, all at zero)
 * are drawn in proportion to weight, so idle traffic still splits by weight.
 *
 * Proxy: the usable row with the fewest in flight, ties drawn at random: with sequential traffic
 * nearly every row has nothing in flight, and a fixed tie-break would send everything to one row.
 * Lists longer than 256 rows are ranked by a sample (see `fewestInFlight`).
 */
import type { DispatchReader } from "../dispatch.ts";
import type { ProxyEntry } from "../snapshot.ts";
import type {
  ConnectorChoice,
  RoutingStrategy,
  Selection,
  StrategyDeps,
} from "../strategy-contract.ts";
import { acrossConnectors } from "./common.ts";

/** Random rows looked at for an idle one before ranking a list. */
const IDLE_PROBES = 4;
/** Lists up to this long are ranked in full when the probes find no idle row. */
const RANKED_ROWS_MAX = 256;
/** Random rows a longer list is ranked by. */
const LONG_LIST_PROBES = 32;

export function leastUsed(deps: Pick<StrategyDeps, "random" | "counts">): RoutingStrategy {
  const { random, counts } = deps;
  const pick = (choices: readonly ConnectorChoice[]) =>
    leastLoadedConnector(choices, counts, random);
  return {
    name: "least_used",
    select(candidates) {
      return acrossConnectors(
        candidates,
        pick,
        (choice) => fewestInFlight(choice.rows, candidates.usable, counts, random),
      );
    },
  };
}

/**
 * The connector with the lowest in-flight ÷ weight (compared by cross-multiplying, so exactly),
 * a tie drawn in proportion to weight.
 */
export function leastLoadedConnector(
  choices: readonly ConnectorChoice[],
  counts: DispatchReader,
  random: () => number,
): number {
  let best = 0;
  let bestLoad = counts.connectorInFlight(choices[0].connector.slot);
  let bestWeight = choices[0].connector.weight;
  let tiedWeight = bestWeight;
  for (let i = 1; i < choices.length; i++) {
    const load = counts.connectorInFlight(choices[i].connector.slot);
    const weight = choices[i].connector.weight;
    const order = load * bestWeight - bestLoad * weight;
    if (order < 0) {
      best = i;
      bestLoad = load;
      bestWeight = weight;
      tiedWeight = weight;
    } else if (order === 0) {
      tiedWeight += weight;
    }
  }
  if (tiedWeight === bestWeight) return best;
  let r = random() * tiedWeight;
  for (let i = 0; i < choices.length; i++) {
    const { slot, weight } = choices[i].connector;
    // Counts may move between the passes (another isolate): a connector no longer tied is skipped.
    if (counts.connectorInFlight(slot) * bestWeight !== bestLoad * weight) continue;
    r -= weight;
    if (r < 0) return i;
  }
  return best;
}

/**
 * The usable row with the fewest transfers in flight, a tie drawn at random.
 *
 * A few random probes first: an idle row is the fewest there can be, and taking only idle ones
 * keeps the draw uniform among them, so light traffic costs O(1). Past that, a list of up to
 * `RANKED_ROWS_MAX` rows is ranked in full (one pass finds the fewest and counts the tie, a second
 * takes a random one of them). A longer list takes the fewest among `LONG_LIST_PROBES` random rows:
 * ranking 5,000 busy rows costs about 200 µs a request, and since least_used keeps the counts
 * within about one of each other, the probes miss the lowest level only when few rows are at it
 * (under an eighth of them: (7/8)^32 ≈ 1.4%), and then take the next one up.
 */
export function fewestInFlight(
  rows: readonly ProxyEntry[],
  usable: (proxy: ProxyEntry) => boolean,
  counts: DispatchReader,
  random: () => number,
): Selection {
  const n = rows.length;
  if (n === 0) return undefined;
  if (n <= RANKED_ROWS_MAX) {
    if (n > 1) {
      for (let k = 0; k < IDLE_PROBES; k++) {
        const row = rows[Math.floor(random() * n)];
        if (counts.inFlight(row.slot) === 0 && usable(row)) return row;
      }
    }
    return rankFewest(rows, usable, counts, random);
  }
  let best: ProxyEntry | undefined;
  let bestInFlight = Infinity;
  for (let k = 0; k < LONG_LIST_PROBES; k++) {
    const row = rows[Math.floor(random() * n)];
    const inFlight = counts.inFlight(row.slot);
    if (inFlight >= bestInFlight || !usable(row)) continue;
    if (inFlight === 0) return row;
    best = row;
    bestInFlight = inFlight;
  }
  // Probes that found nothing usable (most rows quarantined or excluded): rank them all.
  return best ?? rankFewest(rows, usable, counts, random);
}

/** Every usable row ranked: the fewest in flight, a tie drawn at random. */
function rankFewest(
  rows: readonly ProxyEntry[],
  usable: (proxy: ProxyEntry) => boolean,
  counts: DispatchReader,
  random: () => number,
): Selection {
  const n = rows.length;
  let fewest = Infinity;
  let tied = 0;
  for (let i = 0; i < n; i++) {
    const row = rows[i];
    const inFlight = counts.inFlight(row.slot);
    // The count first: `usable` (quarantines, limits) only for rows that could be the fewest.
    if (inFlight > fewest || !usable(row)) continue;
    if (inFlight < fewest) {
      fewest = inFlight;
      tied = 1;
    } else {
      tied++;
    }
  }
  if (tied === 0) return undefined;
  let k = tied === 1 ? 0 : Math.floor(random() * tied);
  let fallback: ProxyEntry | undefined;
  for (let i = 0; i < n; i++) {
    const row = rows[i];
    if (counts.inFlight(row.slot) !== fewest || !usable(row)) continue;
    if (k === 0) return row;
    k--;
    fallback = row;
  }
  // Counts moved between the passes (another isolate): the last of the fewest still seen.
  return fallback ?? rows.find(usable);
}
