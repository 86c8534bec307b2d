/**
 * The install's WireGuard settings, for admins (docs/api.md, "WireGuard devices"): the device
 * subnet, the UDP port and host devices dial, the MTU and keepalive their configs carry, with
 * the server's public key and the gateways' tunnel address beside them; a refusal shown at its
 * field. Rotating the server key asks first, saying that every device config becomes invalid,
 * and then says so again in the words the api logs. Other roles see the values, disabled.
 */
import { useEffect, useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import {
  SERVER_KEY_ROTATED,
  type WireguardSettings as Settings,
} from "../../../api/answers/wireguard.ts";
import { useSession } from "../session.tsx";
import { Field, FormError, optionalNumber, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";
import { useForm } from "../ui/use-form.ts";

const PATH = "/wireguard/settings";

export function WireguardSettings() {
  const session = useSession();
  const loaded = useApi<Settings>(PATH);
  const [settings, setSettings] = useState<Settings | undefined>();
  const [rotated, setRotated] = useState(false);
  useEffect(() => setSettings(loaded.data), [loaded.data]);

  return (
    <section class="wireguard-settings">
      <header class="toolbar">
        <h2>WireGuard settings</h2>
      </header>
      <p class="muted">
        One set for the install, carried to every gateway by the routing feed. Devices are managed
        on each project's Devices tab; their configs are made from these values when downloaded, so
        a config downloaded before a change keeps the old ones.
      </p>
      <ErrorNote error={loaded.error} />
      {settings
        ? (
          <>
            <dl class="facts" aria-label="Server">
              <dt>Server public key</dt>
              <dd>
                <code data-public-key>{settings.public_key}</code>
              </dd>
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
                  {SERVER_KEY_ROTATED}: download each device's config again.
                </p>
              )
              : null}
            <SettingsForm
              settings={settings}
              readOnly={!session.isAdmin}
              onSaved={setSettings}
            />
            {session.isAdmin
              ? (
                <RotateKey
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
  listen_port: string;
  endpoint_host: string;
  mtu: string;
  persistent_keepalive_seconds: string;
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
      listen_port: String(stored?.listen_port ?? ""),
      endpoint_host: stored?.endpoint_host ?? "",
      mtu: String(stored?.mtu ?? ""),
      persistent_keepalive_seconds: String(stored?.persistent_keepalive_seconds ?? ""),
    }),
    settings,
    (state) => ({
      subnet: state.subnet,
      listen_port: optionalNumber(state.listen_port),
      endpoint_host: state.endpoint_host.trim() === "" ? null : state.endpoint_host,
      mtu: optionalNumber(state.mtu),
      persistent_keepalive_seconds: optionalNumber(state.persistent_keepalive_seconds),
    }),
    async (body) => {
      const stored = await api<Settings>("PUT", PATH, { body });
      onSaved(stored);
      return stored;
    },
  );
  const { state, set, error } = form;
  return (
    <form class="card" onSubmit={form.submit} aria-label="WireGuard settings" noValidate>
      <FormError error={error} />
      {settings.endpoint_host === null
        ? (
          <p class="warning-text" data-endpoint="none">
            No endpoint host yet: devices cannot be told where to connect, so no config can be
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
        <Field label="Listen port" field="listen_port" error={error} hint="UDP, 1 to 65535">
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
          hint="The devices' IPv4 block, /8 to /29; its first host is the gateways'"
        >
          <TextInput
            name="subnet"
            value={state.subnet}
            onInput={set("subnet")}
            disabled={readOnly}
          />
        </Field>
        <Field label="MTU" field="mtu" error={error} hint="1280 to 1500 bytes">
          <TextInput
            name="mtu"
            type="number"
            value={state.mtu}
            onInput={set("mtu")}
            disabled={readOnly}
            min={1280}
            max={1500}
          />
        </Field>
        <Field
          label="Keepalive (seconds)"
          field="persistent_keepalive_seconds"
          error={error}
          hint="How often an idle device speaks up; 0: never (0 to 3600)"
        >
          <TextInput
            name="persistent_keepalive_seconds"
            type="number"
            value={state.persistent_keepalive_seconds}
            onInput={set("persistent_keepalive_seconds")}
            disabled={readOnly}
            min={0}
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

function RotateKey({ onRotated }: { onRotated: (settings: Settings) => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const rotate = async () => {
    setBusy(true);
    setError(undefined);
    try {
      onRotated(await api<Settings>("POST", `${PATH}/rotate-key`));
      setConfirming(false);
    } catch (failure) {
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="card danger-zone" aria-label="Rotate the server key">
      <h3>Rotate the server key</h3>
      <p>
        A new key pair for the server. Every device's config names the server's public key, so every
        device config becomes invalid: each device needs its config downloaded again.
      </p>
      <ErrorNote error={error} />
      {confirming
        ? (
          <p class="warning-text" data-confirm>
            Every device config becomes invalid until it is downloaded again. Rotate the key?{" "}
            <button type="button" class="danger" disabled={busy} onClick={rotate}>
              Rotate the key now
            </button>{" "}
            <button type="button" class="secondary" onClick={() => setConfirming(false)}>
              Keep the key
            </button>
          </p>
        )
        : (
          <button type="button" class="secondary" onClick={() => setConfirming(true)}>
            Rotate key
          </button>
        )}
    </section>
  );
}
