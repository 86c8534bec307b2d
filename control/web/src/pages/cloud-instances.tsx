/**
 * A cloud connector's instances on its page (GET …/instances): its cloud and credential, how
 * many run against the scale run's target and why it held (in words), the demand, the last
 * listing, run and step, the last cloud error with the back-off it causes, the instances being
 * created, and each instance (name, status, address, age, next rotation). Read on the page's
 * cadence, faster while something moves (a first run awaited, instances being created or
 * checked, draining or terminating, a deletion under way).
 */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import type * as v from "valibot";
import type { CloudInstancesAnswer, Connector } from "../../../api/answers/connectors.ts";
import type { Credential } from "../../../api/answers/credentials.ts";
import { cloudName, formatInstanceAge, holdText } from "../ui/clouds.ts";
import { formatCount } from "../ui/format.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

export type CloudInstances = v.InferOutput<typeof CloudInstancesAnswer>;

/** Statuses an instance leaves on its own: its page is read faster while one is there. */
const MOVING = new Set(["initializing", "draining", "terminating"]);

/** Whether the pool is on its way somewhere. */
function moving(view: CloudInstances | undefined, connector: Connector): boolean {
  if (connector.pending_deletion) return true;
  if (view === undefined) return false;
  if (view.last_run_at === null && view.enabled) return true;
  if (view.creating.length > 0) return true;
  if (view.instances.some((instance) => MOVING.has(instance.status))) return true;
  return view.target !== null && activeCount(view) !== view.target;
}

/** Instances that count as the pool's: neither draining nor terminating. */
function activeCount(view: CloudInstances): number {
  return view.instances.filter((i) => i.status !== "draining" && i.status !== "terminating")
    .length;
}

export function CloudInstancesPanel(
  { path, connector, credentials, projectId, onChange, refreshMs, movingRefreshMs }: {
    path: string;
    connector: Connector;
    credentials: readonly Credential[];
    projectId: string;
    /** The rows changed: the connector is read again (its count, its error). */
    onChange: () => void;
    /** The page's cadence, and the faster one while the pool moves. */
    refreshMs: number;
    movingRefreshMs: number;
  },
) {
  const [every, setEvery] = useState(refreshMs);
  const loaded = useApi<CloudInstances>(`${path}/instances`, undefined, every);
  const current = loaded.data;
  useEffect(() => setEvery(moving(current, connector) ? movingRefreshMs : refreshMs), [
    current,
    connector.pending_deletion,
  ]);
  const count = current?.instances.length;
  useEffect(() => {
    if (count !== undefined && count !== connector.proxy_count) onChange();
  }, [count]);
  const { reload } = loaded;
  // A save (a new config, enabled or not) reads the instances again.
  useEffect(() => reload(), [connector.updated_at, connector.pending_deletion, reload]);

  const credential = credentials.find((c) => c.id === connector.credential_id);
  const error = loaded.error;
  return (
    <section class="card cloud-panel" aria-label="Instances">
      <header class="toolbar">
        <h3>Instances</h3>
        <span class="muted">
          on {cloudName(connector.provider)} with {credential
            ? (
              <a href={`/projects/${projectId}/credentials/${credential.id}`}>
                {credential.name}
              </a>
            )
            : "no credential"}
        </span>
      </header>
      {connector.pending_deletion
        ? (
          <p class="warning-text" role="status" data-pending-deletion>
            Being deleted: its instances are terminating, and the connector goes once none is left.
          </p>
        )
        : !connector.enabled
        ? (
          <p class="muted" data-disabled>
            Disabled: its instances are drained and terminated; enabling it scales it up again.
          </p>
        )
        : null}
      {error && error.status !== 404 ? <ErrorNote error={error} /> : null}
      {current
        ? <Scaling view={current} />
        : error?.status === 404 && connector.pending_deletion
        ? <p class="muted" data-no-instances>No instance left: the connector goes in a moment.</p>
        : error
        ? null
        : <p class="muted">Loading…</p>}
      {current && current.creating.length > 0 ? <Creating view={current} /> : null}
      {current ? <InstanceTable view={current} /> : null}
    </section>
  );
}

