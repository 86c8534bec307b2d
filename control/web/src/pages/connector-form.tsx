/**
 * Every field a connector has in the API, for create and edit: its name, kind and credential,
 * its place in the routing (enabled, weight and the share of requests it gives, countries, the
 * domain allow or deny list, the health-check URL), its per-proxy rate limit and its traffic
 * limit. A vendor connector also names its provider (from the catalogue), a credential of that
 * provider, the proxy type, the session mode (types with dynamic sessions), the slots (session
 * pools, and port pools whose exits no vendor call lists) and the descriptor's own connector
 * fields. A cloud connector names its cloud, a credential of that cloud and where and how many
 * instances run (cloud-fields.tsx). Values are kept as typed and sent as the API takes them;
 * the API judges them (a cloud connector's also by its cloud), and its message for a field is
 * shown beside that field.
 */
import { useMemo, useRef } from "preact/hooks";
import { ApiError } from "../api/client.ts";
import {
  TRAFFIC_ACTIONS,
  TRAFFIC_LIMIT_STATUSES,
  TRAFFIC_PERIODS,
} from "../../../../shared/roles.ts";
import type { Connector } from "../../../api/answers/connectors.ts";
import type { Credential } from "../../../api/answers/credentials.ts";
import type {
  ProviderDetail,
  ProviderRecord,
  ProviderType,
} from "../../../api/answers/providers.ts";
import {
  Checkbox,
  Field,
  FieldError,
  FormError,
  optionalNumber,
  parseList,
  Select,
  TextInput,
} from "../ui/forms.tsx";
import {
  configOf,
  type FieldValues,
  initialValues,
  ProviderFieldInputs,
  secretsSet,
} from "../ui/provider-fields.tsx";
import { MODE_HELP, MODE_NAMES, rendersOf } from "../ui/providers.ts";
import { CLOUD_KIND, CLOUD_NAMES, CLOUD_PROVIDERS, isCloudProvider } from "../ui/clouds.ts";
import {
  CloudConfigFields,
  cloudConfigOf,
  type CloudValues,
  cloudValuesOf,
  type ConnectorOptions,
} from "./cloud-fields.tsx";
import { useApi } from "../ui/use-api.ts";
import { useForm } from "../ui/use-form.ts";
import { formatBytes, formatPercent } from "../ui/format.ts";

/** The kinds the API accepts today (it refuses the others with a 422 that says so). */
const KINDS = [
  ["static", "static (proxies you list)"],
  ["vendor", "vendor (a provider's pool)"],
  ["provider_api", "provider_api (proxies with a lifetime, fetched from an API)"],
  [CLOUD_KIND, "cloud (instances run on AWS, GCP or Azure)"],
] as const;

/** The credential provider of provider_api connectors. */
export const PROVIDER_API = "provider_api";

/**
 * A new provider_api connector's config: a working shape to edit (docs/provider-api.md has
 * every field), reading the credential's `api_key`.
 */
export const STARTER_PROVIDER_API_CONFIG = {
  fetch: {
    url: "https://api.provider.example/v1/proxies",
    method: "GET",
    params: { count: "{count}" },
    auth: { type: "api_key", header: "X-Api-Key", value: "{credential.api_key}" },
    estimated_ips_per_call: 10,
    request_interval_ms: 1000,
    max_in_flight: 1,
    max_total: null,
  },
  parser: {
    format: "json",
    items: "data.proxies",
    fields: { host: "ip", port: "port", username: "user", password: "pass", ttl_seconds: "ttl" },
    safety_margin_seconds: 5,
  },
  pool: { min_size: 10, target_size: 20, max_size: 50, reserve_for_gateway: null },
};

const configText = (config: unknown) => JSON.stringify(config, null, 2);

/** Slots a connector gets when it names none (the API's default, within the type's bound). */
const DEFAULT_SLOTS = 10;

const SESSION_MODES = [
  ["pool", "Session pool (a row per vendor session)"],
  ["dynamic", "Dynamic sessions (one row, rendered per request)"],
] as const;

/** What a new connector's form starts with (a credential page's "new connector" link). */
export interface ConnectorStart {
  kind?: string;
  provider?: string;
  credential_id?: string;
}

