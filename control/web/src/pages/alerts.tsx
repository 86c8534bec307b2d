/**
 * Alerting, for admins: the channels (webhooks; a new one's signing secret shown this once, a
 * "Send test" per channel), the rules with a form whose threshold follows the kind, the events
 * (firing, then resolved), and the delivery log with every try. The log reloads every few
 * seconds, so a test delivery shows its tries as they land.
 */
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import type {
  AlertChannel,
  AlertDelivery,
  AlertEvent,
  AlertRule,
} from "../../../api/answers/alerts.ts";
import type { Project } from "../../../api/answers/projects.ts";
import type { ConnectorSummary } from "../../../api/answers/connectors.ts";
import {
  ALERT_KIND_NAMES,
  ALERT_SEVERITIES,
  type AlertKind,
  kindInfo,
} from "../../../model/alert-kinds.ts";
import { Checkbox, Field, FormError, optionalNumber, Select, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

const LOG_REFRESH_MS = 2_000;

export function Alerts() {
  const channels = useApi<AlertChannel[]>("/alerts/channels");
  const rules = useApi<AlertRule[]>("/alerts/rules");
  const events = useApi<AlertEvent[]>("/alerts/events", { limit: "50" }, LOG_REFRESH_MS);
  const deliveries = useApi<AlertDelivery[]>(
    "/alerts/deliveries",
    { limit: "50" },
    LOG_REFRESH_MS,
  );
  const [made, setMade] = useState<AlertChannel | undefined>();
  const [actionError, setActionError] = useState<ApiError | undefined>();

  const act = async (method: string, path: string) => {
    setActionError(undefined);
    try {
      await api(method, path);
    } catch (failure) {
      setActionError(failure as ApiError);
    }
    channels.reload();
    rules.reload();
    deliveries.reload();
  };

  return (
    <section class="alerts">
      <header class="toolbar">
        <h2>Alerts</h2>
      </header>
      <p class="muted">
        Rules watch what the install already knows (traffic limits, pools, sequences, healthy
        shares, quarantines, failures, sites' block rates, the feed, the controller lease, job
        backlogs, the interception CA's end) and deliver to channels: webhooks POSTed as signed JSON
        or as a Slack message, or email. See docs/alerts.md for checking a signature.
      </p>
      <ErrorNote error={channels.error ?? rules.error ?? actionError} />

      <h3>Channels</h3>
      {made?.secret ? <SecretBox channel={made} onDone={() => setMade(undefined)} /> : (
        <NewChannel
          onCreated={(channel) => {
            setMade(channel);
            channels.reload();
          }}
        />
      )}
      <table class="data" aria-label="Alert channels">
        <thead>
          <tr>
            <th>Name</th>
            <th>Type</th>
            <th>Format</th>
            <th>URL</th>
            <th>Private address</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(channels.data ?? []).map((channel) => (
            <tr key={channel.id} data-channel={channel.name}>
              <td>{channel.name}</td>
              <td>{channel.type}</td>
              <td>{channel.format}</td>
              <td>
                <code>{channel.url}</code>
              </td>
              <td>
                {channel.type === "email"
                  ? ""
                  : channel.allow_private_address
                  ? "allowed"
                  : "refused"}
              </td>
              <td class="row-actions">
                <button
                  type="button"
                  onClick={() => act("POST", `/alerts/channels/${channel.id}/test`)}
                >
                  Send test
                </button>
                <button
                  type="button"
                  class="secondary"
                  onClick={() => act("DELETE", `/alerts/channels/${channel.id}`)}
                >
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {channels.data?.length === 0 ? <p class="muted">No channel yet.</p> : null}

      <h3>Rules</h3>
      <NewRule channels={channels.data ?? []} onCreated={() => rules.reload()} />
      <table class="data" aria-label="Alert rules">
        <thead>
          <tr>
            <th>Name</th>
            <th>Kind</th>
            <th>Threshold</th>
            <th>Severity</th>
            <th>Quiet period</th>
            <th>Channels</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(rules.data ?? []).map((rule) => (
            <tr key={rule.id} data-rule={rule.name}>
              <td>{rule.name}</td>
              <td>{rule.kind}</td>
              <td>{rule.threshold ?? ""}</td>
              <td>{rule.severity}</td>
              <td>{rule.quiet_period_seconds} s</td>
              <td>
                {rule.channel_ids.map((id) =>
                  channels.data?.find((channel) => channel.id === id)?.name ?? id
                ).join(", ")}
              </td>
              <td class="row-actions">
                <button
                  type="button"
                  class="secondary"
                  onClick={() => act("DELETE", `/alerts/rules/${rule.id}`)}
                >
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {rules.data?.length === 0 ? <p class="muted">No rule yet.</p> : null}

      <h3>Events</h3>
      <table class="data" aria-label="Alert events">
        <thead>
          <tr>
            <th>Fired</th>
            <th>Resolved</th>
            <th>Severity</th>
            <th>Rule</th>
            <th>What</th>
          </tr>
        </thead>
        <tbody>
          {(events.data ?? []).map((event) => (
            <tr key={event.id}>
              <td>
                <Time value={event.fired_at} />
              </td>
              <td>
                {event.resolved_at
                  ? <Time value={event.resolved_at} />
                  : <span class="badge danger">firing</span>}
              </td>
              <td>{event.severity}</td>
              <td>{event.rule_name}</td>
              <td>{event.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {events.data?.length === 0 ? <p class="muted">Nothing has fired.</p> : null}

      <h3>Delivery log</h3>
      <table class="data" aria-label="Delivery log">
        <thead>
          <tr>
            <th>Owed</th>
            <th>Channel</th>
            <th>Action</th>
            <th>State</th>
            <th>Tries</th>
          </tr>
        </thead>
        <tbody>
          {(deliveries.data ?? []).map((delivery) => (
            <tr key={delivery.id} data-delivery={delivery.id}>
              <td>
                <Time value={delivery.created_at} />
              </td>
              <td>{delivery.channel_name}</td>
              <td>{delivery.action}</td>
              <td>
                <span
                  class={`badge ${
                    delivery.state === "delivered"
                      ? "ok"
                      : delivery.state === "failed"
                      ? "danger"
                      : "warning"
                  }`}
                >
                  {delivery.state}
                </span>
              </td>
              <td>
                <ol class="tries">
                  {delivery.tries.map((t, i) => (
                    <li key={i}>
                      <Time value={t.at} />{" "}
                      {t.status_code !== null ? `answered ${t.status_code}` : t.error}{" "}
                      ({t.duration_ms} ms)
                    </li>
                  ))}
                </ol>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {deliveries.data?.length === 0 ? <p class="muted">No delivery yet.</p> : null}
    </section>
  );
}

function NewChannel({ onCreated }: { onCreated: (channel: AlertChannel) => void }) {
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const [format, setFormat] = useState("json");
  const [allowPrivate, setAllowPrivate] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const channel = await api<AlertChannel>("POST", "/alerts/channels", {
        body: {
          name,
          type: url.startsWith("mailto:") ? "email" : "webhook",
          url,
          format,
          allow_private_address: allowPrivate,
        },
      });
      setName("");
      setUrl("");
      onCreated(channel);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-label="New channel" noValidate>
      <FormError error={error} />
      <div class="grid">
        <Field label="Channel name" field="name" error={error}>
          <TextInput name="name" value={name} onInput={setName} />
        </Field>
        <Field
          label="Channel URL"
          field="url"
          error={error}
          hint="http(s):// for a webhook; mailto:address for email"
        >
          <TextInput name="url" type="url" value={url} onInput={setUrl} />
        </Field>
        <Field label="Format" field="format" error={error}>
          <Select
            name="format"
            value={format}
            onChange={setFormat}
            options={[["json", "JSON (signed)"], ["slack", "Slack message"]]}
          />
        </Field>
        <Field label="Network" field="allow_private_address" error={error}>
          <Checkbox
            name="allow_private_address"
            checked={allowPrivate}
            onChange={setAllowPrivate}
            label="Allow a private or loopback address"
          />
        </Field>
      </div>
      <button type="submit" disabled={busy}>{busy ? "Adding…" : "Add channel"}</button>
    </form>
  );
}

function SecretBox({ channel, onDone }: { channel: AlertChannel; onDone: () => void }) {
  return (
    <div class="card new-token" role="region" aria-label="New channel secret">
      <h3>Channel “{channel.name}” added</h3>
      <p class="warning-text">
        <strong>Copy its signing secret now: you will not see it again.</strong>{" "}
        A receiver checks each delivery's signature with it.
      </p>
      <div class="copy-box">
        <input
          readOnly
          value={channel.secret}
          aria-label="The signing secret"
          onFocus={(event) => (event.currentTarget as HTMLInputElement).select()}
        />
      </div>
      <button type="button" class="secondary" onClick={onDone}>Done</button>
    </div>
  );
}

function NewRule(
  { channels, onCreated }: { channels: AlertChannel[]; onCreated: () => void },
) {
  const projects = useApi<Project[]>("/projects");
  const [name, setName] = useState("");
  const [kind, setKind] = useState<AlertKind>("traffic_limit");
  const [threshold, setThreshold] = useState("");
  const [projectId, setProjectId] = useState("");
  const [connectorId, setConnectorId] = useState("");
  // A project's connectors, to narrow the rule to one of them (the API takes one or the other).
  const connectors = useApi<ConnectorSummary[]>(
    projectId === "" ? null : `/projects/${projectId}/connectors`,
  );
  const [severity, setSeverity] = useState("warning");
  const [quiet, setQuiet] = useState("3600");
  const [chosen, setChosen] = useState<string[]>([]);
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const info = kindInfo(kind);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const body: Record<string, unknown> = {
        name,
        kind,
        severity,
        quiet_period_seconds: optionalNumber(quiet) ?? 0,
        channel_ids: chosen,
      };
      if (info.threshold) body.threshold = optionalNumber(threshold);
      if (info.scoped && connectorId !== "") body.connector_id = connectorId;
      else if (info.scoped && projectId !== "") body.project_id = projectId;
      await api("POST", "/alerts/rules", { body });
      setName("");
      onCreated();
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-label="New rule" noValidate>
      <FormError error={error} />
      <div class="grid">
        <Field label="Rule name" field="name" error={error}>
          <TextInput name="name" value={name} onInput={setName} />
        </Field>
        <Field label="Watches" field="kind" error={error} hint={info.about}>
          <Select
            name="kind"
            value={kind}
            onChange={(value) => setKind(value as AlertKind)}
            options={ALERT_KIND_NAMES.map((name) => [name, name.replace(/_/g, " ")] as const)}
          />
        </Field>
        {info.threshold
          ? (
            <Field
              label={`Threshold (${info.threshold.unit})`}
              field="threshold"
              error={error}
              hint={`${info.threshold.min} to ${info.threshold.max}`}
            >
              <TextInput name="threshold" type="number" value={threshold} onInput={setThreshold} />
            </Field>
          )
          : null}
        {info.scoped
          ? (
            <Field label="Project" field="project_id" error={error}>
              <Select
                name="project_id"
                value={projectId}
                onChange={(value) => {
                  setProjectId(value);
                  setConnectorId("");
                }}
                options={[
                  ["", "Every project"],
                  ...(projects.data ?? []).map((p) => [p.id, p.name] as const),
                ]}
              />
            </Field>
          )
          : null}
        {info.scoped && projectId !== ""
          ? (
            <Field label="Connector" field="connector_id" error={error}>
              <Select
                name="connector_id"
                value={connectorId}
                onChange={setConnectorId}
                options={[
                  ["", "Every connector of the project"],
                  ...(connectors.data ?? []).map((c) => [c.id, c.name] as const),
                ]}
              />
            </Field>
          )
          : null}
        <Field label="Severity" field="severity" error={error}>
          <Select
            name="severity"
            value={severity}
            onChange={setSeverity}
            options={ALERT_SEVERITIES.map((s) => [s, s] as const)}
          />
        </Field>
        <Field
          label="Quiet period (seconds)"
          field="quiet_period_seconds"
          error={error}
          hint="No new event for the same subject within it"
        >
          <TextInput name="quiet_period_seconds" type="number" value={quiet} onInput={setQuiet} />
        </Field>
        <Field label="Deliver to" field="channel_ids" error={error}>
          {channels.length === 0 ? <span class="muted">Add a channel first</span> : (
            <Fragment>
              {channels.map((channel) => (
                <Checkbox
                  key={channel.id}
                  name={`channel-${channel.id}`}
                  checked={chosen.includes(channel.id)}
                  onChange={(on) =>
                    setChosen(
                      on ? [...chosen, channel.id] : chosen.filter((id) => id !== channel.id),
                    )}
                  label={channel.name}
                />
              ))}
            </Fragment>
          )}
        </Field>
      </div>
      <button type="submit" disabled={busy}>{busy ? "Adding…" : "Add rule"}</button>
    </form>
  );
}
