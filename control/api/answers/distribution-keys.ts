/** A project's distribution keys as the API answers them. */
import * as v from "valibot";
import { cidrList } from "../../model/projects.ts";
import { id, ISSUED_SECRET_FIELDS } from "./common.ts";

const KEY_FIELDS = {
  id,
  project_id: id,
  name: v.string(),
  allowed_cidrs: cidrList,
  ...ISSUED_SECRET_FIELDS,
};

export const DistributionKeyAnswer = v.strictObject(KEY_FIELDS);

export const DistributionKeyListAnswer = v.array(DistributionKeyAnswer);

/** The create answer: the record and the key itself, shown this once. */
export const CreatedDistributionKeyAnswer = v.strictObject({ ...KEY_FIELDS, key: v.string() });

/** A key as a list or its create answers it: `key` only in the latter. */
export type DistributionKey = v.InferOutput<typeof DistributionKeyAnswer> & { key?: string };
