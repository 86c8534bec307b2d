/**
 * A project's tunnel devices, WireGuard and OpenVPN, in one list (docs/tunnels.md): each
 * device's protocol, its status (enabled or disabled, online or not), when a gateway last saw
 * it, the place and session it asks for, its tunnel address and what it carried (all-time
 * requests and bytes), read every 15 s; for everyone, a device's usage over a range as charts
 * beneath its row; for editors, a new device of either protocol (WireGuard's keys made by the
 * server or its own public key; OpenVPN's key and certificate made by the server), an edit,
 * enable and disable in one click, and delete after a second click. A WireGuard device's config
 * downloads as a `.conf` file or shows as a QR code for a phone's WireGuard app; an OpenVPN
 * device's profile downloads as a `.ovpn` file (too large for a QR code), and "New certificate"
 * gives it a new key and certificate once confirmed. The keys are in the files alone: no page
 * shows them.
 */
import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../api/client.ts";
import type { OpenvpnDevice, OpenvpnSettings } from "../../../api/answers/openvpn.ts";
import {
  configFileName,
  type Device,
  type WireguardSettings,
} from "../../../api/answers/wireguard.ts";
import type { Series } from "../../../api/answers/metrics.ts";
import { useSession } from "../session.tsx";
import { fetchAnswer, saveAnswer } from "../ui/download.ts";
import { formatBytes, formatCount } from "../ui/format.ts";
import { Checkbox, Field, FormError, Select, TextInput } from "../ui/forms.tsx";
import { Country } from "../ui/location.tsx";
import { RANGES } from "../ui/ranges.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { UsageCharts } from "../ui/usage-charts.tsx";
import { useApi } from "../ui/use-api.ts";
import { useForm } from "../ui/use-form.ts";

/** Gateways report handshakes and sessions every 10 s; the list follows. */
const REFRESH_MS = 15_000;
const COLUMNS = 11;

/** The tunnels a device joins over: each the API's path segment, with its name. */
const PROTOCOL_NAMES = { wireguard: "WireGuard", openvpn: "OpenVPN" } as const;
type Protocol = keyof typeof PROTOCOL_NAMES;
const PROTOCOLS = Object.entries(PROTOCOL_NAMES) as [Protocol, string][];
/** The file each protocol's device is configured with, as the API names it. */
const FILE_EXTENSIONS: Record<Protocol, string> = { wireguard: "conf", openvpn: "ovpn" };

type AnyDevice = Device | OpenvpnDevice;

function isOpenvpn(device: AnyDevice): device is OpenvpnDevice {
  return device.protocol === "openvpn";
}

const protocolOf = (device: AnyDevice): Protocol => isOpenvpn(device) ? "openvpn" : "wireguard";

/** What is open beneath a device's row. */
type Panel = { id: string; what: "edit" | "qr" | "usage" };

/** What a device's row asks to confirm: its deletion, or an OpenVPN device's new certificate. */
type Confirming = { id: string; what: "delete" | "certificate" };

