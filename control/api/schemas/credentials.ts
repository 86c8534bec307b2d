/** Credential bodies: only the static provider so far. */
import * as v from "valibot";
import { nameField, readOnly } from "./common.ts";

const PROVIDER_MESSAGE = "only the static provider is available yet; vendor and cloud " +
  "providers arrive in a later release";

const provider = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.toLowerCase(),
  v.check((value) => value === "static", PROVIDER_MESSAGE),
);

const credentialText = (max: number) =>
  v.nullable(
    v.pipe(v.string("must be text"), v.maxLength(max, `must be at most ${max} characters`)),
  );

/**
 * A static credential's config: the default login of the list's proxies that carry none in
 * their address. null removes a field; in an edit, the mask `********` keeps the password.
 */
export const StaticConfig = v.strictObject({
  username: v.optional(credentialText(255)),
  password: v.optional(credentialText(1024)),
});

export const CreateCredentialBody = v.strictObject({
  name: nameField(),
  provider,
  config: v.optional(StaticConfig, {}),
  id: readOnly(),
});

export const UpdateCredentialBody = v.strictObject({
  name: v.optional(nameField()),
  config: v.optional(StaticConfig),
  provider: readOnly("cannot be changed; create another credential"),
  id: readOnly(),
});
