/**
 * A project's connectors: the list (kind, a vendor connector's provider, proxy type and mode, a
 * cloud connector's cloud, enabled, weight and the share of requests it gives, countries, proxies, traffic usage),
 * enable and disable in one click, and a new connector (editors). One connector's page
 * (`/projects/:id/connectors/:cid`) is in connector.tsx.
 */
import { useEffect, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, type ApiError } from "../api/client.ts";
import type { Connector } from "../../../api/answers/connectors.ts";
import type { Credential } from "../../../api/answers/credentials.ts";
import type { ProviderRecord } from "../../../api/answers/providers.ts";
import { useSession } from "../session.tsx";
import { formatPercent } from "../ui/format.ts";
import { connectorMode, typeOf } from "../ui/providers.ts";
import { ErrorNote } from "../ui/status.tsx";
import { UsageBar } from "../ui/usage-bar.tsx";
import { useApi } from "../ui/use-api.ts";
import { ConnectorForm, PROVIDER_API } from "./connector-form.tsx";
import { ConnectorPage, PENDING_REFRESH_MS, REFRESH_MS } from "./connector.tsx";
import { CLOUD_KIND, cloudName, isCloudProvider } from "../ui/clouds.ts";

export function Connectors(
  { projectId, connectorId }: { projectId: string; connectorId?: string },
) {
  if (connectorId) return <ConnectorPage projectId={projectId} connectorId={connectorId} />;
  return <ConnectorList projectId={projectId} />;
}

