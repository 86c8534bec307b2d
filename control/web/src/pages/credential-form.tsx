/**
 * A credential's form, for create and edit: its name, its provider (static, a cloud, or a
 * descriptor of the catalogue; fixed once created), and the config that provider takes. A static
 * credential holds an optional default login for a list's proxies; a cloud's is its account's
 * keys (ui/clouds.ts); a vendor's is drawn from its descriptor's credential fields
 * (provider-fields.tsx). Secrets are masked inputs, and a blank one keeps what is stored. The API judges the values: its message
 * for `config.<key>` shows beside that field, and the vendor's refusal (`config`) above them.
 */
import type { ApiError } from "../api/client.ts";
import type { Credential } from "../../../api/answers/credentials.ts";
import type { ProviderField, ProviderRecord } from "../../../api/answers/providers.ts";
import { SECRET_MASK } from "../../../model/secrets.ts";
import { Field, FieldError, FormError, Select, TextInput } from "../ui/forms.tsx";
import {
  configOf,
  type FieldValues,
  initialValues,
  ProviderFieldInputs,
  secretsSet,
} from "../ui/provider-fields.tsx";
import { useForm } from "../ui/use-form.ts";
import {
  CLOUD_CREDENTIAL_FIELDS,
  CLOUD_NAMES,
  CLOUD_PROVIDERS,
  isCloudProvider,
} from "../ui/clouds.ts";

export const STATIC_PROVIDER = "static";
/** A provider_api connector's credential: named secrets its templates read. */
export const PROVIDER_API_PROVIDER = "provider_api";

/** The static provider's config (the API's StaticConfig), as descriptor fields. */
export const STATIC_FIELDS: readonly ProviderField[] = [
  {
    key: "username",
    label: "Username",
    type: "text",
    secret: false,
    required: false,
    help: "The login of the list's proxies that carry none in their address",
  },
  { key: "password", label: "Password", type: "password", secret: true, required: false },
];

export function credentialFields(
  provider: string,
  providers: readonly ProviderRecord[],
  /** A provider_api credential's stored config: its keys are its (secret) fields. */
  config?: Readonly<Record<string, unknown>>,
): readonly ProviderField[] {
  if (provider === STATIC_PROVIDER) return STATIC_FIELDS;
  if (isCloudProvider(provider)) return CLOUD_CREDENTIAL_FIELDS[provider];
  if (provider === PROVIDER_API_PROVIDER) {
    return Object.keys(config ?? {}).map((key) => ({
      key,
      label: key,
      type: "password",
      secret: true,
      required: false,
    }));
  }
  return providers.find((p) => p.id === provider)?.credential_fields ?? [];
}

/** One secret of a provider_api credential: its key and a new value (blank: kept when set). */
interface SecretRow {
  key: string;
  value: string;
  /** The key as stored (its value set); undefined for a row added in the form. */
  stored?: string;
}

interface FormState {
  name: string;
  provider: string;
  values: FieldValues;
  secrets: SecretRow[];
}

function secretRowsOf(stored: Credential | undefined): SecretRow[] {
  if (stored?.provider !== PROVIDER_API_PROVIDER) return [{ key: "api_key", value: "" }];
  const keys = Object.keys(stored.config);
  return keys.length > 0
    ? keys.map((key) => ({ key, value: "", stored: key }))
    : [{ key: "", value: "" }];
}

/**
 * A provider_api credential's config: every row's value; in an edit (merged key by key), a
 * blank value of a stored key sends the mask back (kept), and a stored key no row holds any
 * more, or renamed, is sent as null (removed).
 */
function secretsConfig(rows: readonly SecretRow[], creating: boolean): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const row of rows) {
    if (row.stored !== undefined && row.stored !== row.key.trim()) config[row.stored] = null;
  }
  for (const row of rows) {
    const key = row.key.trim();
    if (key === "" && row.value === "") continue;
    if (row.value !== "") config[key] = row.value;
    else if (!creating && row.stored === key) config[key] = SECRET_MASK;
    else config[key] = "";
  }
  return config;
}

