/**
 * One connector: its traffic usage with the reset, every field (connector-form.tsx), and
 * deleting it with its proxies (typed confirmation).
 */
import { useEffect, useState } from "preact/hooks";
import { api } from "../api/client.ts";
import type { Connector, Credential } from "../api/types.ts";
import { useSession } from "../session.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { TypedDelete } from "../ui/typed-delete.tsx";
import { UsageBar } from "../ui/usage-bar.tsx";
import { useApi } from "../ui/use-api.ts";
import { ConnectorForm } from "./connector-form.tsx";

/** How often a connector is read again; faster while a traffic decision is pending. */
export const REFRESH_MS = 15_000;
export const PENDING_REFRESH_MS = 2_000;

export function ConnectorPage(
  { projectId, connectorId }: { projectId: string; connectorId: string },
) {
  const session = useSession();
  const path = `/projects/${projectId}/connectors/${connectorId}`;
  const [refreshMs, setRefreshMs] = useState(REFRESH_MS);
  const loaded = useApi<Connector>(path, undefined, refreshMs);
  const all = useApi<Connector[]>(`/projects/${projectId}/connectors`);
  const credentials = useApi<Credential[]>(`/projects/${projectId}/credentials`);
  const [connector, setConnector] = useState<Connector | undefined>();
  useEffect(() => setConnector(loaded.data), [loaded.data]);
  useEffect(() => {
    setRefreshMs(connector?.traffic_usage?.pending ? PENDING_REFRESH_MS : REFRESH_MS);
  }, [connector]);

  if (loaded.error && !connector) return <ErrorNote error={loaded.error} />;
  if (!connector) return <p class="muted">Loading…</p>;

  const save = async (body: Record<string, unknown>) => {
    const stored = await api<Connector>("PATCH", path, { body });
    setConnector(stored);
    return stored;
  };

  return (
    <section>
      <p>
        <a href={`/projects/${projectId}/connectors`}>← All connectors</a>
      </p>
      <header class="toolbar">
        <h2>{connector.name}</h2>
        <span class="muted">
          {connector.kind}, {connector.proxy_count}{" "}
          {connector.proxy_count === 1 ? "proxy" : "proxies"}
        </span>
      </header>
      {connector.last_error
        ? (
          <p class="form-error">
            Last error ({connector.consecutive_errors} in a row): {connector.last_error}
          </p>
        )
        : null}
      {connector.traffic_usage
        ? (
          <UsageBar
            usage={connector.traffic_usage}
            canReset={session.canEdit}
            onReset={async () => {
              setConnector(await api<Connector>("POST", `${path}/traffic/reset`));
            }}
          />
        )
        : null}
      <ConnectorForm
        key={connector.id}
        connector={connector}
        others={all.data ?? []}
        credentials={credentials.data ?? []}
        readOnly={!session.canEdit}
        onSubmit={save}
        submitLabel="Save changes"
      />
      {session.canEdit ? <DeleteConnector projectId={projectId} connector={connector} /> : null}
    </section>
  );
}

function DeleteConnector({ projectId, connector }: { projectId: string; connector: Connector }) {
  return (
    <TypedDelete
      what="connector"
      name={connector.name}
      path={`/projects/${projectId}/connectors/${connector.id}`}
      then={`/projects/${projectId}/connectors`}
    >
      Its {connector.proxy_count} {connector.proxy_count === 1 ? "proxy goes" : "proxies go"}{" "}
      with it.
    </TypedDelete>
  );
}
