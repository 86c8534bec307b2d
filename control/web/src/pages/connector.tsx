/**
 * One connector: its traffic usage with the reset, a vendor connector's provider, proxy type,
 * mode, sync errors and rows, a cloud connector's instances and scaling (cloud-instances.tsx),
 * every field (connector-form.tsx), and deleting it with its proxies (typed confirmation; a
 * cloud connector's instances terminate first, and the page follows it until it is gone).
 */
import { useEffect, useState } from "preact/hooks";
import { api, type ApiError } from "../api/client.ts";
import type { Page } from "../../../api/answers/common.ts";
import type { Connector, PoolView } from "../../../api/answers/connectors.ts";
import type { Credential } from "../../../api/answers/credentials.ts";
import type { ProviderRecord } from "../../../api/answers/providers.ts";
import type { Proxy } from "../../../api/answers/proxies.ts";
import { useSession } from "../session.tsx";
import { formatCount } from "../ui/format.ts";
import { connectorMode, typeOf } from "../ui/providers.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { TypedDelete } from "../ui/typed-delete.tsx";
import { UsageBar } from "../ui/usage-bar.tsx";
import { useApi } from "../ui/use-api.ts";
import { ConnectorForm, PROVIDER_API } from "./connector-form.tsx";
import { CLOUD_KIND, cloudName } from "../ui/clouds.ts";
import { CloudInstancesPanel } from "./cloud-instances.tsx";

/** How often a connector is read again; faster while a traffic decision is pending. */
export const REFRESH_MS = 15_000;
export const PENDING_REFRESH_MS = 2_000;
/**
 * How long after a vendor connector's save its sync is awaited at the faster pace: its first
 * rows, or what an edit's sync made of it.
 */
const FIRST_SYNC_WAIT_MS = 120_000;
const SYNC_WAIT_MS = 30_000;
/** How often a provider_api connector's pool is read again (the pool job runs every 5 s). */
export const POOL_REFRESH_MS = 3_000;
/** Rows shown on the page; the Proxies tab has them all. */
const ROWS_SHOWN = 25;

/** A vendor connector saved a moment ago, without a sync error: its sync is awaited. */
function syncAwaited(connector: Connector | undefined): boolean {
  if (connector?.kind !== "vendor" || !connector.enabled || connector.last_error) return false;
  const age = Date.now() - Date.parse(connector.updated_at);
  return age < (connector.proxy_count === 0 ? FIRST_SYNC_WAIT_MS : SYNC_WAIT_MS);
}

/** A vendor connector saved a moment ago with no row yet: its first sync is awaited. */
function firstSyncAwaited(connector: Connector | undefined): boolean {
  return syncAwaited(connector) && connector?.proxy_count === 0;
}

