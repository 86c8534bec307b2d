/** A project's distribution keys as the API answers them. */
import * as v from "valibot";
import { cidrList } from "../../model/projects.ts";
import { id, nullableTimestamp, timestamp } from "./common.ts";

const KEY_FIELDS = {
  id,
  project_id: id,
  name: v.string(),
  /** The key's first characters, to tell keys apart; never the whole key. */
  prefix: v.string(),
  allowed_cidrs: cidrList,
  created_at: timestamp,
  expires_at: nullableTimestamp,
  last_used_at: nullableTimestamp,
  revoked_at: nullableTimestamp,
  active: v.boolean(),
};

export const DistributionKeyAnswer = v.strictObject(KEY_FIELDS);

export const DistributionKeyListAnswer = v.array(DistributionKeyAnswer);

/** The create answer: the record and the key itself, shown this once. */
export const CreatedDistributionKeyAnswer = v.strictObject({ ...KEY_FIELDS, key: v.string() });

/** A key as a list or its create answers it: `key` only in the latter. */
export type DistributionKey = v.InferOutput<typeof DistributionKeyAnswer> & { key?: string };