interface FormState {
  name: string;
  kind: string;
  credential_id: string;
  provider: string;
  proxy_type: string;
  session_mode: string;
  slots: string;
  values: FieldValues;
  /** A provider_api connector's config, as JSON typed in the editor. */
  config_json: string;
  /** A cloud connector's config, as typed. */
  cloud: CloudValues;
  enabled: boolean;
  weight: string;
  /** Blank: ranked for escalation by price alone. */
  tier: string;
  countries: string;
  domain_allow: string;
  domain_deny: string;
  healthcheck_url: string;
  rate_on: boolean;
  rate_max_requests: string;
  rate_window_seconds: string;
  rate_quarantine_min: string;
  rate_quarantine_max: string;
  rate_sticky: boolean;
  traffic_on: boolean;
  traffic_limit_bytes: string;
  traffic_period: string;
  traffic_reset_day: string;
  traffic_action: string;
  traffic_warn_percent: string;
  traffic_limit_status: string;
  traffic_price_per_gb: string;
  traffic_currency: string;
}

const text = (value: unknown) => (value === null || value === undefined ? "" : String(value));

function stateOf(
  connector: Connector | undefined,
  providers: readonly ProviderRecord[],
  start: ConnectorStart = {},
): FormState {
  const rate = connector?.rate_limit_config;
  const traffic = connector?.traffic_config;
  const config = connector?.config ?? {};
  const providerId = connector ? connector.provider ?? "" : start.provider ?? "";
  const provider = providers.find((p) => p.id === providerId);
  return {
    name: connector?.name ?? "",
    kind: connector?.kind ?? start.kind ?? "static",
    credential_id: connector?.credential_id ?? start.credential_id ?? "",
    provider: providerId === "static" ? "" : providerId,
    proxy_type: typeof config.proxy_type === "string"
      ? config.proxy_type
      : provider?.proxy_types[0]?.id ?? "",
    session_mode: config.session_mode === "dynamic" ? "dynamic" : "pool",
    slots: text(config.slots),
    values: initialValues(provider?.connector_fields ?? [], connector ? config : undefined),
    // An edit starts from the config as stored, so a save keeps what was not touched.
    config_json: connector?.kind === PROVIDER_API
      ? configText(config)
      : configText(STARTER_PROVIDER_API_CONFIG),
    cloud: cloudValuesOf(connector?.kind === CLOUD_KIND ? config : undefined),
    enabled: connector?.enabled ?? true,
    weight: text(connector?.weight ?? 1),
    tier: connector?.tier === null || connector?.tier === undefined ? "" : text(connector.tier),
    countries: (connector?.countries ?? []).join(", "),
    domain_allow: (connector?.domain_allow ?? []).join("\n"),
    domain_deny: (connector?.domain_deny ?? []).join("\n"),
    healthcheck_url: connector?.healthcheck_url ?? "",
    rate_on: rate !== null && rate !== undefined,
    rate_max_requests: text(rate?.max_requests),
    rate_window_seconds: text(rate?.window_seconds),
    rate_quarantine_min: text(rate?.quarantine_seconds_min),
    rate_quarantine_max: text(rate?.quarantine_seconds_max),
    rate_sticky: rate?.sticky_quarantine ?? false,
    traffic_on: traffic !== null && traffic !== undefined,
    traffic_limit_bytes: text(traffic?.limit_bytes),
    traffic_period: traffic?.period ?? "month",
    traffic_reset_day: text(traffic?.reset_day ?? 1),
    traffic_action: traffic?.action ?? "alert",
    traffic_warn_percent: text(traffic?.warn_percent ?? 80),
    traffic_limit_status: text(traffic?.limit_status ?? 509),
    traffic_price_per_gb: text(traffic?.price_per_gb),
    traffic_currency: traffic?.currency ?? "USD",
  };
}

/** Whether a type's connectors choose pool or dynamic sessions. */
function hasSessionModes(type: ProviderType | undefined): boolean {
  return type?.mode === "session" && type.dynamic_sessions;
}

/**
 * Whether the connector takes a slot count: a session pool, or a port pool whose exits no
 * vendor call lists. `listed`: whether the type's exits come from a call (undefined: not known
 * yet, while the descriptor loads).
 */
function takesSlots(
  type: ProviderType | undefined,
  sessionMode: string,
  listed: boolean | undefined,
): boolean | undefined {
  if (type === undefined) return false;
  if (type.mode === "session") return !(type.dynamic_sessions && sessionMode === "dynamic");
  if (type.mode === "port") return listed === undefined ? undefined : !listed;
  return false;
}

