/**
 * The registry of the routing strategies this gateway has (each in strategies/), by the name the
 * feed gives. What a strategy is, and what it sees, is the contract in strategy-contract.ts.
 */
import type { Strategy } from "../roles.ts";
import { healthBased } from "./strategies/health-based.ts";
import { leastUsed } from "./strategies/least-used.ts";
import { random } from "./strategies/random.ts";
import { roundRobin } from "./strategies/round-robin.ts";
import { sticky } from "./strategies/sticky.ts";
import type { StrategyFactory } from "./strategy-contract.ts";

/** The strategies this gateway has, by the name the feed gives. */
export const STRATEGY_FACTORIES: Readonly<Record<Strategy, StrategyFactory>> = {
  round_robin: roundRobin,
  random,
  least_used: leastUsed,
  health_based: healthBased,
  sticky,
};
