/**
 * A credential's form, for create and edit: its name, its provider (static, or a descriptor of
 * the catalogue; fixed once created), and the config that provider takes. A static credential
 * holds an optional default login for a list's proxies; a vendor's is drawn from its
 * descriptor's credential fields (provider-fields.tsx). The API judges the values: its message
 * for `config.<key>` shows beside that field, and the vendor's refusal (`config`) above them.
 */
import type { Credential, ProviderField, ProviderRecord } from "../api/types.ts";
import { Field, FieldError, FormError, Select, TextInput } from "../ui/forms.tsx";
import {
  configOf,
  type FieldValues,
  initialValues,
  ProviderFieldInputs,
  secretsSet,
} from "../ui/provider-fields.tsx";
import { useForm } from "../ui/use-form.ts";

export const STATIC_PROVIDER = "static";

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
): readonly ProviderField[] {
  if (provider === STATIC_PROVIDER) return STATIC_FIELDS;
  return providers.find((p) => p.id === provider)?.credential_fields ?? [];
}

interface FormState {
  name: string;
  provider: string;
  values: FieldValues;
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
    };
  };
  const fields = credentialFields(credential?.provider ?? STATIC_PROVIDER, providers);
  const setSecrets = secretsSet(fields, credential?.config);
  const bodyOf = (state: FormState): Record<string, unknown> => {
    const own = credentialFields(state.provider, providers);
    const config = configOf(own, state.values, creating ? "create" : "merge", setSecrets);
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
    set("values")(initialValues(credentialFields(id, providers)));
  };
  const known = state.provider === STATIC_PROVIDER || provider !== undefined;

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
            ? "Static: a login for proxies you list. A vendor: its account, for vendor connectors"
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
                ...providers.map((p) => [p.id, p.name] as const),
              ]
              : [[state.provider, provider?.name ?? state.provider] as const]}
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
      </fieldset>
      <fieldset data-field="config">
        <legend>{provider ? `${provider.name} account` : "Default login"}</legend>
        <FieldError error={error} field="config" exact />
        {known
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
