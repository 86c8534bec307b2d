/**
 * Credential bodies. `static` takes the config below; a descriptor provider's config is checked
 * against its descriptor's fields by the credentials service (422 naming `config.<key>`).
 */
import * as v from "valibot";
import { nameField, readOnly } from "./common.ts";

export const STATIC_PROVIDER = "static";

const provider = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.toLowerCase(),
  v.regex(/^[a-z][a-z0-9_-]{1,47}$/, "must be static or a provider id from GET /api/v1/providers"),
);

/** The static provider only (the configuration file holds static credentials). */
export const staticProvider = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.toLowerCase(),
  v.check(
    (value) => value === STATIC_PROVIDER,
    "a configuration file holds static credentials only; make vendor credentials through the api",
  ),
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

/** A config as a body carries it; the service checks it against its provider. */
const anyConfig = v.record(v.string(), v.unknown(), "must be an object of config fields");

export const CreateCredentialBody = v.strictObject({
  name: nameField(),
  provider,
  config: v.optional(anyConfig, {}),
  id: readOnly(),
});

export const UpdateCredentialBody = v.strictObject({
  name: v.optional(nameField()),
  config: v.optional(anyConfig),
  provider: readOnly("cannot be changed; create another credential"),
  id: readOnly(),
});