interface VendorContext {
  provider: ProviderRecord | undefined;
  type: ProviderType | undefined;
  /** Whether the type's exits come from a vendor call; undefined while not known. */
  listed: boolean | undefined;
  /** The connector's secret fields that are set (answered masked). */
  setSecrets: ReadonlySet<string>;
}

/** A vendor connector's config: the whole of it, as the API replaces it on an edit. */
function vendorConfig(
  state: FormState,
  creating: boolean,
  vendor: VendorContext,
): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  if (state.proxy_type !== "") config.proxy_type = state.proxy_type;
  if (hasSessionModes(vendor.type)) config.session_mode = state.session_mode;
  const slotted = takesSlots(vendor.type, state.session_mode, vendor.listed);
  // While the descriptor loads, a slot count already there is kept as it is.
  if (slotted !== false && state.slots.trim() !== "") config.slots = optionalNumber(state.slots);
  return {
    ...config,
    ...configOf(
      vendor.provider?.connector_fields ?? [],
      state.values,
      creating ? "create" : "replace",
      vendor.setSecrets,
    ),
  };
}

/** The body for the API: every field, so what the form shows is what is stored. */
function bodyOf(state: FormState, creating: boolean, vendor: VendorContext): Record<
  string,
  unknown
> {
  const body: Record<string, unknown> = {
    name: state.name,
    credential_id: state.credential_id === "" ? null : state.credential_id,
    enabled: state.enabled,
    weight: optionalNumber(state.weight) ?? state.weight,
    tier: optionalNumber(state.tier),
    countries: parseList(state.countries),
    domain_allow: parseList(state.domain_allow),
    domain_deny: parseList(state.domain_deny),
    healthcheck_url: state.healthcheck_url.trim() === "" ? null : state.healthcheck_url.trim(),
    rate_limit_config: state.rate_on
      ? {
        max_requests: optionalNumber(state.rate_max_requests),
        window_seconds: optionalNumber(state.rate_window_seconds),
        ...(state.rate_quarantine_min.trim() !== ""
          ? { quarantine_seconds_min: optionalNumber(state.rate_quarantine_min) }
          : {}),
        ...(state.rate_quarantine_max.trim() !== ""
          ? { quarantine_seconds_max: optionalNumber(state.rate_quarantine_max) }
          : {}),
        sticky_quarantine: state.rate_sticky,
      }
      : null,
    traffic_config: state.traffic_on
      ? {
        limit_bytes: optionalNumber(state.traffic_limit_bytes),
        period: state.traffic_period,
        reset_day: optionalNumber(state.traffic_reset_day) ?? 1,
        action: state.traffic_action,
        warn_percent: optionalNumber(state.traffic_warn_percent) ?? 80,
        limit_status: Number(state.traffic_limit_status),
        price_per_gb: optionalNumber(state.traffic_price_per_gb),
        currency: state.traffic_currency,
      }
      : null,
  };
  if (state.kind === "vendor" && vendor.provider !== undefined) {
    body.config = vendorConfig(state, creating, vendor);
  }
  if (state.kind === PROVIDER_API) body.config = parsedConfig(state.config_json);
  if (state.kind === CLOUD_KIND) body.config = cloudConfigOf(state.provider, state.cloud);
  if (creating) {
    body.kind = state.kind;
    if ((state.kind === "vendor" || state.kind === CLOUD_KIND) && state.provider !== "") {
      body.provider = state.provider;
    }
    if (body.credential_id === null) delete body.credential_id;
    if (body.rate_limit_config === null) delete body.rate_limit_config;
    if (body.traffic_config === null) delete body.traffic_config;
  }
  return body;
}

/**
 * The editor's JSON; text that does not parse is refused here, at the editor, in the shape of
 * the API's own 422, and nothing is sent.
 */
function parsedConfig(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (failure) {
    throw new ApiError(422, "Validation failed", [{
      field: "body.config",
      message: `is not JSON: ${(failure as Error).message}`,
    }]);
  }
}

/**
 * The share of requests a connector gets among the enabled ones: its weight over the sum of
 * the enabled weights (its own counted in when it is enabled). Null when it gets none or the
 * weight is not a number yet.
 */
