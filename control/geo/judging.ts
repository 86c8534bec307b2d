/**
 * What attribution judges with: the policy in force (the install's sources and conflict rule)
 * and the databases in force. Read again before each batch, so a batch judges with what was
 * committed before it was asked for.
 */
import type { AttributionPolicy } from "../../shared/geo/attribute.ts";
import type { GeoStack } from "../../shared/geo/stack.ts";

export interface GeoJudging {
  /** The install's policy; a project's own sources and rule override it (policyOf). */
  policy: AttributionPolicy;
  /** The databases in force, in order; undefined when none is open. */
  stack: GeoStack | undefined;
}

export interface GeoJudgingSource {
  judging(): Promise<GeoJudging>;
}