function Scaling({ view }: { view: CloudInstances }) {
  const active = activeCount(view);
  const fact = (name: string, key: string, value: ComponentChildren) => (
    <div>
      <dt>{name}</dt>
      <dd data-cloud={key}>{value}</dd>
    </div>
  );
  return (
    <>
      <dl class="facts" aria-label="Scaling">
        {fact(
          "Running",
          "running",
          <>
            <strong>{formatCount(active)}</strong>{" "}
            <span class="muted">
              (min {view.min_proxies ?? "–"}, max {view.max_proxies ?? "–"})
            </span>
          </>,
        )}
        {fact(
          "Target",
          "target",
          view.target === null ? <span class="muted">no scale run yet</span> : view.target,
        )}
        {fact(
          "Holding",
          "hold",
          view.last_run_at === null
            ? <span class="muted">waiting for the first scale run…</span>
            : holdText(view.hold),
        )}
        {fact(
          "Demand",
          "demand",
          view.demand_per_minute === null
            ? "–"
            : `${view.demand_per_minute.toFixed(1)} requests a minute${
              view.demand_level ? ` (${view.demand_level})` : ""
            }`,
        )}
        {fact("Last run", "last_run", <Time value={view.last_run_at} />)}
        {fact("Last listing", "last_listing", <Time value={view.last_listing_at} />)}
        {fact("Last step", "last_step", <Time value={view.last_scaled_at} />)}
      </dl>
      {view.last_error
        ? (
          <p class="form-error" data-cloud-error>
            Last cloud error ({view.consecutive_errors} in a row): {view.last_error}
            {view.backoff_until
              ? (
                <>
                  {" "}Backing off: no call to the cloud until <Time value={view.backoff_until} />.
                </>
              )
              : null}
          </p>
        )
        : null}
    </>
  );
}

function Creating({ view }: { view: CloudInstances }) {
  return (
    <table class="data" aria-label="Instances being created">
      <thead>
        <tr>
          <th>Being created</th>
          <th>For</th>
          <th>Since</th>
        </tr>
      </thead>
      <tbody>
        {view.creating.map((entry) => (
          <tr key={entry.name} data-creating={entry.name}>
            <td>
              <code>{entry.name}</code>
              {entry.stale
                ? (
                  <span
                    class="badge warning"
                    title="Its creator stopped answering: the next listing settles it"
                  >
                    stale
                  </span>
                )
                : null}
            </td>
            <td>{entry.purpose}</td>
            <td>
              <Time value={entry.started_at} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function InstanceTable({ view }: { view: CloudInstances }) {
  if (view.instances.length === 0) {
    return (
      <p class="muted" data-no-instances>
        {view.pending_deletion
          ? "No instance left."
          : view.creating.length > 0
          ? "No instance yet: the first is being created."
          : "No instance."}
      </p>
    );
  }
  return (
    <table class="data" aria-label="Cloud instances">
      <thead>
        <tr>
          <th>Name</th>
          <th>Status</th>
          <th>Address</th>
          <th>Age</th>
          <th>Next rotation</th>
          <th>Instance</th>
        </tr>
      </thead>
      <tbody>
        {view.instances.map((instance) => (
          <tr key={instance.proxy_id} data-instance={instance.name ?? instance.proxy_id}>
            <td>
              <code>{instance.name ?? "–"}</code>
            </td>
            <td>
              <span class="badge status" data-status={instance.status}>{instance.status}</span>
              {instance.status === "draining" && instance.quiet_checks !== null
                ? (
                  <span class="muted" title="Checks in a row with its counters standing still">
                    {" "}
                    {instance.quiet_checks} quiet
                  </span>
                )
                : null}
            </td>
            <td>
              <code data-address>{instance.address}</code>
            </td>
            <td>{formatInstanceAge(instance.age_seconds)}</td>
            <td>
              {instance.rotates_at
                ? <Time value={instance.rotates_at} />
                : <span class="muted">not drawn yet</span>}
            </td>
            <td>
              <code class="muted">{instance.instance_id ?? "–"}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
