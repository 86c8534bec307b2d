/**
 * The refill plan: by what will serve by the next run (new entries and those usable past the
 * margin), not by entries held; with max_concurrency, by the slots the gateways leave free; the
 * min/target marks as hysteresis and max_size as the ceiling.
 */
import { describe, expect, it } from "vitest";
import { refillPlan } from "../../../control/provider-api/pool/refill-plan.ts";
import type { PoolCounts } from "../../../control/provider-api/pool/contract.ts";

const counts = (c: Partial<PoolCounts>): PoolCounts => ({
  checking: 0,
  routed: 0,
  stock: 0,
  suspect: 0,
  draining: 0,
  extracted: 0,
  ...c,
});
const sizes = { min_size: 4, target_size: 6, max_size: 10, max_concurrency: null };

describe("refill plan", () => {
  it("counts what will serve: suspects and entries about to drain do not", () => {
    // Six routed, two of them draining before the next run, one suspect: four serve.
    expect(
      refillPlan({ counts: counts({ routed: 6, suspect: 1 }), usable: 4, held: 0, pool: sizes }),
    )
      .toMatchObject({ need: 0, serving: 4 });
    expect(
      refillPlan({ counts: counts({ routed: 6, suspect: 1 }), usable: 3, held: 0, pool: sizes }),
    )
      .toMatchObject({ need: 3, serving: 3 });
    // New entries are checked this run: they count.
    expect(
      refillPlan({ counts: counts({ checking: 2, routed: 2 }), usable: 2, held: 0, pool: sizes }),
    )
      .toMatchObject({ need: 0 });
  });

  it("never asks past max_size live entries", () => {
    expect(
      refillPlan({ counts: counts({ routed: 8, suspect: 1 }), usable: 1, held: 0, pool: sizes }),
    )
      .toMatchObject({ need: 1 });
    expect(refillPlan({ counts: counts({ routed: 10 }), usable: 0, held: 0, pool: sizes }))
      .toMatchObject({ need: 0 });
  });

  it("with max_concurrency, plans by the slots the gateways leave free", () => {
    const pool = { ...sizes, max_concurrency: 5 };
    // Five usable proxies of five slots: 25 slots; the gateways hold 10, so 3 proxies' worth
    // serve, below the minimum of 4: ask for 3 to reach the target of 6.
    expect(refillPlan({ counts: counts({ routed: 5 }), usable: 5, held: 10, pool }))
      .toEqual({ need: 3, serving: 3, freeSlots: 15 });
    // Idle, the same pool needs nothing.
    expect(refillPlan({ counts: counts({ routed: 5 }), usable: 5, held: 0, pool }))
      .toMatchObject({ need: 0, freeSlots: 25 });
    // Busier than its slots (transfers on proxies that drained): up to max_size.
    expect(refillPlan({ counts: counts({ routed: 5 }), usable: 2, held: 30, pool }))
      .toMatchObject({ need: 5 });
  });
});
