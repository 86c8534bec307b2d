/**
 * How many proxies a pool run asks its provider for (seed 001's refill by capacity, in our
 * words). What counts is what will serve by the next run: the entries waiting for their first
 * check (this run checks them) and the available ones still usable past a margin (one pool
 * interval: those that drain before the next run serve no one). Suspects and entries about to
 * drain do not count, so a pool losing its proxies refills before they are gone.
 *
 * With `pool.max_concurrency` (c) set, a proxy is c slots: the gateways' transfers through the
 * pool's proxies take slots, and the plan counts the slots left free, in proxies:
 * serving = ready - held / c. So a pool whose proxies are busy grows (up to `max_size`) before
 * requests find every proxy full; without it, proxies are counted.
 *
 * Below `min_size` serving, a refill asks for enough to reach `target_size`, never past
 * `max_size` live entries (checking, available and suspect): the two marks are the hysteresis.
 */
import { liveCount, type PoolCounts } from "./contract.ts";

export interface RefillInputs {
  counts: PoolCounts;
  /** Available entries (routed and stock) still usable after the margin. */
  usable: number;
  /** Transfers the gateways hold through the pool's proxies now (reserved and active). */
  held: number;
  pool: { min_size: number; target_size: number; max_size: number; max_concurrency: number | null };
}

export interface RefillPlan {
  /** Proxies to ask for; 0: no refill. */
  need: number;
  /** What will serve by the next run, in proxies (free slots over c with max_concurrency). */
  serving: number;
  /** Slots free now with max_concurrency; null without it. */
  freeSlots: number | null;
}

export function refillPlan(inputs: RefillInputs): RefillPlan {
  const { counts, usable, held, pool } = inputs;
  const ready = counts.checking + usable;
  const c = pool.max_concurrency;
  const serving = c === null ? ready : ready - held / c;
  const freeSlots = c === null ? null : ready * c - held;
  const room = pool.max_size - liveCount(counts);
  if (serving >= pool.min_size || room <= 0) return { need: 0, serving, freeSlots };
  return {
    need: Math.max(0, Math.min(Math.ceil(pool.target_size - serving), room)),
    serving,
    freeSlots,
  };
}
