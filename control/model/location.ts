/**
 * How exits are judged, as a body names it: the attribution sources in the order they are asked
 * and the conflict rule. One field each for the install's settings (`/geo/settings`) and a
 * project's own (which may be null: the install's).
 */
import * as v from "valibot";
import { CONFLICT_RULES, LOCATION_SOURCES } from "../../shared/geo/attribute.ts";

/** At least one source, each once, in the order they are asked. */
export const locationSourcesField = v.pipe(
  v.array(
    v.picklist(LOCATION_SOURCES, `each must be one of ${LOCATION_SOURCES.join(", ")}`),
    "must be a list of sources",
  ),
  v.minLength(1, "must name at least one source"),
  v.check((list) => new Set(list).size === list.length, "must name each source once"),
);

export const conflictRuleField = v.picklist(
  CONFLICT_RULES,
  `must be one of ${CONFLICT_RULES.join(", ")}`,
);