export function Devices({ projectId }: { projectId: string }) {
  const session = useSession();
  const peersOf = (protocol: Protocol) => `/projects/${projectId}/${protocol}/peers`;
  const pathOf = (device: AnyDevice) => `${peersOf(protocolOf(device))}/${device.id}`;
  const wireguard = useApi<Device[]>(peersOf("wireguard"), undefined, REFRESH_MS);
  const openvpn = useApi<OpenvpnDevice[]>(peersOf("openvpn"), undefined, REFRESH_MS);
  const wireguardSettings = useApi<WireguardSettings>("/wireguard/settings");
  const openvpnSettings = useApi<OpenvpnSettings>("/openvpn/settings");
  const [creating, setCreating] = useState(false);
  const [added, setAdded] = useState<AnyDevice | undefined>();
  const [renewed, setRenewed] = useState<OpenvpnDevice | undefined>();
  const [panel, setPanel] = useState<Panel | undefined>();
  const [confirming, setConfirming] = useState<Confirming | undefined>();
  const [rowError, setRowError] = useState<{ id: string; error: ApiError } | undefined>();

  const reload = () => {
    wireguard.reload();
    openvpn.reload();
  };
  const act = async (device: AnyDevice, step: () => Promise<unknown>) => {
    setRowError(undefined);
    try {
      await step();
      setConfirming(undefined);
    } catch (failure) {
      setRowError({ id: device.id, error: toApiError(failure) });
    }
    reload();
  };
  const toggle = (which: Panel["what"], device: AnyDevice) =>
    setPanel(
      panel?.id === device.id && panel.what === which ? undefined : { id: device.id, what: which },
    );
  const askFirst = (what: Confirming["what"], device: AnyDevice) => {
    setRowError(undefined);
    setConfirming({ id: device.id, what });
  };
  const isConfirming = (what: Confirming["what"], device: AnyDevice) =>
    confirming?.id === device.id && confirming.what === what;

  // Both lists in the order the devices were made.
  const list: AnyDevice[] = [...(wireguard.data ?? []), ...(openvpn.data ?? [])]
    .sort((a, b) => a.created_at.localeCompare(b.created_at));
  const noEndpoint = PROTOCOLS.filter(([protocol]) =>
    (protocol === "wireguard" ? wireguardSettings : openvpnSettings).data?.endpoint_host === null
  );
  return (
    <section class="devices">
      <header class="toolbar">
        <h2>Devices</h2>
        {session.canEdit && !creating
          ? <button type="button" onClick={() => setCreating(true)}>New device</button>
          : null}
      </header>
      <p class="muted">
        Phones, laptops and other devices join this project over WireGuard or OpenVPN: every TCP
        connection a device opens goes through the project's pool with the device's country, state,
        city and session. A device's file holds its keys (a WireGuard <code>.conf</code>{" "}
        or its QR code for a phone's WireGuard app, an OpenVPN <code>.ovpn</code>{" "}
        profile for any OpenVPN client): only editors and admins download it.
      </p>
      {noEndpoint.map(([protocol, name]) => (
        <p key={protocol} class="warning-text" data-endpoint="none" data-protocol={protocol}>
          No {name} endpoint host is set, so no {name}{" "}
          device can get its file yet: an admin sets the host devices dial in the{" "}
          {session.isAdmin ? <a href={`/${protocol}`}>{name} settings</a> : `${name} settings`}.
        </p>
      ))}
      <ErrorNote error={wireguard.error} />
      <ErrorNote error={openvpn.error} />
      {creating && session.canEdit
        ? (
          <NewDevice
            peersOf={peersOf}
            onCreated={(device) => {
              setCreating(false);
              setAdded(device);
              reload();
            }}
            onCancel={() => setCreating(false)}
          />
        )
        : null}
      {added
        ? (
          <p class="card" role="status" data-added={added.name}>
            {PROTOCOL_NAMES[protocolOf(added)]} device “{added.name}” added at{" "}
            <code>{added.address}</code>. {isOpenvpn(added)
              ? "The server made its key and certificate: download its .ovpn profile from its row."
              : added.has_private_key
              ? "The server made its keys: download its config or show its QR code from its row."
              : "It keeps its own private key: its config has a line to put it in."}{" "}
            <button type="button" class="link" onClick={() => setAdded(undefined)}>Done</button>
          </p>
        )
        : null}
      {renewed
        ? (
          <p class="card" role="status" data-renewed={renewed.name}>
            “{renewed.name}” has a new certificate (serial{" "}
            <code data-serial>{renewed.certificate_serial}</code>): the profile downloaded before no
            longer connects. Download its .ovpn again.{" "}
            <button type="button" class="link" onClick={() => setRenewed(undefined)}>Done</button>
          </p>
        )
        : null}
      <table class="data devices-table" aria-label="Devices">
        <thead>
          <tr>
            <th>Name</th>
            <th>Protocol</th>
            <th>Status</th>
            <th>Last seen</th>
            <th>Country</th>
            <th>State</th>
            <th>City</th>
            <th>Session</th>
            <th>Address</th>
            <th title="All-time: requests, and bytes sent ↑ and received ↓">Traffic</th>
            <th>Actions</th>
          </tr>
        </thead>
        <tbody>
          {list.map((device) => (
            <Fragment key={device.id}>
              <tr data-device={device.name} data-protocol={protocolOf(device)}>
                <td>{device.name}</td>
                <td>{PROTOCOL_NAMES[protocolOf(device)]}</td>
                <td>
                  <span
                    class={`badge ${device.enabled ? "ok" : "danger"}`}
                    data-enabled={String(device.enabled)}
                  >
                    {device.enabled ? "enabled" : "disabled"}
                  </span>
                  <span
                    class={`badge ${device.online ? "ok" : "muted"}`}
                    data-online={String(device.online)}
                    title="Online: a gateway saw it connected within the last 3 minutes"
                  >
                    {device.online ? "online" : "offline"}
                  </span>
                </td>
                <td data-last-seen>
                  {device.last_seen_at ? <Time value={device.last_seen_at} /> : "never"}
                </td>
                <td>
                  <Country code={device.country} />
                </td>
                <td>{device.state ?? "–"}</td>
                <td>{device.city ?? "–"}</td>
                <td>{device.session_id ?? "–"}</td>
                <td>
                  <code>{device.address}</code>
                </td>
                <td data-traffic>
                  {`${formatCount(device.usage.requests)} req · ↑ ${
                    formatBytes(device.usage.bytes_sent)
                  } ↓ ${formatBytes(device.usage.bytes_received)}`}
                </td>
                <td class="row-actions">
                  <button
                    type="button"
                    class="secondary small"
                    aria-expanded={panel?.id === device.id && panel.what === "usage"}
                    onClick={() => toggle("usage", device)}
                  >
                    Usage
                  </button>
                  {session.canEdit
                    ? (
                      <>
                        <button
                          type="button"
                          class="secondary small"
                          onClick={() =>
                            act(device, () =>
                              saveAnswer(
                                `/api/v1${pathOf(device)}/config`,
                                configFileName(
                                  device.name,
                                  FILE_EXTENSIONS[protocolOf(device)],
                                ),
                              ))}
                        >
                          Download .{FILE_EXTENSIONS[protocolOf(device)]}
                        </button>
                        {isOpenvpn(device)
                          ? (
                            <button
                              type="button"
                              class="secondary small"
                              aria-expanded={isConfirming("certificate", device)}
                              onClick={() =>
                                isConfirming("certificate", device)
                                  ? setConfirming(undefined)
                                  : askFirst("certificate", device)}
                            >
                              New certificate
                            </button>
                          )
                          : (
                            <button
                              type="button"
                              class="secondary small"
                              aria-expanded={panel?.id === device.id && panel.what === "qr"}
                              onClick={() => toggle("qr", device)}
                            >
                              QR code
                            </button>
                          )}
                        <button
                          type="button"
                          class="secondary small"
                          aria-expanded={panel?.id === device.id && panel.what === "edit"}
                          onClick={() => toggle("edit", device)}
                        >
                          Edit
                        </button>
                        <button
                          type="button"
                          class="secondary small"
                          onClick={() =>
                            act(device, () =>
                              api("PATCH", pathOf(device), {
                                body: { enabled: !device.enabled },
                              }))}
                        >
                          {device.enabled ? "Disable" : "Enable"}
                        </button>
                        {isConfirming("delete", device)
                          ? (
                            <>
                              <button
                                type="button"
                                class="danger small"
                                onClick={() => act(device, () => api("DELETE", pathOf(device)))}
                              >
                                Delete {device.name} for good
                              </button>
                              <button
                                type="button"
                                class="secondary small"
                                onClick={() => setConfirming(undefined)}
                              >
                                Keep
                              </button>
                            </>
                          )
                          : (
                            <button
                              type="button"
                              class="secondary small"
                              onClick={() => askFirst("delete", device)}
                            >
                              Delete
                            </button>
                          )}
                      </>
                    )
                    : null}
                </td>
              </tr>
              {isOpenvpn(device) && isConfirming("certificate", device)
                ? (
                  <tr class="device-panel">
                    <td colSpan={COLUMNS}>
                      <p class="warning-text" data-confirm>
                        A new key and certificate for “{device.name}”: the .ovpn profile it has
                        stops working, and it connects again only with its profile downloaded anew.
                        Issue a new certificate?{" "}
                        <button
                          type="button"
                          class="danger small"
                          onClick={() =>
                            act(device, async () => {
                              setRenewed(
                                await api<OpenvpnDevice>(
                                  "POST",
                                  `${pathOf(device)}/rotate-certificate`,
                                ),
                              );
                            })}
                        >
                          Issue the new certificate
                        </button>{" "}
                        <button
                          type="button"
                          class="secondary small"
                          onClick={() => setConfirming(undefined)}
                        >
                          Keep the certificate
                        </button>
                      </p>
                    </td>
                  </tr>
                )
                : null}
              {rowError?.id === device.id
                ? (
                  <tr>
                    <td colSpan={COLUMNS}>
                      <ErrorNote error={rowError.error} />
                    </td>
                  </tr>
                )
                : null}
              {panel?.id === device.id
                ? (
                  <tr class="device-panel">
                    <td colSpan={COLUMNS}>
                      {panel.what === "usage"
                        ? <DeviceUsage path={pathOf(device)} device={device} />
                        : panel.what === "qr"
                        ? (
                          <QrCode
                            path={`/api/v1${pathOf(device)}/config?format=qr`}
                            device={device}
                          />
                        )
                        : (
                          <EditDevice
                            path={pathOf(device)}
                            device={device}
                            onSaved={() => {
                              setPanel(undefined);
                              reload();
                            }}
                            onCancel={() => setPanel(undefined)}
                          />
                        )}
                    </td>
                  </tr>
                )
                : null}
            </Fragment>
          ))}
        </tbody>
      </table>
      {wireguard.data?.length === 0 && openvpn.data?.length === 0
        ? <p class="muted">No devices yet.</p>
        : null}
    </section>
  );
}

