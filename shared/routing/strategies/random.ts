/** random: a connector by weighted random, then any usable row of it with equal chance. */
import type { ConnectorChoice, RoutingStrategy, StrategyDeps } from "../strategy-contract.ts";
import { acrossConnectors, randomUsable, weightedRandomIndex } from "./common.ts";

export function random(deps: Pick<StrategyDeps, "random">): RoutingStrategy {
  const rnd = deps.random;
  const pick = (choices: readonly ConnectorChoice[]) => weightedRandomIndex(choices, rnd);
  return {
    name: "random",
    select(candidates) {
      return acrossConnectors(
        candidates,
        pick,
        (choice) => randomUsable(choice.rows, candidates.usable, rnd),
      );
    },
  };
}
