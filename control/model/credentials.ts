/**
 * Credential bodies. `static` and `provider_api` take the configs below; a descriptor
 * provider's config is checked against its descriptor's fields by the credentials service (422
 * naming `config.<key>`).
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

/** Keys of a provider_api credential: what its connectors' templates read as `{credential.<key>}`. */
const PROVIDER_API_KEY = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
const MAX_PROVIDER_API_KEYS = 32;
const MAX_SECRET_CHARS = 4096;

/**
 * A provider_api credential's config: a flat object of text values (API keys, tokens, account
 * names), every one of them secret. null removes a key; in an edit, the mask keeps a value.
 */
export const ProviderApiCredentialConfig = v.pipe(
  v.record(
    v.pipe(
      v.string(),
      v.regex(PROVIDER_API_KEY, "must be a key of letters, digits, _ and -, from a letter or _"),
    ),
    v.pipe(
      v.string("must be text (a secret)"),
      v.maxLength(MAX_SECRET_CHARS, `must be at most ${MAX_SECRET_CHARS} characters`),
    ),
    "must be an object of text values",
  ),
  v.check(
    (config) => Object.keys(config).length <= MAX_PROVIDER_API_KEYS,
    `must hold at most ${MAX_PROVIDER_API_KEYS} keys`,
  ),
);

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