export function weightShare(weight: number, enabled: boolean, otherEnabled: number): number | null {
  if (!enabled || !Number.isFinite(weight) || weight <= 0) return null;
  return weight / (weight + otherEnabled);
}

export function ConnectorForm(
  {
    projectId,
    connector,
    others,
    credentials,
    providers,
    readOnly,
    onSubmit,
    submitLabel,
    start,
    lockedNote,
  }: {
    projectId: string;
    connector?: Connector;
    /** The project's other connectors, for the share the weight gives. */
    others: readonly Connector[];
    credentials: readonly Credential[];
    /** The provider catalogue (GET /providers), for vendor connectors. */
    providers: readonly ProviderRecord[];
    readOnly: boolean;
    /** Saves; the connector as stored, when it stays on the page, refills the form. */
    onSubmit: (body: Record<string, unknown>) => Promise<Connector | void>;
    submitLabel: string;
    /** A new connector's first values. */
    start?: ConnectorStart;
    /** Why the form cannot be saved whatever the role (a connector being deleted). */
    lockedNote?: string;
  },
) {
  const creating = connector === undefined;
  // What the body needs of the catalogue, from the form's values (filled below, each render).
  const vendor = useRef<VendorContext>({
    provider: undefined,
    type: undefined,
    listed: undefined,
    setSecrets: new Set(),
  });
  const { state, set, error, busy, saved, submit } = useForm(
    (stored: Connector | undefined) => stateOf(stored, providers, start),
    connector,
    (values: FormState) => bodyOf(values, creating, vendor.current),
    onSubmit,
  );
  const isVendor = state.kind === "vendor";
  const isProviderApi = state.kind === PROVIDER_API;
  const isCloud = state.kind === CLOUD_KIND;
  const cloud = isCloud && isCloudProvider(state.provider) ? state.provider : undefined;
  const options = useApi<ConnectorOptions>(isCloud ? "/connector-options" : null);
  const provider = isVendor ? providers.find((p) => p.id === state.provider) : undefined;
  const type = provider?.proxy_types.find((t) => t.id === state.proxy_type) ??
    provider?.proxy_types[0];
  // Whether a port type's exits come from a vendor call is in the whole descriptor.
  const detail = useApi<ProviderDetail>(
    provider && type?.mode === "port" ? `/providers/${encodeURIComponent(provider.id)}` : null,
  );
  const described = detail.data?.id === provider?.id ? detail.data : undefined;
  const listed = type?.mode === "port"
    ? (described
      ? described.descriptor.proxy_types.some((t) => t.id === type.id && t.call !== undefined)
      : undefined)
    : type?.mode === "list";
  const setSecrets = useMemo(
    () => secretsSet(provider?.connector_fields ?? [], connector?.config),
    [provider, connector],
  );
  vendor.current = { provider, type, listed, setSecrets };
  const slotted = takesSlots(type, state.session_mode, listed) === true;
  const ownCredentials = credentials.filter((c) =>
    isVendor || isCloud
      ? c.provider === state.provider
      : c.provider === (isProviderApi ? PROVIDER_API : "static")
  );
  // A credential the connector names stays listed, whatever its provider.
  const current = credentials.find((c) => c.id === state.credential_id);
  const credentialOptions = current && !ownCredentials.includes(current)
    ? [...ownCredentials, current]
    : ownCredentials;

  const chooseKind = (kind: string) => {
    set("kind")(kind);
    // A cloud connector starts on the cloud a credential of the project is for, else AWS.
    const cloudStart = credentials.find((c) => isCloudProvider(c.provider))?.provider ?? "aws";
    if (kind === CLOUD_KIND) set("provider")(cloudStart);
    else if (isCloudProvider(state.provider)) set("provider")("");
    // A provider_api connector's templates read its credential, a cloud connector's launches
    // its instances: the first one is chosen.
    const first = kind === PROVIDER_API ? PROVIDER_API : kind === CLOUD_KIND ? cloudStart : "";
    set("credential_id")(
      first === "" ? "" : credentials.find((c) => c.provider === first)?.id ?? "",
    );
  };
  const chooseCloud = (id: string) => {
    set("provider")(id);
    set("credential_id")(credentials.find((c) => c.provider === id)?.id ?? "");
  };
  const chooseProvider = (id: string) => {
    const chosen = providers.find((p) => p.id === id);
    set("provider")(id);
    set("proxy_type")(chosen?.proxy_types[0]?.id ?? "");
    set("session_mode")("pool");
    set("slots")("");
    set("values")(initialValues(chosen?.connector_fields ?? []));
    set("credential_id")(credentials.find((c) => c.provider === id)?.id ?? "");
  };
  const chooseType = (id: string) => {
    set("proxy_type")(id);
    set("session_mode")("pool");
    set("slots")("");
  };

  const input = (key: keyof FormState, props: { type?: "number" | "url" } = {}) => (
    <TextInput
      name={key}
      value={state[key] as string}
      onInput={set(key) as (value: string) => void}
      disabled={readOnly}
      type={props.type}
    />
  );

  const otherEnabled = others.filter((other) => other.enabled && other.id !== connector?.id)
    .reduce((sum, other) => sum + other.weight, 0);
  const share = weightShare(Number(state.weight.trim() || NaN), state.enabled, otherEnabled);
  const limitBytes = optionalNumber(state.traffic_limit_bytes);

  return (
    // noValidate: the API judges the values (a price of 2.5 is not a browser "step" error).
    <form class="connector-form" onSubmit={submit} aria-label="Connector" noValidate>
      <FormError error={error} />
      <fieldset>
        <legend>Connector</legend>
        <Field label="Name" field="name" error={error}>{input("name")}</Field>
        <Field
          label="Kind"
          field="kind"
          error={error}
          hint={creating
            ? "Static: proxies you add or upload. Vendor: a provider's pool, kept by its sync. " +
              "provider_api: short-lived proxies fetched from a provider's API into a pool. " +
              "Cloud: instances an account runs, scaled with the demand and rotated"
            : "Fixed once created"}
        >
          <Select
            name="kind"
            value={state.kind}
            onChange={chooseKind}
            disabled={readOnly || !creating}
            options={creating ? KINDS : [[state.kind, state.kind]]}
          />
        </Field>
        {isVendor
          ? (
            <Field
              label="Provider"
              field="provider"
              error={error}
              required
              hint={creating
                ? (provider ? provider.description : "The vendor, from the Providers catalogue")
                : "Fixed once created"}
            >
              <Select
                name="provider"
                value={state.provider}
                onChange={chooseProvider}
                disabled={readOnly || !creating}
                required
                options={creating
                  ? [
                    ["", "Choose a provider…"] as const,
                    ...providers.map((p) => [p.id, p.name] as const),
                  ]
                  : [[state.provider, provider?.name ?? state.provider] as const]}
              />
            </Field>
          )
          : null}
        {isCloud
          ? (
            <Field
              label="Cloud"
              field="provider"
              error={error}
              required
              hint={creating
                ? "Where its instances run; checked with the cloud before it is saved"
                : "Fixed once created"}
            >
              <Select
                name="cloud"
                value={state.provider}
                onChange={chooseCloud}
                disabled={readOnly || !creating}
                required
                options={creating
                  ? CLOUD_PROVIDERS.map((id) => [id, CLOUD_NAMES[id]] as const)
                  : [[state.provider, cloud ? CLOUD_NAMES[cloud] : state.provider] as const]}
              />
            </Field>
          )
          : null}
        <Field
          label="Credential"
          field="credential_id"
          error={error}
          required={isVendor || isCloud}
          hint={isCloud
            ? (ownCredentials.length === 0
              ? (
                <>
                  This project has no {cloud ? CLOUD_NAMES[cloud] : state.provider} credential yet:
                  {" "}
                  <a href={`/projects/${projectId}/credentials?new=${state.provider}`}>
                    create one
                  </a>
                </>
              )
              : "The account that launches, lists and terminates its instances")
            : isProviderApi
            ? (ownCredentials.length === 0
              ? (
                <>
                  This project has no provider_api credential yet:{" "}
                  <a href={`/projects/${projectId}/credentials?new=${PROVIDER_API}`}>create one</a>
                  {" "}
                  (needed when the config reads {"{credential.<key>}"})
                </>
              )
              : "The secrets the config's templates read as {credential.<key>}")
            : isVendor
            ? (state.provider === ""
              ? "A credential of the provider's, once one is chosen"
              : ownCredentials.length === 0
              ? (
                <>
                  This project has no {provider?.name ?? state.provider} credential yet:{" "}
                  <a href={`/projects/${projectId}/credentials?new=${state.provider}`}>
                    create one
                  </a>
                </>
              )
              : `The ${provider?.name ?? state.provider} account its rows log in with`)
            : "A login of the project's: it fills {username} and {password} in the proxies' logins"}
        >
          <Select
            name="credential_id"
            value={state.credential_id}
            onChange={set("credential_id")}
            disabled={readOnly}
            required={isVendor || isCloud}
            options={[
              ["", isVendor || isCloud ? "Choose a credential…" : "None"] as const,
              ...credentialOptions.map((credential) => [credential.id, credential.name] as const),
            ]}
          />
        </Field>
      </fieldset>
      {isVendor && provider
        ? (
          <fieldset data-field="config">
            <legend>{provider.name}</legend>
            <FieldError error={error} field="config" exact />
            <Field
              label="Proxy type"
              field="config.proxy_type"
              error={error}
              hint={type ? typeHint(type) : undefined}
            >
              <Select
                name="proxy_type"
                value={state.proxy_type}
                onChange={chooseType}
                disabled={readOnly}
                options={provider.proxy_types.map((t) =>
                  [
                    t.id,
                    `${t.name} (${MODE_NAMES[t.mode]}${
                      t.dynamic_sessions ? ", dynamic sessions" : ""
                    })`,
                  ] as const
                )}
              />
            </Field>
            {hasSessionModes(type)
              ? (
                <Field
                  label="Session mode"
                  field="config.session_mode"
                  error={error}
                  hint={state.session_mode === "dynamic"
                    ? "One row, always routable: each request's -sessid-, -cc-, -st-, -city- and " +
                      "-sesstime- are written in the vendor's syntax"
                    : "A row per vendor session, each health-checked, in a group per country"}
                >
                  <Select
                    name="session_mode"
                    value={state.session_mode}
                    onChange={set("session_mode")}
                    disabled={readOnly}
                    options={SESSION_MODES}
                  />
                </Field>
              )
              : null}
            {slotted && type
              ? (
                <Field
                  label="Slots"
                  field="config.slots"
                  error={error}
                  hint={`${
                    type.mode === "port"
                      ? `Ports from ${type.port ?? "the first"}, one exit each`
                      : "Vendor sessions per country group"
                  }: 1 to ${type.max_slots ?? 1000}; blank: ${
                    Math.min(DEFAULT_SLOTS, type.max_slots ?? 1000)
                  }`}
                >
                  <TextInput
                    name="slots"
                    type="number"
                    value={state.slots}
                    onInput={set("slots")}
                    disabled={readOnly}
                    min={1}
                    max={type.max_slots}
                    placeholder={String(Math.min(DEFAULT_SLOTS, type.max_slots ?? 1000))}
                  />
                </Field>
              )
              : null}
            <ProviderFieldInputs
              fields={provider.connector_fields}
              values={state.values}
              onChange={set("values")}
              error={error}
              readOnly={readOnly}
              setSecrets={setSecrets}
            />
          </fieldset>
        )
        : null}
      {cloud
        ? (
          <CloudConfigFields
            provider={cloud}
            values={state.cloud}
            onChange={set("cloud")}
            error={error}
            readOnly={readOnly}
            options={options.data}
          />
        )
        : null}
      {isProviderApi
        ? (
          <ProviderApiConfig
            value={state.config_json}
            onInput={set("config_json")}
            error={error}
            readOnly={readOnly}
          />
        )
        : null}
      <fieldset>
        <legend>Routing</legend>
        <Field label="Enabled" field="enabled" error={error}>
          <Checkbox
            name="enabled"
            checked={state.enabled}
            onChange={set("enabled")}
            disabled={readOnly}
            label="Requests may be routed to this connector"
          />
        </Field>
        <Field
          label="Weight"
          field="weight"
          error={error}
          hint={
            <>
              1 to 100. Share of requests among the enabled connectors:{" "}
              <strong class="share" data-share>
                {share === null ? "none" : formatPercent(share)}
              </strong>
            </>
          }
        >
          {input("weight", { type: "number" })}
        </Field>
        <Field
          label="Escalation tier"
          field="tier"
          error={error}
          hint="0 to 99, for projects that escalate sites between tiers: connectors rank by tier, then by their traffic price, cheapest first. Blank: by price alone"
        >
          {input("tier", { type: "number" })}
        </Field>
        <Field
          label="Countries"
          field="countries"
          error={error}
          hint={isCloud
            ? "Two-letter codes, comma-separated: where its instances run. One code: each " +
              "instance is taken to be there; blank or more: each is located by its exit"
            : countriesHint(isVendor ? type : undefined, state.session_mode)}
        >
          {input("countries")}
        </Field>
        <div class="row">
          <Field
            label="Domain allow list"
            field="domain_allow"
            error={error}
            hint="One host a line; only these (and their subdomains) go through it"
          >
            <TextInput
              name="domain_allow"
              value={state.domain_allow}
              onInput={set("domain_allow")}
              disabled={readOnly}
              multiline
            />
          </Field>
          <Field
            label="Domain deny list"
            field="domain_deny"
            error={error}
            hint="One host a line; these never go through it. One list or the other, not both"
          >
            <TextInput
              name="domain_deny"
              value={state.domain_deny}
              onInput={set("domain_deny")}
              disabled={readOnly}
              multiline
            />
          </Field>
        </div>
        <Field
          label="Health-check URL"
          field="healthcheck_url"
          error={error}
          hint="Asked through each proxy; blank: the install's echo URL"
        >
          {input("healthcheck_url", { type: "url" })}
        </Field>
      </fieldset>
      <fieldset>
        <legend>Limits</legend>
        <Checkbox
          name="rate_on"
          checked={state.rate_on}
          onChange={set("rate_on")}
          disabled={readOnly}
          label="Request-rate limit per proxy"
        />
        {state.rate_on
          ? (
            <div class="grid">
              <Field label="Requests a window" field="rate_limit_config.max_requests" error={error}>
                {input("rate_max_requests", { type: "number" })}
              </Field>
              <Field
                label="Window (seconds)"
                field="rate_limit_config.window_seconds"
                error={error}
              >
                {input("rate_window_seconds", { type: "number" })}
              </Field>
              <Field
                label="Quarantine at least (seconds)"
                field="rate_limit_config.quarantine_seconds_min"
                error={error}
                hint="Blank: the window"
              >
                {input("rate_quarantine_min", { type: "number" })}
              </Field>
              <Field
                label="Quarantine at most (seconds)"
                field="rate_limit_config.quarantine_seconds_max"
                error={error}
                hint="Blank: the least"
              >
                {input("rate_quarantine_max", { type: "number" })}
              </Field>
              <Field
                label="Sessions in quarantine"
                field="rate_limit_config.sticky_quarantine"
                error={error}
              >
                <Checkbox
                  name="rate_sticky"
                  checked={state.rate_sticky}
                  onChange={set("rate_sticky")}
                  disabled={readOnly}
                  label="A session keeps its resting proxy"
                />
              </Field>
            </div>
          )
          : null}
        <Checkbox
          name="traffic_on"
          checked={state.traffic_on}
          onChange={set("traffic_on")}
          disabled={readOnly}
          label="Traffic limit and price"
        />
        {state.traffic_on
          ? (
            <div class="grid">
              <Field
                label="Bytes a period"
                field="traffic_config.limit_bytes"
                error={error}
                hint={typeof limitBytes === "number"
                  ? formatBytes(limitBytes)
                  : "Blank: no limit, usage is still counted"}
              >
                {input("traffic_limit_bytes", { type: "number" })}
              </Field>
              <Field label="Period" field="traffic_config.period" error={error}>
                <Select
                  name="traffic_period"
                  value={state.traffic_period}
                  onChange={set("traffic_period")}
                  disabled={readOnly}
                  options={TRAFFIC_PERIODS.map((p) => [p, p] as const)}
                />
              </Field>
              <Field
                label="Reset day"
                field="traffic_config.reset_day"
                error={error}
                hint="Of the month (1-28) or week (1 Monday to 7)"
              >
                {input("traffic_reset_day", { type: "number" })}
              </Field>
              <Field label="At the limit" field="traffic_config.action" error={error}>
                <Select
                  name="traffic_action"
                  value={state.traffic_action}
                  onChange={set("traffic_action")}
                  disabled={readOnly}
                  options={TRAFFIC_ACTIONS.map((a) => [a, a] as const)}
                />
              </Field>
              <Field label="Warn at (percent)" field="traffic_config.warn_percent" error={error}>
                {input("traffic_warn_percent", { type: "number" })}
              </Field>
              <Field
                label="Blocked requests get"
                field="traffic_config.limit_status"
                error={error}
              >
                <Select
                  name="traffic_limit_status"
                  value={state.traffic_limit_status}
                  onChange={set("traffic_limit_status")}
                  disabled={readOnly}
                  options={TRAFFIC_LIMIT_STATUSES.map((s) => [String(s), String(s)] as const)}
                />
              </Field>
              <Field label="Price per GB" field="traffic_config.price_per_gb" error={error}>
                {input("traffic_price_per_gb", { type: "number" })}
              </Field>
              <Field label="Currency" field="traffic_config.currency" error={error}>
                {input("traffic_currency")}
              </Field>
            </div>
          )
          : null}
      </fieldset>
      {lockedNote
        ? <p class="muted">{lockedNote}</p>
        : readOnly
        ? <p class="muted">Your role can see this connector, not change it.</p>
        : (
          <div class="actions">
            <button type="submit" disabled={busy}>{busy ? "Saving…" : submitLabel}</button>
            {saved ? <span class="saved" role="status">Saved</span> : null}
          </div>
        )}
    </form>
  );
}