/** A download's failure (a plain Error from the browser) as the page shows failures. */
function toApiError(failure: unknown): ApiError {
  if (failure instanceof ApiError) return failure;
  return new ApiError(0, (failure as Error).message);
}

/** The options every device form has, as the API's body names them. */
interface OptionState {
  country: string;
  state: string;
  city: string;
  session_id: string;
}

function OptionFields(
  { state, set, error }: {
    state: OptionState;
    set: <K extends keyof OptionState>(key: K) => (value: string) => void;
    error?: ApiError;
  },
) {
  return (
    <>
      <Field label="Country" field="country" error={error} hint="Two letters: DE, US; blank: any">
        <TextInput name="country" value={state.country} onInput={set("country")} />
      </Field>
      <Field label="State" field="state" error={error} hint="A region code: CA, BY">
        <TextInput name="state" value={state.state} onInput={set("state")} />
      </Field>
      <Field label="City" field="city" error={error} hint="berlin, new_york">
        <TextInput name="city" value={state.city} onInput={set("city")} />
      </Field>
      <Field
        label="Session"
        field="session_id"
        error={error}
        hint="One exit for everything it does; blank: none"
      >
        <TextInput name="session_id" value={state.session_id} onInput={set("session_id")} />
      </Field>
    </>
  );
}

