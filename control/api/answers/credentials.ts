/** Credentials as the API answers them: secret config fields masked, with `has_<key>` flags. */
import * as v from "valibot";
import { id, jsonObject, timestamp } from "./common.ts";

const CREDENTIAL_FIELDS = {
  id,
  project_id: id,
  name: v.string(),
  provider: v.string(),
  /** The config, each secret field that is set answered as the mask. */
  config: jsonObject,
  created_at: timestamp,
  updated_at: timestamp,
};

/** Beside its fields, a credential answers `has_<key>` (whether a secret is set) per secret. */
export const CredentialAnswer = v.pipe(
  v.looseObject(CREDENTIAL_FIELDS),
  v.check(
    (credential) =>
      Object.entries(credential).every(([key, value]) =>
        key in CREDENTIAL_FIELDS || (key.startsWith("has_") && typeof value === "boolean")
      ),
    "holds a field that is neither declared nor a has_<key> flag",
  ),
);
export type Credential =
  & v.InferOutput<v.StrictObjectSchema<typeof CREDENTIAL_FIELDS, undefined>>
  & { [flag: `has_${string}`]: boolean };

export const CredentialListAnswer = v.array(CredentialAnswer);
