/**
 * Every field a project has in the API, for create and edit: what a request carries, its
 * routing, its limits and who may use it. Values are kept as typed and sent as the API takes
 * them; the API judges them, and its message for a field is shown beside that field.
 */
import {
  MAX_RETRIES_LIMIT,
  STRATEGIES,
  TRAFFIC_ACTIONS,
  TRAFFIC_LIMIT_STATUSES,
  TRAFFIC_PERIODS,
} from "../../../../shared/roles.ts";
import type { Project } from "../../../api/answers/projects.ts";
import {
  Checkbox,
  Field,
  FormError,
  optionalNumber,
  parseList,
  Select,
  TextInput,
} from "../ui/forms.tsx";
import { useForm } from "../ui/use-form.ts";
import {
  locationBodyOf,
  LocationFields,
  type LocationState,
  locationStateOf,
} from "./project-location.tsx";
import {
  interceptionBodyOf,
  InterceptionFields,
  type InterceptionState,
  interceptionStateOf,
} from "./project-interception.tsx";
import {
  blockingBodyOf,
  BlockingFields,
  type BlockingState,
  blockingStateOf,
} from "./project-blocking.tsx";

interface FormState {
  name: string;
  description: string;
  username: string;
  password: string;
  strategy: string;
  session_ttl_seconds: string;
  sticky_quarantine: boolean;
  connection_timeout_seconds: string;
  max_retries: string;
  metrics_retention_days: string;
  quota_on: boolean;
  quota_limit_bytes: string;
  quota_period: string;
  quota_reset_day: string;
  quota_action: string;
  quota_warn_percent: string;
  quota_limit_status: string;
  quota_price_per_gb: string;
  quota_currency: string;
  rate_on: boolean;
  rate_requests_per_second: string;
  rate_burst: string;
  max_connections: string;
  allowed_cidrs: string;
  passwordless_cidrs: string;
  location: LocationState;
  interception: InterceptionState;
  blocking: BlockingState;
}

const text = (value: unknown) => (value === null || value === undefined ? "" : String(value));

function stateOf(project: Project | undefined): FormState {
  const quota = project?.traffic_quota;
  return {
    name: project?.name ?? "",
    description: project?.description ?? "",
    username: project?.username ?? "",
    password: "",
    strategy: project?.strategy ?? "round_robin",
    session_ttl_seconds: text(project?.session_ttl_seconds),
    sticky_quarantine: project?.sticky_quarantine ?? false,
    connection_timeout_seconds: text(project?.connection_timeout_seconds ?? ""),
    max_retries: text(project?.max_retries ?? ""),
    metrics_retention_days: text(project?.metrics_retention_days ?? ""),
    quota_on: quota !== null && quota !== undefined,
    quota_limit_bytes: text(quota?.limit_bytes),
    quota_period: quota?.period ?? "month",
    quota_reset_day: text(quota?.reset_day ?? 1),
    quota_action: quota?.action ?? "block",
    quota_warn_percent: text(quota?.warn_percent ?? 80),
    quota_limit_status: text(quota?.limit_status ?? 509),
    quota_price_per_gb: text(quota?.price_per_gb),
    quota_currency: quota?.currency ?? "USD",
    rate_on: project?.rate_limit !== null && project?.rate_limit !== undefined,
    rate_requests_per_second: text(project?.rate_limit?.requests_per_second),
    rate_burst: text(project?.rate_limit?.burst),
    max_connections: text(project?.max_connections),
    allowed_cidrs: (project?.allowed_cidrs ?? []).join("\n"),
    passwordless_cidrs: (project?.passwordless_cidrs ?? []).join("\n"),
    location: locationStateOf(project),
    interception: interceptionStateOf(project),
    blocking: blockingStateOf(project),
  };
}