function NewDevice(
  { peersOf, onCreated, onCancel }: {
    peersOf: (protocol: Protocol) => string;
    onCreated: (device: AnyDevice) => void;
    onCancel: () => void;
  },
) {
  const form = useForm<
    OptionState & { protocol: Protocol; name: string; public_key: string; enabled: boolean },
    AnyDevice
  >(
    () => ({
      protocol: "wireguard",
      name: "",
      country: "",
      state: "",
      city: "",
      session_id: "",
      public_key: "",
      enabled: true,
    }),
    undefined,
    (state) => ({
      ...state,
      // Only a WireGuard device may bring its own key; an OpenVPN device's is the server's.
      public_key: state.protocol === "openvpn" || state.public_key.trim() === ""
        ? undefined
        : state.public_key,
    }),
    async ({ protocol, ...body }) => {
      onCreated(await api<AnyDevice>("POST", peersOf(protocol as Protocol), { body }));
    },
  );
  const { state, set, error } = form;
  return (
    <form class="card" onSubmit={form.submit} aria-label="New device" noValidate>
      <h3>New device</h3>
      <FormError error={error} />
      <div class="grid">
        <Field
          label="Protocol"
          field="protocol"
          error={error}
          hint={state.protocol === "openvpn"
            ? "A .ovpn profile for any OpenVPN client (no QR code: it is too large for one)"
            : "A .conf file, or a QR code for a phone's WireGuard app"}
        >
          <Select
            name="protocol"
            value={state.protocol}
            onChange={(value) => set("protocol")(value as Protocol)}
            options={PROTOCOLS}
          />
        </Field>
        <Field label="Name" field="name" error={error} required hint="pixel, alice-laptop…">
          <TextInput name="name" value={state.name} onInput={set("name")} required />
        </Field>
        <OptionFields state={state} set={set} error={error} />
        {state.protocol === "wireguard"
          ? (
            <Field
              label="Its own public key"
              field="public_key"
              error={error}
              hint="Blank: the server generates the device's keys and puts them in its config. A key from wg pubkey: the device keeps its private key."
            >
              <TextInput name="public_key" value={state.public_key} onInput={set("public_key")} />
            </Field>
          )
          : null}
      </div>
      <Checkbox
        name="enabled"
        checked={state.enabled}
        onChange={set("enabled")}
        label="Enabled: it may connect at once"
      />
      <div class="actions">
        <button type="submit" disabled={form.busy}>{form.busy ? "Adding…" : "Add device"}</button>
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

function EditDevice(
  { path, device, onSaved, onCancel }: {
    path: string;
    device: AnyDevice;
    onSaved: () => void;
    onCancel: () => void;
  },
) {
  const form = useForm<OptionState & { name: string }, AnyDevice>(
    (stored) => ({
      name: stored?.name ?? "",
      country: stored?.country ?? "",
      state: stored?.state ?? "",
      city: stored?.city ?? "",
      session_id: stored?.session_id ?? "",
    }),
    device,
    (state) => ({ ...state }),
    async (body) => {
      await api<AnyDevice>("PATCH", path, { body });
      onSaved();
    },
  );
  const { state, set, error } = form;
  return (
    <form onSubmit={form.submit} aria-label={`Edit ${device.name}`} noValidate>
      <FormError error={error} />
      <div class="grid">
        <Field label="Name" field="name" error={error} required>
          <TextInput name="name" value={state.name} onInput={set("name")} required />
        </Field>
        <OptionFields state={state} set={set} error={error} />
      </div>
      <p class="muted">
        A change applies to the device's next connection; its file stays as it is.
      </p>
      <div class="actions">
        <button type="submit" disabled={form.busy}>{form.busy ? "Saving…" : "Save changes"}</button>
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

/** What a device carried over a range, as the Usage page charts a project's. */
function DeviceUsage({ path, device }: { path: string; device: AnyDevice }) {
  const [range, setRange] = useState("24h");
  const series = useApi<Series>(`${path}/metrics/history`, { range });
  return (
    <div class="device-usage" role="region" aria-label={`Usage of ${device.name}`}>
      <div class="toolbar">
        <p class="muted">
          {`All-time: ${formatCount(device.usage.requests)} requests, ${
            formatBytes(device.usage.bytes_sent)
          } sent, ${formatBytes(device.usage.bytes_received)} received; ${
            formatCount(device.usage.encrypted_dns_closed)
          } encrypted DNS connections closed.`}
        </p>
        <label>
          Range <Select name="range" value={range} onChange={setRange} options={RANGES} />
        </label>
      </div>
      <ErrorNote error={series.error} />
      <UsageCharts series={series.data} />
    </div>
  );
}

/** The config as a QR code (the API's SVG, fetched with the token), to scan with a phone. */
function QrCode({ path, device }: { path: string; device: AnyDevice }) {
  const [url, setUrl] = useState<string | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  useEffect(() => {
    let made: string | undefined;
    let live = true;
    fetchAnswer(path)
      .then((svg) => {
        made = URL.createObjectURL(svg);
        if (live) setUrl(made);
        else URL.revokeObjectURL(made);
      })
      .catch((failure) => {
        if (live) setError(toApiError(failure));
      });
    return () => {
      live = false;
      if (made) URL.revokeObjectURL(made);
    };
  }, [path]);
  return (
    <div class="device-qr" role="region" aria-label={`QR code of ${device.name}`}>
      <ErrorNote error={error} />
      {url
        ? (
          <>
            <img class="qr-code" src={url} alt={`The WireGuard config of ${device.name}`} />
            <p class="muted">
              In the WireGuard app: add a tunnel, then scan from QR code. It holds the device's
              keys: show it to that device alone.
            </p>
          </>
        )
        : error
        ? null
        : <p class="muted">Loading…</p>}
    </div>
  );
}