/** A proxy type in words: its mode, gateway and what its templates write of a request. */
function typeHint(type: ProviderType): string {
  const renders = rendersOf(type);
  const gateway = type.host ? ` at ${type.host}${type.port ? `:${type.port}` : ""}` : "";
  return `${MODE_HELP[type.mode]}${gateway}. Renders ${
    renders.length > 0 ? renders.join(", ") : "nothing of a request"
  }`;
}

/** What the countries mean for the connector, by kind and mode. */
function countriesHint(type: ProviderType | undefined, sessionMode: string): string {
  const codes = "Two-letter codes, comma-separated (de, us; uk reads as GB)";
  if (type === undefined) return codes;
  const served = type.countries ? `. The vendor serves ${type.countries.join(", ")}` : "";
  if (type.mode === "session" && type.dynamic_sessions && sessionMode === "dynamic") {
    return `${codes}: the countries clients may ask for; blank: any${served}`;
  }
  if (type.mode === "session") {
    return `${codes}: a group of sessions per country; blank: All countries (a group is ` +
      `made the first time a client asks for a country)${served}`;
  }
  return `${codes}: exits outside them are left out; blank: any${served}`;
}

/**
 * A provider_api connector's config as JSON: `fetch`, `parser` and `pool`. The API's messages
 * for `body.config.<path>` are listed under the editor, each naming its path.
 */