/** The body for the API; on edit, blank optional numbers are left out (kept as stored). */
function bodyOf(state: FormState, creating: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    name: state.name,
    description: state.description,
    username: state.username,
    strategy: state.strategy,
    sticky_quarantine: state.sticky_quarantine,
    traffic_quota: state.quota_on
      ? {
        limit_bytes: optionalNumber(state.quota_limit_bytes),
        period: state.quota_period,
        reset_day: optionalNumber(state.quota_reset_day) ?? 1,
        action: state.quota_action,
        warn_percent: optionalNumber(state.quota_warn_percent) ?? 80,
        limit_status: Number(state.quota_limit_status),
        price_per_gb: optionalNumber(state.quota_price_per_gb),
        currency: state.quota_currency,
      }
      : null,
    rate_limit: state.rate_on
      ? {
        requests_per_second: optionalNumber(state.rate_requests_per_second),
        ...(state.rate_burst.trim() !== "" ? { burst: optionalNumber(state.rate_burst) } : {}),
      }
      : null,
    max_connections: optionalNumber(state.max_connections),
    allowed_cidrs: parseList(state.allowed_cidrs),
    passwordless_cidrs: parseList(state.passwordless_cidrs),
    ...locationBodyOf(state.location),
    ...interceptionBodyOf(state.interception),
    ...blockingBodyOf(state.blocking),
  };
  if (state.password !== "") body.password = state.password;
  for (
    const key of [
      "session_ttl_seconds",
      "connection_timeout_seconds",
      "max_retries",
      "metrics_retention_days",
    ] as const
  ) {
    const value = optionalNumber(state[key]);
    if (value !== null) body[key] = value;
  }
  if (creating && body.rate_limit === null) delete body.rate_limit;
  if (creating && body.traffic_quota === null) delete body.traffic_quota;
  if (creating && body.max_connections === null) delete body.max_connections;
  return body;
}