export function CredentialForm(
  { credential, providers, readOnly, onSubmit, submitLabel, initialProvider }: {
    credential?: Credential;
    providers: readonly ProviderRecord[];
    readOnly: boolean;
    /** Saves; the credential as stored, when it stays on the page, refills the form. */
    onSubmit: (body: Record<string, unknown>) => Promise<Credential | void>;
    submitLabel: string;
    /** A new credential's provider, as chosen elsewhere (a connector form's link). */
    initialProvider?: string;
  },
) {
  const creating = credential === undefined;
  const stateOf = (stored: Credential | undefined): FormState => {
    const provider = stored?.provider ?? initialProvider ?? STATIC_PROVIDER;
    return {
      name: stored?.name ?? "",
      provider,
      values: initialValues(credentialFields(provider, providers), stored?.config),
      secrets: secretRowsOf(stored),
    };
  };
  const fields = credentialFields(credential?.provider ?? STATIC_PROVIDER, providers);
  const setSecrets = secretsSet(fields, credential?.config);
  const bodyOf = (state: FormState): Record<string, unknown> => {
    const own = credentialFields(state.provider, providers);
    const config = state.provider === PROVIDER_API_PROVIDER
      ? secretsConfig(state.secrets, creating)
      : configOf(own, state.values, creating ? "create" : "merge", setSecrets);
    return creating
      ? { name: state.name, provider: state.provider, config }
      : { name: state.name, config };
  };
  const { state, set, error, busy, saved, submit } = useForm(
    stateOf,
    credential,
    bodyOf,
    onSubmit,
  );
  const provider = providers.find((p) => p.id === state.provider);
  const shown = credentialFields(state.provider, providers);
  const chooseProvider = (id: string) => {
    set("provider")(id);
    set("secrets")(secretRowsOf(undefined));
    set("values")(initialValues(credentialFields(id, providers)));
  };
  const isProviderApi = state.provider === PROVIDER_API_PROVIDER;
  const cloud = isCloudProvider(state.provider) ? state.provider : undefined;
  const known = state.provider === STATIC_PROVIDER || cloud !== undefined || provider !== undefined;

  return (
    <form class="credential-form" onSubmit={submit} aria-label="Credential" noValidate>
      <FormError error={error} />
      <fieldset>
        <legend>Credential</legend>
        <Field label="Name" field="name" error={error} required>
          <TextInput
            name="name"
            value={state.name}
            onInput={set("name")}
            disabled={readOnly}
            required
          />
        </Field>
        <Field
          label="Provider"
          field="provider"
          error={error}
          hint={creating
            ? "Static: a login for proxies you list. A vendor: its account, for vendor " +
              "connectors. provider_api: secrets a provider_api connector's calls read. A " +
              "cloud: the account cloud connectors run instances with"
            : "Fixed once created"}
        >
          <Select
            name="provider"
            value={state.provider}
            onChange={chooseProvider}
            disabled={readOnly || !creating}
            options={creating
              ? [
                [STATIC_PROVIDER, "Static (proxies you list)"] as const,
                [PROVIDER_API_PROVIDER, "provider_api (secrets for a provider's API)"] as const,
                ...CLOUD_PROVIDERS.map((id) => [id, `${CLOUD_NAMES[id]}, cloud`] as const),
                ...providers.map((p) => [p.id, p.name] as const),
              ]
              : [
                [
                  state.provider,
                  cloud ? CLOUD_NAMES[cloud] : provider?.name ?? state.provider,
                ] as const,
              ]}
          />
        </Field>
        {provider
          ? (
            <p class="muted provider-note">
              {provider.description} {provider.docs_url
                ? (
                  <a href={provider.docs_url} target="_blank" rel="noreferrer noopener">
                    Vendor docs ↗
                  </a>
                )
                : null}
              {provider.checks_credentials
                ? " Octoprox checks the account with the vendor before storing it."
                : null}
            </p>
          )
          : null}
        {cloud
          ? (
            <p class="muted provider-note">
              The keys cloud connectors launch, list and terminate instances with. A connector using
              it is checked with the cloud when it is saved, and again when these change.
            </p>
          )
          : null}
      </fieldset>
      <fieldset data-field="config">
        <legend>
          {provider
            ? `${provider.name} account`
            : cloud
            ? `${CLOUD_NAMES[cloud]} account`
            : isProviderApi
            ? "Secrets"
            : "Default login"}
        </legend>
        <FieldError error={error} field="config" exact />
        {isProviderApi
          ? (
            <SecretRows
              rows={state.secrets}
              onChange={set("secrets")}
              error={error}
              readOnly={readOnly}
            />
          )
          : known
          ? (
            <ProviderFieldInputs
              fields={shown}
              values={state.values}
              onChange={set("values")}
              error={error}
              readOnly={readOnly}
              setSecrets={creating ? undefined : setSecrets}
            />
          )
          : (
            <p class="muted">
              The provider {state.provider}{" "}
              is not in the catalogue any more; its fields cannot be shown.
            </p>
          )}
        {shown.some((f) => f.required)
          ? (
            <p class="muted">
              <span class="required" aria-hidden="true">*</span> required
            </p>
          )
          : null}
      </fieldset>
      {readOnly
        ? <p class="muted">Your role can see this credential, not change it.</p>
        : (
          <div class="actions">
            <button type="submit" disabled={busy}>{busy ? "Saving…" : submitLabel}</button>
            {saved ? <span class="saved" role="status">Saved</span> : null}
          </div>
        )}
    </form>
  );
}