function ProviderApiConfig(
  { value, onInput, error, readOnly }: {
    value: string;
    onInput: (value: string) => void;
    error?: ApiError;
    readOnly: boolean;
  },
) {
  const issues = (error?.issues ?? []).filter((issue) =>
    issue.field === "body.config" || issue.field.startsWith("body.config.")
  );
  return (
    <fieldset data-field="config" class={issues.length > 0 ? "invalid" : undefined}>
      <legend>Provider API</legend>
      <label class="field" data-field="config_json">
        <span class="label is-required">Config (JSON)</span>
        <textarea
          name="config_json"
          class="code"
          value={value}
          onInput={(event) => onInput((event.currentTarget as HTMLTextAreaElement).value)}
          disabled={readOnly}
          rows={24}
          spellcheck={false}
          aria-required="true"
        />
        <span class="hint">
          <code>fetch</code> (how the provider is called: url, params, auth, pacing and the{" "}
          <code>max_total</code> ledger), <code>parser</code> (how its answer is read) and{" "}
          <code>pool</code>{" "}
          (min, target and max sizes, the reserve kept for gateways). Templates read{" "}
          <code>{"{count}"}</code> and{" "}
          <code>{"{credential.<key>}"}</code>. Stored with its defaults filled in.
        </span>
      </label>
      {issues.length > 0
        ? (
          <ul class="field-issues" role="alert" aria-label="Config errors">
            {issues.map((issue) => (
              <li key={issue.field} class="field-error" data-issue={issue.field}>
                <code>{issue.field.replace(/^body\./, "")}</code>: {issue.message}
              </li>
            ))}
          </ul>
        )
        : null}
    </fieldset>
  );
}
