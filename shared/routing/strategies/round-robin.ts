/**
 * round_robin: connectors by smooth weighted round robin, then each connector's rows in turn from
 * a cursor kept per connector and place (a row that cannot serve now is skipped, not waited on).
 */
import type { RoutingStrategy } from "../strategy-contract.ts";
import { acrossConnectors, firstUsableFrom, MAX_PLACES, SmoothWeights } from "./common.ts";

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
      }, (choices, k) => chosen.unpick(choices, k));
    },
  };
}