export function ProjectForm(
  { project, readOnly, onSubmit, submitLabel }: {
    project?: Project;
    readOnly: boolean;
    /** Saves; the project as stored, when it stays on the page, refills the form. */
    onSubmit: (body: Record<string, unknown>) => Promise<Project | void>;
    submitLabel: string;
  },
) {
  const creating = project === undefined;
  const { state, set, error, busy, saved, submit } = useForm(
    stateOf,
    project,
    (values: FormState) => bodyOf(values, creating),
    onSubmit,
  );

  const input = (key: keyof FormState, props: { type?: "number" | "password" } = {}) => (
    <TextInput
      name={key}
      value={state[key] as string}
      onInput={set(key) as (value: string) => void}
      disabled={readOnly}
      type={props.type}
    />
  );

  return (
    <form class="project-form" onSubmit={submit} aria-label="Project" noValidate>
      <FormError error={error} />
      <fieldset>
        <legend>Project</legend>
        <Field label="Name" field="name" error={error}>{input("name")}</Field>
        <Field label="Description" field="description" error={error}>
          <TextInput
            name="description"
            value={state.description}
            onInput={set("description")}
            disabled={readOnly}
            multiline
          />
        </Field>
        <Field
          label="Proxy username"
          field="username"
          error={error}
          hint="Clients log in to the gateway as this name, options after it: name-cc-de"
        >
          {input("username")}
        </Field>
        {readOnly ? null : (
          <Field
            label={creating ? "Proxy password" : "New proxy password"}
            field="password"
            error={error}
            hint={creating ? "Left blank, one is generated" : "Left blank, it stays as it is"}
          >
            {input("password", { type: "password" })}
          </Field>
        )}
      </fieldset>
      <fieldset>
        <legend>Routing</legend>
        <Field label="Strategy" field="strategy" error={error}>
          <Select
            name="strategy"
            value={state.strategy}
            onChange={set("strategy")}
            disabled={readOnly}
            options={STRATEGIES.map((s) => [s, s.replace("_", " ")] as const)}
          />
        </Field>
        <Field label="Session life (seconds)" field="session_ttl_seconds" error={error}>
          {input("session_ttl_seconds", { type: "number" })}
        </Field>
        <Field label="Sticky sessions" field="sticky_quarantine" error={error}>
          <Checkbox
            name="sticky_quarantine"
            checked={state.sticky_quarantine}
            onChange={set("sticky_quarantine")}
            disabled={readOnly}
            label="A session keeps its proxy through a quarantine"
          />
        </Field>
        <Field
          label="Retries"
          field="max_retries"
          error={error}
          hint={`Other proxies a failed GET or tunnel goes on to (0 to ${MAX_RETRIES_LIMIT})`}
        >
          {input("max_retries", { type: "number" })}
        </Field>
        <Field label="Connect timeout (seconds)" field="connection_timeout_seconds" error={error}>
          {input("connection_timeout_seconds", { type: "number" })}
        </Field>
        <Field
          label="Keep usage history (days)"
          field="metrics_retention_days"
          error={error}
          hint="0 keeps it forever"
        >
          {input("metrics_retention_days", { type: "number" })}
        </Field>
      </fieldset>
      <LocationFields
        state={state.location}
        onChange={set("location")}
        error={error}
        readOnly={readOnly}
      />
      <InterceptionFields
        state={state.interception}
        onChange={set("interception")}
        error={error}
        readOnly={readOnly}
      />
      <BlockingFields
        state={state.blocking}
        onChange={set("blocking")}
        error={error}
        readOnly={readOnly}
      />
      <fieldset>
        <legend>Limits</legend>
        <Checkbox
          name="rate_on"
          checked={state.rate_on}
          onChange={set("rate_on")}
          disabled={readOnly}
          label="Request-rate limit across every gateway"
        />
        {state.rate_on
          ? (
            <div class="row">
              <Field
                label="Requests a second"
                field="rate_limit.requests_per_second"
                error={error}
              >
                {input("rate_requests_per_second", { type: "number" })}
              </Field>
              <Field
                label="Burst"
                field="rate_limit.burst"
                error={error}
                hint="Blank: the rate"
              >
                {input("rate_burst", { type: "number" })}
              </Field>
            </div>
          )
          : null}
        <Field
          label="Connections at once, per gateway"
          field="max_connections"
          error={error}
          hint="Blank: no cap"
        >
          {input("max_connections", { type: "number" })}
        </Field>
        <Checkbox
          name="quota_on"
          checked={state.quota_on}
          onChange={set("quota_on")}
          disabled={readOnly}
          label="Traffic quota over all connectors"
        />
        {state.quota_on
          ? (
            <div class="grid">
              <Field label="Bytes a period" field="traffic_quota.limit_bytes" error={error}>
                {input("quota_limit_bytes", { type: "number" })}
              </Field>
              <Field label="Period" field="traffic_quota.period" error={error}>
                <Select
                  name="quota_period"
                  value={state.quota_period}
                  onChange={set("quota_period")}
                  disabled={readOnly}
                  options={TRAFFIC_PERIODS.map((p) => [p, p] as const)}
                />
              </Field>
              <Field
                label="Reset day"
                field="traffic_quota.reset_day"
                error={error}
                hint="Of the month (1-28) or week (1 Monday to 7)"
              >
                {input("quota_reset_day", { type: "number" })}
              </Field>
              <Field label="At the limit" field="traffic_quota.action" error={error}>
                <Select
                  name="quota_action"
                  value={state.quota_action}
                  onChange={set("quota_action")}
                  disabled={readOnly}
                  options={TRAFFIC_ACTIONS.map((a) => [a, a] as const)}
                />
              </Field>
              <Field label="Warn at (percent)" field="traffic_quota.warn_percent" error={error}>
                {input("quota_warn_percent", { type: "number" })}
              </Field>
              <Field label="Blocked requests get" field="traffic_quota.limit_status" error={error}>
                <Select
                  name="quota_limit_status"
                  value={state.quota_limit_status}
                  onChange={set("quota_limit_status")}
                  disabled={readOnly}
                  options={TRAFFIC_LIMIT_STATUSES.map((s) => [String(s), String(s)] as const)}
                />
              </Field>
              <Field label="Price per GB" field="traffic_quota.price_per_gb" error={error}>
                {input("quota_price_per_gb", { type: "number" })}
              </Field>
              <Field label="Currency" field="traffic_quota.currency" error={error}>
                {input("quota_currency")}
              </Field>
            </div>
          )
          : null}
      </fieldset>
      <fieldset>
        <legend>Who may use it</legend>
        <Field
          label="Allowed client blocks"
          field="allowed_cidrs"
          error={error}
          hint="One CIDR a line; empty: any address"
        >
          <TextInput
            name="allowed_cidrs"
            value={state.allowed_cidrs}
            onInput={set("allowed_cidrs")}
            disabled={readOnly}
            multiline
          />
        </Field>
        <Field
          label="Password-less blocks"
          field="passwordless_cidrs"
          error={error}
          hint="Clients from these need no password; options come from X-Octoprox-* headers"
        >
          <TextInput
            name="passwordless_cidrs"
            value={state.passwordless_cidrs}
            onInput={set("passwordless_cidrs")}
            disabled={readOnly}
            multiline
          />
        </Field>
      </fieldset>
      {readOnly
        ? <p class="muted">Your role can see this project, not change it.</p>
        : (
          <div class="actions">
            <button type="submit" disabled={busy}>{busy ? "Saving…" : submitLabel}</button>
            {saved ? <span class="saved" role="status">Saved</span> : null}
          </div>
        )}
    </form>
  );
}