/**
 * A provider_api credential's secrets, a row each: its key (what templates read as
 * `{credential.<key>}`) and its value, always masked. A stored value shows as "set" and a blank
 * value keeps it; removing a row removes the key. The API's message for `config.<key>` shows at
 * its row.
 */
function SecretRows(
  { rows, onChange, error, readOnly }: {
    rows: readonly SecretRow[];
    onChange: (rows: SecretRow[]) => void;
    error?: ApiError;
    readOnly: boolean;
  },
) {
  const update = (index: number, change: Partial<SecretRow>) =>
    onChange(rows.map((row, i) => (i === index ? { ...row, ...change } : row)));
  return (
    <div class="secret-rows">
      <p class="muted">
        Every value is secret: answers show it as set, never its value. Templates read a key as{" "}
        <code>{"{credential.<key>}"}</code>.
      </p>
      {rows.map((row, index) => {
        const field = `config.${row.key.trim()}`;
        const invalid = error?.forField(field) !== undefined;
        return (
          <div
            key={index}
            class={`secret-row${invalid ? " invalid" : ""}`}
            data-secret-row={row.key}
          >
            <label class="field">
              <span class="label">Key</span>
              <TextInput
                name={`secret_key_${index}`}
                value={row.key}
                onInput={(key) => update(index, { key })}
                disabled={readOnly}
                placeholder="api_key"
              />
            </label>
            <label class="field">
              <span class="label">Value</span>
              <TextInput
                name={`secret_value_${index}`}
                type="password"
                value={row.value}
                onInput={(value) => update(index, { value })}
                disabled={readOnly}
                placeholder={row.stored !== undefined && row.stored === row.key.trim()
                  ? "set (blank keeps it)"
                  : ""}
              />
              {row.stored !== undefined && row.stored === row.key.trim()
                ? <span class="badge ok" data-secret-set={row.key}>set</span>
                : null}
            </label>
            {readOnly ? null : (
              <button
                type="button"
                class="secondary small"
                onClick={() => onChange(rows.filter((_, i) => i !== index))}
              >
                Remove
              </button>
            )}
            <FieldError error={error} field={field} />
          </div>
        );
      })}
      {(error?.issues ?? []).filter((issue) =>
        issue.field.startsWith("body.config.") &&
        !rows.some((row) => issue.field === `body.config.${row.key.trim()}`)
      ).map((issue) => (
        // A key no row holds (one removed that a connector still reads): named in words.
        <p key={issue.field} class="field-error" role="alert">
          <code>{issue.field.replace(/^body\.config\./, "")}</code>: {issue.message}
        </p>
      ))}
      {readOnly ? null : (
        <button
          type="button"
          class="secondary small"
          onClick={() => onChange([...rows, { key: "", value: "" }])}
        >
          Add a secret
        </button>
      )}
    </div>
  );
}