export function ConnectorPage(
  { projectId, connectorId }: { projectId: string; connectorId: string },
) {
  const session = useSession();
  const path = `/projects/${projectId}/connectors/${connectorId}`;
  const [refreshMs, setRefreshMs] = useState(REFRESH_MS);
  const loaded = useApi<Connector>(path, undefined, refreshMs);
  const all = useApi<Connector[]>(`/projects/${projectId}/connectors`);
  const credentials = useApi<Credential[]>(`/projects/${projectId}/credentials`);
  const providers = useApi<ProviderRecord[]>("/providers");
  const [connector, setConnector] = useState<Connector | undefined>();
  useEffect(() => setConnector(loaded.data), [loaded.data]);
  useEffect(() => {
    const fast = connector?.traffic_usage?.pending || syncAwaited(connector) ||
      connector?.pending_deletion;
    setRefreshMs(fast ? PENDING_REFRESH_MS : REFRESH_MS);
  }, [connector]);

  // A cloud connector being deleted goes once its instances are terminated: the page says so.
  if (loaded.error?.status === 404 && connector?.pending_deletion) {
    return (
      <section>
        <p>
          <a href={`/projects/${projectId}/connectors`}>← All connectors</a>
        </p>
        <h2>{connector.name}</h2>
        <p class="ok-text" role="status" data-connector-gone>
          Deleted: its instances are terminated and the connector is gone.
        </p>
      </section>
    );
  }
  if (loaded.error && !connector) return <ErrorNote error={loaded.error} />;
  if (!connector || (!providers.data && !providers.error)) return <p class="muted">Loading…</p>;

  const save = async (body: Record<string, unknown>) => {
    const stored = await api<Connector>("PATCH", path, { body });
    setConnector(stored);
    return stored;
  };
  const vendor = connector.kind === "vendor";
  const cloud = connector.kind === CLOUD_KIND;

  return (
    <section>
      <p>
        <a href={`/projects/${projectId}/connectors`}>← All connectors</a>
      </p>
      <header class="toolbar">
        <h2>{connector.name}</h2>
        <span class="muted">
          {connector.kind === PROVIDER_API
            ? `${connector.kind}, proxies in its pool (Redis only)`
            : cloud
            ? `${connector.kind} on ${cloudName(connector.provider)}, ${connector.proxy_count} ${
              connector.proxy_count === 1 ? "instance" : "instances"
            }`
            : `${connector.kind}, ${connector.proxy_count} ${
              connector.proxy_count === 1 ? "proxy" : "proxies"
            }`}
        </span>
        {connector.pending_deletion ? <span class="badge danger">being deleted</span> : null}
      </header>
      {connector.last_error && !cloud
        ? (
          <p class="form-error" data-last-error>
            Last sync error ({connector.consecutive_errors} in a row): {connector.last_error}
          </p>
        )
        : null}
      {vendor
        ? (
          <VendorFacts
            connector={connector}
            providers={providers.data ?? []}
            credentials={credentials.data ?? []}
            projectId={projectId}
          />
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
      {vendor
        ? (
          <VendorRows
            projectId={projectId}
            connector={connector}
            refreshMs={syncAwaited(connector) ? PENDING_REFRESH_MS : REFRESH_MS}
            onCount={(total) => {
              // Rows read after the connector: read it again, so its count and state agree.
              if (total !== connector.proxy_count) loaded.reload();
            }}
          />
        )
        : null}
      {connector.kind === PROVIDER_API ? <PoolPanel path={path} canEdit={session.canEdit} /> : null}
      {cloud
        ? (
          <CloudInstancesPanel
            path={path}
            connector={connector}
            credentials={credentials.data ?? []}
            projectId={projectId}
            onChange={loaded.reload}
            refreshMs={REFRESH_MS}
            movingRefreshMs={PENDING_REFRESH_MS}
          />
        )
        : null}
      <ConnectorForm
        key={connector.id}
        projectId={projectId}
        connector={connector}
        others={all.data ?? []}
        credentials={credentials.data ?? []}
        providers={providers.data ?? []}
        readOnly={!session.canEdit || connector.pending_deletion}
        onSubmit={save}
        submitLabel="Save changes"
        lockedNote={connector.pending_deletion
          ? "Being deleted: it cannot be changed any more."
          : undefined}
      />
      {session.canEdit
        ? (
          <DeleteConnector
            projectId={projectId}
            connector={connector}
            onPending={loaded.reload}
          />
        )
        : null}
    </section>
  );
}

/** A vendor connector at a glance: provider, credential, proxy type, mode, sync state. */
function VendorFacts(
  { connector, providers, credentials, projectId }: {
    connector: Connector;
    providers: readonly ProviderRecord[];
    credentials: readonly Credential[];
    projectId: string;
  },
) {
  const provider = providers.find((p) => p.id === connector.provider);
  const type = typeOf(provider, connector.config);
  const credential = credentials.find((c) => c.id === connector.credential_id);
  return (
    <dl class="card facts" aria-label="Vendor connector">
      <div>
        <dt>Provider</dt>
        <dd data-fact="provider">
          <a href={`/providers#${connector.provider}`}>{provider?.name ?? connector.provider}</a>
          {provider ? null : (
            <span class="badge danger">
              descriptor gone: left out of the feed until it is stored again
            </span>
          )}
        </dd>
      </div>
      <div>
        <dt>Proxy type</dt>
        <dd data-fact="proxy_type">
          {type?.name ?? String(connector.config?.proxy_type ?? "–")}
          {type?.host
            ? <code class="muted">{` ${type.host}${type.port ? `:${type.port}` : ""}`}</code>
            : null}
        </dd>
      </div>
      <div>
        <dt>Mode</dt>
        <dd data-fact="mode">{connectorMode(connector, type)}</dd>
      </div>
      <div>
        <dt>Credential</dt>
        <dd data-fact="credential">
          {credential
            ? (
              <a href={`/projects/${projectId}/credentials/${credential.id}`}>
                {credential.name}
              </a>
            )
            : <span class="muted">none</span>}
        </dd>
      </div>
      <div>
        <dt>Sync</dt>
        <dd data-fact="sync">
          {connector.last_error
            ? (
              <span class="badge danger" title={connector.last_error}>
                {connector.consecutive_errors} consecutive{" "}
                {connector.consecutive_errors === 1 ? "error" : "errors"}
              </span>
            )
            : firstSyncAwaited(connector)
            ? <span class="muted">waiting for the first sync…</span>
            : connector.enabled
            ? <span class="badge ok">no errors</span>
            : <span class="muted">disabled: not synced</span>}
        </dd>
      </div>
    </dl>
  );
}

/** What a vendor row is: its dynamic rendering, vendor session, port or listed exit. */
function rowKind(proxy: Proxy): string {
  const meta = proxy.metadata ?? {};
  if (meta.dynamic === true) return "dynamic: rendered per request";
  if (typeof meta.session_id === "string") {
    return `session ${meta.session_id}${typeof meta.group === "string" ? ` (${meta.group})` : ""}`;
  }
  if (typeof meta.exit === "string") return `exit ${meta.exit}`;
  if (typeof meta.index === "number") return `slot ${meta.index + 1}`;
  return "–";
}

/** The rows a vendor connector's sync keeps, as the proxies API lists them. */
function VendorRows(
  { projectId, connector, refreshMs, onCount }: {
    projectId: string;
    connector: Connector;
    refreshMs: number;
    /** Hears how many rows the list answered. */
    onCount: (total: number) => void;
  },
) {
  const rows = useApi<Page<Proxy>>(`/projects/${projectId}/proxies`, {
    connector_id: connector.id,
    page_size: ROWS_SHOWN,
  }, refreshMs);
  // A new connector answer (its count, an edit) reads the rows again.
  const { reload } = rows;
  useEffect(() => reload(), [connector.proxy_count, connector.updated_at, reload]);
  useEffect(() => {
    if (rows.data) onCount(rows.data.total);
  }, [rows.data]);
  const items = rows.data?.items ?? [];
  const total = rows.data?.total ?? 0;
  return (
    <section class="card vendor-rows" aria-label="Rows">
      <header class="toolbar">
        <h3>Rows</h3>
        <a href={`/projects/${projectId}/proxies?connector=${connector.id}`}>
          {total > ROWS_SHOWN
            ? `All ${formatCount(total)} on the Proxies tab`
            : "On the Proxies tab"}
        </a>
      </header>
      <ErrorNote error={rows.error} />
      {items.length > 0
        ? (
          <table class="data" aria-label="Connector rows">
            <thead>
              <tr>
                <th>Address</th>
                <th>Row</th>
                <th>Country</th>
                <th>Status</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              {items.map((proxy) => (
                <tr key={proxy.id} data-proxy={proxy.id}>
                  <td>
                    <code>{proxy.url}</code>
                  </td>
                  <td>{rowKind(proxy)}</td>
                  <td>{proxy.country ?? "any"}</td>
                  <td>
                    <span class="badge status" data-status={proxy.status}>{proxy.status}</span>
                  </td>
                  <td>
                    <Time value={proxy.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )
        : (
          <p class="muted">
            {rows.data
              ? firstSyncAwaited(connector)
                ? "No rows yet: the sync makes them in a moment."
                : "No rows: the sync makes them from the configuration and the vendor."
              : "Loading…"}
          </p>
        )}
    </section>
  );
}

function DeleteConnector(
  { projectId, connector, onPending }: {
    projectId: string;
    connector: Connector;
    /** A cloud connector's deletion was taken: it is pending until its instances are gone. */
    onPending: () => void;
  },
) {
  const path = `/projects/${projectId}/connectors/${connector.id}`;
  const cloud = connector.kind === CLOUD_KIND;
  const [asked, setAsked] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  if (cloud && connector.pending_deletion) {
    // Deleting again asks the scale job again (a run that failed, a cloud that was away).
    const again = async () => {
      setError(undefined);
      setAsked(false);
      try {
        await api("DELETE", path);
        setAsked(true);
        onPending();
      } catch (failure) {
        setError(failure as ApiError);
      }
    };
    return (
      <section class="card danger-zone" aria-label="Delete connector">
        <h3>Being deleted</h3>
        <p>
          Its instances are terminating; the connector goes once the scale job finds none left. If
          it seems stuck (see the last error above), ask the scale job again.
        </p>
        <ErrorNote error={error} />
        <button type="button" class="secondary" onClick={again}>Ask again</button>
        {asked ? <span class="saved" role="status">Asked again</span> : null}
      </section>
    );
  }
  return (
    <TypedDelete
      what="connector"
      name={connector.name}
      path={path}
      then={`/projects/${projectId}/connectors`}
      onDeleted={cloud ? onPending : undefined}
    >
      {connector.kind === PROVIDER_API
        ? "Its pool is purged with it by the next pool run."
        : cloud
        ? `Its ${connector.proxy_count} ${
          connector.proxy_count === 1 ? "instance is" : "instances are"
        } terminated first: it is disabled at once, the scale job terminates its instances, ` +
          "and the connector goes once none is left."
        : `Its ${connector.proxy_count} ${
          connector.proxy_count === 1 ? "proxy goes" : "proxies go"
        } with it.`}
    </TypedDelete>
  );
}

/**
 * A provider_api connector's activity pool, read every few seconds: its entries by state, the
 * live ones against the pool's sizes and the gateway reserve, the fetch bookkeeping of the pool
 * generation and whether the connector ran dry. Redis away (503) is a notice; the rest of the
 * page stays. Editors can ask a refill now.
 */
function PoolPanel({ path, canEdit }: { path: string; canEdit: boolean }) {
  const pool = useApi<PoolView>(`${path}/pool`, undefined, POOL_REFRESH_MS);
  const [asked, setAsked] = useState(false);
  const [runError, setRunError] = useState<ApiError | undefined>();
  const refill = async () => {
    setRunError(undefined);
    setAsked(false);
    try {
      await api("POST", `${path}/pool/run`);
      setAsked(true);
      pool.reload();
    } catch (failure) {
      setRunError(failure as ApiError);
    }
  };
  const view = pool.data;
  const sizes = view?.pool;
  const fetch = view?.fetch;
  const count = (name: string, value: number | string, hint?: string) => (
    <div>
      <dt>{name}</dt>
      <dd data-pool={name.toLowerCase().replace(/[^a-z0-9]+/g, "_")} title={hint}>{value}</dd>
    </div>
  );
  return (
    <section class="card pool-panel" aria-label="Pool">
      <header class="toolbar">
        <h3>Pool</h3>
        {canEdit
          ? (
            <button type="button" class="secondary" onClick={refill}>
              Refill now
            </button>
          )
          : null}
        {asked ? <span class="saved" role="status">Pool run asked</span> : null}
      </header>
      <ErrorNote error={runError} />
      {pool.error
        ? (
          <p class={pool.error.status === 503 ? "notice warning-text" : "form-error"} role="alert">
            {pool.error.status === 503
              ? `The pool cannot be read now (Redis does not answer): ${pool.error.message}`
              : pool.error.message}
          </p>
        )
        : null}
      {view
        ? (
          <>
            <dl class="facts" aria-label="Entries by state">
              {count("Checking", view.counts.checking, "Fetched, waiting for their check")}
              {count("Routed", view.counts.routed, "Available, in the feed")}
              {count("Stock", view.counts.stock, "Available, for extraction only")}
              {count(
                "Suspect",
                view.counts.suspect,
                "Failed a check, or gateways could not reach them: out of the feed until a check passes",
              )}
              {count("Draining", view.counts.draining, "Past usable-until, until their expiry")}
              {count("Extracted", view.counts.extracted, "Handed out under a lease")}
            </dl>
            <p data-pool-live>
              <strong>{formatCount(view.live)}</strong> live{sizes
                ? (
                  <>
                    {" "}against min {sizes.min_size}, target {sizes.target_size}, max{" "}
                    {sizes.max_size}; reserved for gateways: {sizes.reserve_for_gateway === null
                      ? "all (nothing extractable)"
                      : sizes.reserve_for_gateway}
                  </>
                )
                : null}
            </p>
            {fetch
              ? (
                <dl class="facts" aria-label="Fetches">
                  {count("Success", fetch.success)}
                  {count("Empty", fetch.empty)}
                  {count("Duplicate only", fetch.duplicate_only)}
                  {count("Error", fetch.error)}
                  {count("429s", fetch.rate_limited)}
                  {count("Empty streak", fetch.empty_streak)}
                  {count("Error streak", fetch.error_streak)}
                  <div>
                    <dt>Back-off until</dt>
                    <dd data-pool="backoff_until">
                      {fetch.backoff_until ? <Time value={fetch.backoff_until} /> : "–"}
                    </dd>
                  </div>
                  {count("In flight", fetch.in_flight, "Calls to the provider now")}
                  {count(
                    "Ledger",
                    `${formatCount(fetch.ledger_used)} used, ${
                      formatCount(fetch.ledger_pending)
                    } pending of ${
                      fetch.max_total === null ? "no cap" : formatCount(fetch.max_total)
                    }`,
                    "Proxies fetched in this pool generation against fetch.max_total",
                  )}
                </dl>
              )
              : null}
            <p class="muted" data-pool-depleted>
              {view.depleted_at
                ? (
                  <span class="badge danger">
                    depleted since <Time value={view.depleted_at} />
                  </span>
                )
                : "Not depleted."} Generation {view.generation ?? "none yet"}.
            </p>
          </>
        )
        : pool.error
        ? null
        : <p class="muted">Loading…</p>}
    </section>
  );
}
