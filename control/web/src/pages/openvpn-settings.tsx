/**
 * The install's OpenVPN settings, for admins (docs/api.md, "OpenVPN devices"): the device
 * subnet, the transport, the port and host devices dial, the MTU and keepalive their profiles
 * and the daemon carry, with the CA's certificate (shown, to copy), the gateways' tunnel
 * address beside them; a refusal shown at its field. Rotating the identity asks first, saying
 * that every device profile becomes invalid, and then says so again in the words the api logs.
 * Other roles see the values, disabled.
 */
import { useEffect, useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import {
  OPENVPN_IDENTITY_ROTATED,
  type OpenvpnSettings as Settings,
} from "../../../api/answers/openvpn.ts";
import { useSession } from "../session.tsx";
import { CopyButton } from "../ui/copy-button.tsx";
import { Field, FormError, optionalNumber, Select, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";
import { useForm } from "../ui/use-form.ts";

const PATH = "/openvpn/settings";

const TRANSPORTS = [
  ["udp", "UDP"],
  ["tcp", "TCP"],
] as const;

export function OpenvpnSettings() {
  const session = useSession();
  const loaded = useApi<Settings>(PATH);
  const [settings, setSettings] = useState<Settings | undefined>();
  const [rotated, setRotated] = useState(false);
  useEffect(() => setSettings(loaded.data), [loaded.data]);

  return (
    <section class="openvpn-settings">
      <header class="toolbar">
        <h2>OpenVPN settings</h2>
      </header>
      <p class="muted">
        One set for the install, carried to every gateway by the routing feed. Devices are managed
        on each project's Devices tab; their profiles are made from these values when downloaded, so
        a profile downloaded before a change keeps the old transport, port and host.
      </p>
      <ErrorNote error={loaded.error} />
      {settings
        ? (
          <>
            <dl class="facts" aria-label="Server">
              <dt>Gateway address</dt>
              <dd>
                <code>{settings.gateway_address}</code>{" "}
                <span class="muted">(the subnet's first host: every device's DNS)</span>
              </dd>
              <dt>Updated</dt>
              <dd>
                <Time value={settings.updated_at} />
              </dd>
            </dl>
            {rotated
              ? (
                <p class="warning-text" role="status" data-rotated>
                  {OPENVPN_IDENTITY_ROTATED}: download each device's profile again.
                </p>
              )
              : null}
            <SettingsForm
              settings={settings}
              readOnly={!session.isAdmin}
              onSaved={setSettings}
            />
            <section aria-label="CA certificate">
              <h3>
                CA certificate{" "}
                <CopyButton text={settings.ca_certificate} label="the CA certificate" />
              </h3>
              <p class="muted">
                What every device trusts: each profile carries it inline, so a client needs nothing
                else.
              </p>
              <pre><code data-ca-certificate>{settings.ca_certificate}</code></pre>
            </section>
            {session.isAdmin
              ? (
                <RotateIdentity
                  onRotated={(next) => {
                    setSettings(next);
                    setRotated(true);
                  }}
                />
              )
              : null}
          </>
        )
        : null}
    </section>
  );
}

interface FormState {
  subnet: string;
  transport: string;
  listen_port: string;
  endpoint_host: string;
  mtu: string;
  keepalive_interval_seconds: string;
  keepalive_timeout_seconds: string;
}

function SettingsForm(
  { settings, readOnly, onSaved }: {
    settings: Settings;
    readOnly: boolean;
    onSaved: (settings: Settings) => void;
  },
) {
  const form = useForm<FormState, Settings>(
    (stored) => ({
      subnet: stored?.subnet ?? "",
      transport: stored?.transport ?? "udp",
      listen_port: String(stored?.listen_port ?? ""),
      endpoint_host: stored?.endpoint_host ?? "",
      mtu: String(stored?.mtu ?? ""),
      keepalive_interval_seconds: String(stored?.keepalive_interval_seconds ?? ""),
      keepalive_timeout_seconds: String(stored?.keepalive_timeout_seconds ?? ""),
    }),
    settings,
    (state) => ({
      subnet: state.subnet,
      transport: state.transport,
      listen_port: optionalNumber(state.listen_port),
      endpoint_host: state.endpoint_host.trim() === "" ? null : state.endpoint_host,
      mtu: optionalNumber(state.mtu),
      keepalive_interval_seconds: optionalNumber(state.keepalive_interval_seconds),
      keepalive_timeout_seconds: optionalNumber(state.keepalive_timeout_seconds),
    }),
    async (body) => {
      const stored = await api<Settings>("PUT", PATH, { body });
      onSaved(stored);
      return stored;
    },
  );
  const { state, set, error } = form;
  return (
    <form class="card" onSubmit={form.submit} aria-label="OpenVPN settings" noValidate>
      <FormError error={error} />
      {settings.endpoint_host === null
        ? (
          <p class="warning-text" data-endpoint="none">
            No endpoint host yet: devices cannot be told where to connect, so no profile can be
            downloaded until one is set.
          </p>
        )
        : null}
      <div class="grid">
        <Field
          label="Endpoint host"
          field="endpoint_host"
          error={error}
          hint="The public host name or address devices dial: vpn.example.com"
        >
          <TextInput
            name="endpoint_host"
            value={state.endpoint_host}
            onInput={set("endpoint_host")}
            disabled={readOnly}
          />
        </Field>
        <Field
          label="Transport"
          field="transport"
          error={error}
          hint="One for the install: every profile names it"
        >
          <Select
            name="transport"
            value={state.transport}
            onChange={set("transport")}
            options={TRANSPORTS}
            disabled={readOnly}
          />
        </Field>
        <Field label="Listen port" field="listen_port" error={error} hint="1 to 65535">
          <TextInput
            name="listen_port"
            type="number"
            value={state.listen_port}
            onInput={set("listen_port")}
            disabled={readOnly}
            min={1}
            max={65535}
          />
        </Field>
        <Field
          label="Subnet"
          field="subnet"
          error={error}
          hint="The devices' IPv4 block, /8 to /29, apart from WireGuard's; its first host is the gateways'"
        >
          <TextInput
            name="subnet"
            value={state.subnet}
            onInput={set("subnet")}
            disabled={readOnly}
          />
        </Field>
        <Field label="MTU" field="mtu" error={error} hint="576 to 1500 bytes">
          <TextInput
            name="mtu"
            type="number"
            value={state.mtu}
            onInput={set("mtu")}
            disabled={readOnly}
            min={576}
            max={1500}
          />
        </Field>
        <Field
          label="Keepalive interval (seconds)"
          field="keepalive_interval_seconds"
          error={error}
          hint="How often an idle tunnel is pinged (1 to 600)"
        >
          <TextInput
            name="keepalive_interval_seconds"
            type="number"
            value={state.keepalive_interval_seconds}
            onInput={set("keepalive_interval_seconds")}
            disabled={readOnly}
            min={1}
            max={600}
          />
        </Field>
        <Field
          label="Keepalive timeout (seconds)"
          field="keepalive_timeout_seconds"
          error={error}
          hint="A silent tunnel is dropped after this; at least twice the interval (2 to 3600)"
        >
          <TextInput
            name="keepalive_timeout_seconds"
            type="number"
            value={state.keepalive_timeout_seconds}
            onInput={set("keepalive_timeout_seconds")}
            disabled={readOnly}
            min={2}
            max={3600}
          />
        </Field>
      </div>
      {readOnly ? null : (
        <div class="actions">
          <button type="submit" disabled={form.busy}>
            {form.busy ? "Saving…" : "Save settings"}
          </button>
          {form.saved ? <span class="saved" role="status">Saved.</span> : null}
        </div>
      )}
    </form>
  );
}

function RotateIdentity({ onRotated }: { onRotated: (settings: Settings) => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const rotate = async () => {
    setBusy(true);
    setError(undefined);
    try {
      onRotated(await api<Settings>("POST", `${PATH}/rotate-identity`));
      setConfirming(false);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card danger-zone" aria-label="Rotate the identity">
      <h3>Rotate the identity</h3>
      <p>
        A new CA, server certificate and tls-crypt key, and every device's certificate issued again
        by the new CA. Every profile carries the old ones, so every device profile becomes invalid:
        each device needs its profile downloaded again.
      </p>
      <ErrorNote error={error} />
      {confirming
        ? (
          <p class="warning-text" data-confirm>
            Every device profile becomes invalid until it is downloaded again. Rotate the identity?
            {" "}
            <button type="button" class="danger" disabled={busy} onClick={rotate}>
              Rotate the identity now
            </button>{" "}
            <button type="button" class="secondary" onClick={() => setConfirming(false)}>
              Keep the identity
            </button>
          </p>
        )
        : (
          <button type="button" class="secondary" onClick={() => setConfirming(true)}>
            Rotate identity
          </button>
        )}
    </section>
  );
}
