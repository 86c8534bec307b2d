/**
 * How a client uses this project: the gateway's address with the project's login, the username
 * options, `curl` and Python lines for HTTP, CONNECT and SOCKS5; TLS interception (the install's
 * CA to download, its SPKI hash, and lines that make clients trust it: connect-tls.tsx); and the
 * routing preview: a
 * username typed here is routed by the gateway's own router over this project's compile (the
 * API's routing preview), showing which connectors and proxies would serve it and why the others
 * would not.
 */
import { useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import type { Project } from "../../../api/answers/projects.ts";
import { Field, FormError, TextInput } from "../ui/forms.tsx";
import { TlsInterception } from "./connect-tls.tsx";

/** Where clients reach the gateway, as this browser's user last said (kept here). */
const GATEWAY_KEY = "octoprox.gateway";

interface GatewayAddress {
  host: string;
  httpPort: string;
  socksPort: string;
}

function storedGateway(): GatewayAddress {
  const fallback = { host: location.hostname, httpPort: "8080", socksPort: "1080" };
  try {
    return { ...fallback, ...JSON.parse(localStorage.getItem(GATEWAY_KEY) ?? "{}") };
  } catch {
    return fallback;
  }
}

interface PreviewConnector {
  id: string;
  name: string;
  weight: number;
  eligible: boolean;
  code: string | null;
  reason: string | null;
  proxies_for_place: number;
  healthy: number;
  quarantined: number;
}

interface PreviewProxy {
  id: string;
  connector_id: string;
  scheme: string;
  address: string;
  country: string | null;
  status: string;
  quarantined: boolean;
}

interface Preview {
  strategy: string;
  username: Record<string, string | number | null>;
  connectors: PreviewConnector[];
  proxies: { items: PreviewProxy[]; total: number };
  chosen: PreviewProxy | null;
  refusal: { status: number; proxy_status: string; reason: string } | null;
}

/** A username with the options a client asked for, in the gateway's grammar. */
function usernameWith(base: string, country: string, session: string): string {
  let name = base;
  if (country.trim()) name += `-cc-${country.trim().toLowerCase()}`;
  if (session.trim()) name += `-sessid-${session.trim()}`;
  return name;
}

export function Connect({ project }: { project: Project }) {
  const [gateway, setGateway] = useState<GatewayAddress>(storedGateway);
  const edit = (key: keyof GatewayAddress) => (value: string) => {
    const next = { ...gateway, [key]: value };
    setGateway(next);
    localStorage.setItem(GATEWAY_KEY, JSON.stringify(next));
  };
  const host = gateway.host;
  const [country, setCountry] = useState("");
  const [session, setSession] = useState("");
  const password = project.password ?? "<password>";
  const username = usernameWith(project.username, country, session);
  const http = `http://${username}:${password}@${host}:${gateway.httpPort}`;
  const socks = `socks5h://${username}:${password}@${host}:${gateway.socksPort}`;
  const examples = [
    ["HTTP (plain requests)", `curl -x '${http}' http://example.com/`],
    ["HTTPS through CONNECT", `curl -x '${http}' https://example.com/`],
    ["SOCKS5", `curl -x '${socks}' https://example.com/`],
    [
      "Python (requests)",
      `import requests\n\nproxies = {"http": "${http}", "https": "${http}"}\n` +
      `print(requests.get("https://example.com/", proxies=proxies).status_code)`,
    ],
  ] as const;

  return (
    <section class="connect">
      <h2>Connect a client</h2>
      <div class="grid">
        <Field
          label="Gateway host"
          field="gateway_host"
          hint="The address clients reach the gateway at (kept in this browser)"
        >
          <TextInput name="gateway_host" value={gateway.host} onInput={edit("host")} />
        </Field>
        <Field label="HTTP port" field="gateway_http_port" hint="OCTOPROX_PROXY_PORT">
          <TextInput name="gateway_http_port" value={gateway.httpPort} onInput={edit("httpPort")} />
        </Field>
        <Field label="SOCKS5 port" field="gateway_socks_port" hint="OCTOPROX_SOCKS_PORT">
          <TextInput
            name="gateway_socks_port"
            value={gateway.socksPort}
            onInput={edit("socksPort")}
          />
        </Field>
        <Field label="Country (-cc-)" field="country" hint="Two letters, such as de">
          <TextInput name="country" value={country} onInput={setCountry} />
        </Field>
        <Field label="Session (-sessid-)" field="session" hint="Keeps one exit for a while">
          <TextInput name="session" value={session} onInput={setSession} />
        </Field>
      </div>
      {project.password === undefined
        ? (
          <p class="muted">
            Your role does not see the project's password: it shows as &lt;password&gt;.
          </p>
        )
        : null}
      <p>
        Username: <code data-testid="username">{username}</code>
      </p>
      {examples.map(([title, line]) => (
        <div key={title} class="example" data-example={title}>
          <h3>{title}</h3>
          <pre><code>{line}</code></pre>
        </div>
      ))}
      <p class="muted">
        Clients that cannot put options in a username may send them as headers instead
        (X-Octoprox-Country, X-Octoprox-Session, …); the gateway removes them before the request
        leaves.
      </p>
      <TlsInterception
        project={project}
        where={{ host, httpPort: gateway.httpPort, username, password }}
      />
      <RoutingPreview project={project} initial={username} />
    </section>
  );
}

function RoutingPreview({ project, initial }: { project: Project; initial: string }) {
  const [username, setUsername] = useState(initial);
  const [target, setTarget] = useState("");
  const [preview, setPreview] = useState<Preview | undefined>();
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  const run = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      setPreview(
        await api<Preview>("POST", `/projects/${project.id}/routing-preview`, {
          body: { username, ...(target.trim() ? { target: target.trim() } : {}) },
        }),
      );
    } catch (failure) {
      setPreview(undefined);
      setError(failure as ApiError);
    } finally {
      setBusy(false);
    }
  };
  const names = new Map((preview?.connectors ?? []).map((c) => [c.id, c.name]));
  return (
    <form class="card" onSubmit={run} aria-label="Routing preview">
      <h3>Routing preview</h3>
      <p class="muted">
        Type a username as a client would send it: the gateway's own router says where it would go
        right now, and why other connectors would not take it.
      </p>
      <FormError error={error} />
      <div class="row">
        <Field label="Username" field="username" error={error}>
          <TextInput name="preview-username" value={username} onInput={setUsername} />
        </Field>
        <Field
          label="Destination (optional)"
          field="target"
          error={error}
          hint="host:port, for domain rules"
        >
          <TextInput name="preview-target" value={target} onInput={setTarget} />
        </Field>
      </div>
      <button type="submit" disabled={busy}>{busy ? "Routing…" : "Preview"}</button>
      {preview
        ? (
          <div class="preview" aria-label="Preview result">
            {preview.chosen
              ? (
                <p class="chosen" data-testid="chosen">
                  Would go to <code>{preview.chosen.address}</code> of connector{" "}
                  <strong>{names.get(preview.chosen.connector_id)}</strong>{" "}
                  ({preview.strategy.replace("_", " ")}).
                </p>
              )
              : (
                <p class="form-error" data-testid="refusal">
                  Refused: {preview.refusal?.status} {preview.refusal?.reason}
                </p>
              )}
            <table class="data" aria-label="Connectors for this username">
              <thead>
                <tr>
                  <th>Connector</th>
                  <th>Takes it</th>
                  <th>Why not</th>
                  <th>Proxies for the place</th>
                  <th>Healthy</th>
                </tr>
              </thead>
              <tbody>
                {preview.connectors.map((c) => (
                  <tr key={c.id} data-connector={c.name}>
                    <td>{c.name}</td>
                    <td>{c.eligible ? "yes" : "no"}</td>
                    <td>{c.reason ?? ""}</td>
                    <td>{c.proxies_for_place}</td>
                    <td>{c.healthy}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <p class="muted">
              {preview.proxies.total} proxies could serve it
              {preview.proxies.total > preview.proxies.items.length
                ? ` (the first ${preview.proxies.items.length} below)`
                : ""}.
            </p>
            <table class="data" aria-label="Proxies for this username">
              <tbody>
                {preview.proxies.items.map((p) => (
                  <tr key={p.id}>
                    <td>
                      <code>{p.address}</code>
                    </td>
                    <td>{names.get(p.connector_id)}</td>
                    <td>{p.country ?? "–"}</td>
                    <td>{p.status}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )
        : null}
    </form>
  );
}
