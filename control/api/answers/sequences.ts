/** A project's connector sequence as the API answers it. */
import * as v from "valibot";
import { SEQUENCE_ON_END, SEQUENCE_ON_UNAVAILABLE } from "../../../shared/roles.ts";
import { count, id, nullableTimestamp, timestamp } from "./common.ts";

export const SequenceAnswer = v.strictObject({
  project_id: id,
  connector_ids: v.array(id),
  current_index: count,
  /** The connector serving now; null once exhausted. */
  current_connector_id: v.nullable(id),
  on_end: v.picklist(SEQUENCE_ON_END),
  on_unavailable: v.picklist(SEQUENCE_ON_UNAVAILABLE),
  exhausted: v.boolean(),
  version: count,
  switched_at: nullableTimestamp,
  /** The connectors in the sequence's order, each with when it ran dry. */
  connectors: v.array(
    v.strictObject({
      id,
      /** Null for an id no connector has any more. */
      name: v.nullable(v.string()),
      depleted_at: nullableTimestamp,
    }),
  ),
  created_at: timestamp,
  updated_at: timestamp,
});
export type Sequence = v.InferOutput<typeof SequenceAnswer>;
