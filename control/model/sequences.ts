/** A project's connector sequence: its connectors in order and what happens at their end. */
import * as v from "valibot";
import { SEQUENCE_ON_END, SEQUENCE_ON_UNAVAILABLE } from "../../shared/roles.ts";
import { readOnly, uuidField } from "./common.ts";

/** Connectors a sequence may name at most (a bound on the body, not a policy). */
export const MAX_SEQUENCE_CONNECTORS = 100;

export const SequenceBody = v.strictObject({
  connector_ids: v.pipe(
    v.array(uuidField, "must be a list of connector ids, in the order they serve"),
    v.minLength(2, "must name at least two connectors"),
    v.maxLength(
      MAX_SEQUENCE_CONNECTORS,
      `must name at most ${MAX_SEQUENCE_CONNECTORS} connectors`,
    ),
    v.check((ids) => new Set(ids).size === ids.length, "must name each connector once"),
  ),
  on_end: v.optional(
    v.picklist(SEQUENCE_ON_END, `must be one of ${SEQUENCE_ON_END.join(", ")}`),
    "stop",
  ),
  on_unavailable: v.optional(
    v.picklist(
      SEQUENCE_ON_UNAVAILABLE,
      `must be ${SEQUENCE_ON_UNAVAILABLE.join(", ")} (the only answer so far)`,
    ),
    "reject",
  ),
  // What the answer shows and the server sets: sending it back is an error, not ignored.
  project_id: readOnly(),
  current_index: readOnly("is read-only: setting a sequence starts it at its first connector"),
  current_connector_id: readOnly(),
  exhausted: readOnly(),
  version: readOnly(),
  switched_at: readOnly(),
  connectors: readOnly(),
  created_at: readOnly(),
  updated_at: readOnly(),
});