function ConnectorList({ projectId }: { projectId: string }) {
  const session = useSession();
  const { route, query } = useLocation();
  const [refreshMs, setRefreshMs] = useState(REFRESH_MS);
  const loaded = useApi<Connector[]>(`/projects/${projectId}/connectors`, undefined, refreshMs);
  const credentials = useApi<Credential[]>(`/projects/${projectId}/credentials`);
  const providers = useApi<ProviderRecord[]>("/providers");
  const [connectors, setConnectors] = useState<Connector[] | undefined>();
  // `?new=<credential id>` (a credential's page) opens a vendor connector's form on it.
  const [creating, setCreating] = useState(query.new !== undefined);
  const [toggleError, setToggleError] = useState<ApiError | undefined>();
  useEffect(() => setConnectors(loaded.data), [loaded.data]);
  useEffect(() => {
    const pending = (connectors ?? []).some((c) => c.traffic_usage?.pending);
    setRefreshMs(pending ? PENDING_REFRESH_MS : REFRESH_MS);
  }, [connectors]);

  const create = async (body: Record<string, unknown>) => {
    const connector = await api<Connector>("POST", `/projects/${projectId}/connectors`, { body });
    route(`/projects/${projectId}/connectors/${connector.id}`);
  };

  const toggle = async (connector: Connector) => {
    setToggleError(undefined);
    try {
      const stored = await api<Connector>(
        "PATCH",
        `/projects/${projectId}/connectors/${connector.id}`,
        { body: { enabled: !connector.enabled } },
      );
      setConnectors((old) => old?.map((c) => (c.id === stored.id ? stored : c)));
    } catch (failure) {
      setToggleError(failure as ApiError);
    }
  };

  const list = connectors ?? [];
  const catalogue = providers.data ?? [];
  const startOn = credentials.data?.find((c) => c.id === query.new);
  const enabledWeight = list.filter((c) => c.enabled).reduce((sum, c) => sum + c.weight, 0);

  return (
    <section>
      <header class="toolbar">
        <h2>Connectors</h2>
        {session.canEdit && !creating
          ? <button type="button" onClick={() => setCreating(true)}>New connector</button>
          : null}
      </header>
      <ErrorNote error={loaded.error} />
      <ErrorNote error={toggleError} />
      <ErrorNote error={providers.error} />
      {creating && session.canEdit
        ? (
          <div class="card">
            <h3>New connector</h3>
            {credentials.data && (providers.data || providers.error)
              ? (
                <ConnectorForm
                  projectId={projectId}
                  others={list}
                  credentials={credentials.data}
                  providers={catalogue}
                  readOnly={false}
                  onSubmit={create}
                  submitLabel="Create connector"
                  start={startOn
                    ? (startOn.provider === PROVIDER_API
                      ? { kind: PROVIDER_API, credential_id: startOn.id }
                      : {
                        kind: isCloudProvider(startOn.provider) ? CLOUD_KIND : "vendor",
                        provider: startOn.provider,
                        credential_id: startOn.id,
                      })
                    : undefined}
                />
              )
              : <p class="muted">Loading…</p>}
            <button type="button" class="secondary" onClick={() => setCreating(false)}>
              Cancel
            </button>
          </div>
        )
        : null}
      <table class="data connectors" aria-label="Connectors">
        <thead>
          <tr>
            <th>Name</th>
            <th>Kind</th>
            <th>Provider</th>
            <th>Enabled</th>
            <th>Weight</th>
            <th>Share of requests</th>
            <th>Countries</th>
            <th>Proxies</th>
            <th>Traffic</th>
          </tr>
        </thead>
        <tbody>
          {list.map((connector) => (
            <tr key={connector.id} data-connector={connector.name}>
              <td>
                <a href={`/projects/${projectId}/connectors/${connector.id}`}>{connector.name}</a>
                {connector.pending_deletion ? <span class="badge danger">deleting</span> : null}
                {connector.last_error
                  ? (
                    <span class="badge warning" title={connector.last_error}>
                      {connector.consecutive_errors} errors
                    </span>
                  )
                  : null}
              </td>
              <td>{connector.kind}</td>
              <td data-provider={connector.kind === "vendor" ? connector.provider : undefined}>
                <VendorSummary connector={connector} providers={catalogue} />
              </td>
              <td>
                <span
                  class={`badge ${connector.enabled ? "ok" : ""}`}
                  data-enabled={String(connector.enabled)}
                >
                  {connector.enabled ? "enabled" : "disabled"}
                </span>
                {session.canEdit
                  ? (
                    <button
                      type="button"
                      class="secondary small"
                      onClick={() => toggle(connector)}
                    >
                      {connector.enabled ? "Disable" : "Enable"}
                    </button>
                  )
                  : null}
              </td>
              <td>{connector.weight}</td>
              <td data-share>
                {connector.enabled && enabledWeight > 0
                  ? formatPercent(connector.weight / enabledWeight)
                  : "–"}
              </td>
              <td>{connector.countries.length > 0 ? connector.countries.join(", ") : "any"}</td>
              <td>{connector.proxy_count}</td>
              <td class="traffic">
                {connector.traffic_usage
                  ? (
                    <UsageBar
                      usage={connector.traffic_usage}
                      canReset={false}
                      onReset={async () => {}}
                    />
                  )
                  : <span class="muted">not counted</span>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {connectors?.length === 0 ? <p class="muted">No connectors yet.</p> : null}
    </section>
  );
}

/** A vendor connector's provider, proxy type and mode, in one cell; static ones have none. */
function VendorSummary(
  { connector, providers }: { connector: Connector; providers: readonly ProviderRecord[] },
) {
  if (connector.kind === PROVIDER_API) return <span class="muted">a provider's API, pooled</span>;
  if (connector.kind === CLOUD_KIND) {
    return <span data-cloud={connector.provider}>{cloudName(connector.provider)}</span>;
  }
  if (connector.kind !== "vendor") return <span class="muted">–</span>;
  const provider = providers.find((p) => p.id === connector.provider);
  const type = typeOf(provider, connector.config);
  return (
    <>
      <a href={`/providers#${connector.provider}`}>{provider?.name ?? connector.provider}</a>
      {provider || providers.length === 0
        ? null
        : (
          <span class="badge danger" title="Its descriptor is gone: left out of the feed">
            gone
          </span>
        )}
      <br />
      <span class="muted">
        {type?.name ?? String(connector.config?.proxy_type ?? "")}, {connectorMode(connector, type)}
      </span>
    </>
  );
}
