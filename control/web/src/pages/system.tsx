/**
 * The system, for admins: every live process by role with its heartbeat's age (counted on in
 * the browser between reads), its loops with failure streaks marked, the controller leading, the
 * routing feed's head against each gateway, the cloud instances per cloud and status (from the
 * leading controller's feed builder, as its last compile counted them: what /metrics answers
 * as octoprox_cloud_instances), the work streams' backlog, the provider-API pools running on
 * last-known settings while Postgres is away, the IP databases with their versions and
 * ages (system-geo.tsx), the TLS interception CA with its end (system-tls-ca.tsx), and the
 * storage figures with their trends. Read from GET /system/stats
 * every 5 s and its history every minute; another role gets the API's 403 in words.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import type { SystemHistory } from "../../../api/answers/metrics.ts";
import type {
  FeedGatewayStatus,
  ListedProcess,
  LoopStats,
  SystemStats,
  WorkStreamStatus,
} from "../../../api/answers/system.ts";
import { Chart } from "../ui/chart.tsx";
import { formatBytes, formatCount } from "../ui/format.ts";
import { Select } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";
import { cloudName } from "../ui/clouds.ts";
import { PROXY_STATUSES } from "../../../../shared/roles.ts";
import { formatAge } from "../../../core/format-age.ts";
import { IpDatabases } from "./system-geo.tsx";
import { TlsCa } from "./system-tls-ca.tsx";

const STATS_REFRESH_MS = 5_000;
const HISTORY_REFRESH_MS = 60_000;
const RANGES = [
  ["1h", "1 hour"],
  ["24h", "24 hours"],
  ["7d", "7 days"],
  ["30d", "30 days"],
  ["90d", "90 days"],
] as const;

/** Now, once a second: what the ages count on from. */
function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}

export function System() {
  const stats = useApi<SystemStats>("/system/stats", undefined, STATS_REFRESH_MS);
  const now = useNow();
  // When the answer landed, on this browser's clock: ages count on from there.
  const receivedAt = useMemo(() => Date.now(), [stats.data]);
  const since = Math.max(0, now - receivedAt);
  const age = (ms: number | null) => (ms === null ? null : ms + since);

  if (stats.error?.status === 403) {
    return (
      <section class="admins-only">
        <h2>System</h2>
        <p role="alert">
          <strong>Admins only.</strong> {stats.error.message}
        </p>
      </section>
    );
  }
  const data = stats.data;
  return (
    <section class="system">
      <header class="toolbar">
        <h2>System</h2>
        <span class="muted">
          {data
            ? (
              <>
                Read <Time value={data.read_at} />, every 5 s
              </>
            )
            : "Loading…"}
        </span>
      </header>
      <ErrorNote error={stats.error} />
      {data
        ? (
          <>
            <Leader stats={data} />
            <Processes stats={data} age={age} />
            <Feed stats={data} age={age} />
            <CloudInstances stats={data} />
            <WorkStreams section={data.work_streams} />
            <PoolSettings section={data.pool_settings} />
            <IpDatabases />
            <TlsCa />
          </>
        )
        : null}
      <Storage />
    </section>
  );
}

function SectionError({ error }: { error: string | null }) {
  return error ? <div class="form-error" role="alert">Redis did not answer: {error}</div> : null;
}

/** The lease holder is `<instance>:<token>`: the process is the part before the colon. */
function leaderInstance(stats: SystemStats): string | null {
  const holder = stats.leader.data?.instance;
  if (!holder) return null;
  const all = Object.values(stats.processes.data?.by_role ?? {}).flat();
  return all.find((p) => holder === p.instance || holder.startsWith(`${p.instance}:`))
    ?.instance ?? holder;
}

function Leader({ stats }: { stats: SystemStats }) {
  const leader = stats.leader.data;
  return (
    <section aria-label="Leader">
      <h3>Controller leading</h3>
      <SectionError error={stats.leader.error} />
      {stats.leader.error ? null : leader
        ? (
          <p class="leader">
            <code data-leader>{leaderInstance(stats)}</code>{" "}
            <span class="muted">(lease renews within {formatAge(leader.lease_ttl_ms)})</span>
          </p>
        )
        : (
          <p class="warning-text">
            No controller holds the lease: nothing compiles the feed or produces jobs.
          </p>
        )}
    </section>
  );
}

function Processes(
  { stats, age }: { stats: SystemStats; age: (ms: number | null) => number | null },
) {
  const section = stats.processes;
  const leader = leaderInstance(stats);
  const roles = Object.entries(section.data?.by_role ?? {}).sort((a, b) =>
    a[0].localeCompare(b[0])
  );
  return (
    <section aria-label="Processes">
      <h3>
        Processes <span class="muted">({formatCount(section.data?.total)} live)</span>
      </h3>
      <SectionError error={section.error} />
      <table class="data" aria-label="Processes">
        <thead>
          <tr>
            <th>Instance</th>
            <th>Role</th>
            <th>Version</th>
            <th>Started</th>
            <th>Heartbeat</th>
            <th>Ready</th>
            <th>Stores</th>
          </tr>
        </thead>
        <tbody>
          {roles.flatMap(([role, processes]) =>
            processes.map((process) => (
              <tr key={process.instance} data-instance={process.instance}>
                <td>
                  <code>{process.instance}</code>
                  {process.instance === leader ? <span class="badge ok">leader</span> : null}
                </td>
                <td>{role}</td>
                <td>{process.version ?? "–"}</td>
                <td>
                  <Time value={process.started_at} />
                </td>
                <td class="heartbeat" data-heartbeat>
                  {formatAge(age(process.heartbeat_age_ms))} ago
                </td>
                <td>{readyOf(process)}</td>
                <td>{storesOf(process)}</td>
              </tr>
            ))
          )}
        </tbody>
      </table>
      {roles.flatMap(([, processes]) => processes).map((process) => (
        <Loops key={process.instance} process={process} />
      ))}
    </section>
  );
}

function readyOf(process: ListedProcess) {
  const snapshot = process.snapshot;
  if (!snapshot || typeof snapshot.ready !== "boolean") return "–";
  if (snapshot.ready) return <span class="ok-text">ready</span>;
  const reasons = Array.isArray(snapshot.reasons) ? snapshot.reasons.join(", ") : "";
  return <span class="warning-text">not ready{reasons ? `: ${reasons}` : ""}</span>;
}

function storesOf(process: ListedProcess) {
  const stores = process.snapshot?.stores as
    | Record<string, { ok: boolean; error: string | null }>
    | undefined;
  if (!stores) return "–";
  return Object.entries(stores).map(([name, store]) => (
    <span
      key={name}
      class={`badge ${store.ok ? "ok" : "danger"}`}
      title={store.error ?? undefined}
    >
      {name} {store.ok ? "ok" : "down"}
    </span>
  ));
}

interface LoopRow {
  name: string;
  owner: string;
  state: string;
  runs: number | null;
  failures: number;
  streak: number;
  lastRunAt: string | null;
  lastError: string | null;
}

/** A control process's loops; a gateway's feed follower and each isolate's senders. */
function loopRows(process: ListedProcess): LoopRow[] {
  const snapshot = process.snapshot ?? {};
  if (Array.isArray(snapshot.loops)) {
    return (snapshot.loops as LoopStats[]).map((loop) => ({
      name: loop.name,
      owner: loop.owner ?? "",
      state: loop.state,
      runs: loop.runs,
      failures: loop.failures,
      streak: loop.consecutive_failures,
      lastRunAt: loop.last_run_at,
      lastError: loop.last_error,
    }));
  }
  const rows: LoopRow[] = [];
  const counter = (name: string, owner: string, value: unknown, runs: string) => {
    const v = value as Record<string, unknown> | undefined;
    if (!v || typeof v !== "object") return;
    rows.push({
      name,
      owner,
      state: "",
      runs: typeof v[runs] === "number" ? v[runs] as number : null,
      failures: Number(v.failures ?? 0),
      streak: Number(v.consecutive_failures ?? 0),
      lastRunAt: typeof v.applied_at === "string" ? v.applied_at : null,
      lastError: typeof v.last_error === "string" ? v.last_error : null,
    });
  };
  counter("feed", "gateway", snapshot.feed, "applies");
  if (Array.isArray(snapshot.isolates)) {
    for (const isolate of snapshot.isolates as Record<string, unknown>[]) {
      const owner = `isolate ${isolate.isolate}`;
      counter("metering", owner, isolate.metering, "sends");
      counter("failure_log", owner, isolate.failure_log, "sends");
    }
  }
  return rows;
}

function Loops({ process }: { process: ListedProcess }) {
  const rows = loopRows(process);
  if (rows.length === 0) return null;
  const failing = rows.filter((row) => row.streak > 0).length;
  const gateway = process.role === "gateway";
  const snapshot = process.snapshot ?? {};
  return (
    <details class="loops" open={failing > 0}>
      <summary>
        <code>{process.instance}</code>: {rows.length} loops
        {failing > 0
          ? <span class="badge danger">{failing} failing</span>
          : <span class="badge ok">no failure streak</span>}
        {gateway
          ? (
            <span class="muted">
              {" "}
              · {formatCount(snapshot.connections_open as number)} connections,{" "}
              {formatCount(snapshot.tunnels_open as number)} tunnels,{" "}
              {formatCount(snapshot.isolates_configured as number)} isolates
            </span>
          )
          : null}
      </summary>
      <table class="data" aria-label={`Loops of ${process.instance}`}>
        <thead>
          <tr>
            <th>Loop</th>
            <th>Part</th>
            <th>State</th>
            <th>Runs</th>
            <th>Failures</th>
            <th>Failing in a row</th>
            <th>Last run</th>
            <th>Last error</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr
              key={`${row.owner}/${row.name}`}
              class={row.streak > 0 || row.state === "failed" ? "failing" : undefined}
            >
              <td>{row.name.replaceAll("_", " ")}</td>
              <td>{row.owner}</td>
              <td>{row.state || "–"}</td>
              <td>{formatCount(row.runs)}</td>
              <td>{formatCount(row.failures)}</td>
              <td>{row.streak > 0 ? <strong>{row.streak}</strong> : "0"}</td>
              <td>
                <Time value={row.lastRunAt} />
              </td>
              <td class="message">{row.lastError ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}

function Feed(
  { stats, age }: { stats: SystemStats; age: (ms: number | null) => number | null },
) {
  const feed = stats.feed;
  const head = feed.data?.head;
  const gateways = stats.processes.data?.by_role.gateway ?? [];
  /** How far behind the head a gateway's applied feed was compiled. */
  const behindBy = (gateway: FeedGatewayStatus): string => {
    const listed = gateways.find((g) => g.instance === gateway.instance);
    const applied = (listed?.snapshot?.feed as { compiled_at?: string } | undefined)?.compiled_at;
    if (!head || !applied) return "";
    return formatAge(Date.parse(head.compiled_at) - Date.parse(applied));
  };
  return (
    <section aria-label="Routing feed">
      <h3>Routing feed</h3>
      <SectionError error={feed.error} />
      {feed.data
        ? (
          <>
            <p>
              {head
                ? (
                  <>
                    Head <code title={head.digest}>{head.digest.slice(0, 12)}</code>, compiled{" "}
                    <Time value={head.compiled_at} />.{" "}
                  </>
                )
                : "No feed head in Redis yet. "}
              {feed.data.behind === 0
                ? <span class="ok-text">Every gateway has applied it.</span>
                : <span class="warning-text">{feed.data.behind} behind.</span>}
            </p>
            <table class="data" aria-label="Gateways against the feed">
              <thead>
                <tr>
                  <th>Gateway</th>
                  <th>Feed</th>
                  <th>Applied</th>
                  <th>Applied ago</th>
                  <th>Heartbeat</th>
                </tr>
              </thead>
              <tbody>
                {feed.data.gateways.map((gateway) => (
                  <tr key={gateway.instance} data-instance={gateway.instance}>
                    <td>
                      <code>{gateway.instance}</code>
                    </td>
                    <td>
                      {gateway.current
                        ? <span class="badge ok">current</span>
                        : (
                          <span class="badge warning">
                            behind{behindBy(gateway) ? ` by ${behindBy(gateway)}` : ""}
                          </span>
                        )}
                    </td>
                    <td>
                      <code title={gateway.applied_digest ?? undefined}>
                        {gateway.applied_digest?.slice(0, 12) ?? "none yet"}
                      </code>
                    </td>
                    <td>{formatAge(age(gateway.apply_age_ms))}</td>
                    <td>{formatAge(age(gateway.heartbeat_age_ms))} ago</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {feed.data.gateways.length === 0 ? <p class="muted">No gateway is running.</p> : null}
          </>
        )
        : null}
    </section>
  );
}

/**
 * The leading controller's feed builder's count of cloud instances, by cloud then status; null
 * before its first compile, undefined when no leader reports one.
 */
function cloudCounts(
  stats: SystemStats,
): Record<string, Record<string, number>> | null | undefined {
  const leader = leaderInstance(stats);
  if (leader === null) return undefined;
  const process = Object.values(stats.processes.data?.by_role ?? {}).flat()
    .find((p) => p.instance === leader);
  const loops = process?.snapshot?.loops;
  if (!Array.isArray(loops)) return undefined;
  const builder = (loops as Record<string, unknown>[]).find((loop) =>
    loop.name === "feed_builder" && "cloud_instances" in loop
  );
  if (builder === undefined) return undefined;
  const counts = builder.cloud_instances;
  return counts !== null && typeof counts === "object"
    ? counts as Record<string, Record<string, number>>
    : null;
}

function CloudInstances({ stats }: { stats: SystemStats }) {
  const counts = cloudCounts(stats);
  const clouds = Object.entries(counts ?? {}).sort((a, b) => a[0].localeCompare(b[0]));
  // Statuses any cloud has, in their usual order, then any other.
  const seen = new Set(clouds.flatMap(([, byStatus]) => Object.keys(byStatus)));
  const statuses = [
    ...PROXY_STATUSES.filter((status) => seen.has(status)),
    ...[...seen].filter((status) => !(PROXY_STATUSES as readonly string[]).includes(status)),
  ];
  return (
    <section aria-label="Cloud instances">
      <h3>Cloud instances</h3>
      {counts === undefined
        ? (
          <p class="muted">
            No leading controller reports them yet (they come from its feed builder).
          </p>
        )
        : counts === null
        ? <p class="muted">Not counted yet: the feed has not been compiled.</p>
        : clouds.length === 0
        ? <p class="muted" data-no-clouds>No cloud connector.</p>
        : (
          <table class="data" aria-label="Cloud instances by status">
            <thead>
              <tr>
                <th>Cloud</th>
                <th>Instances</th>
                {statuses.map((status) => <th key={status}>{status}</th>)}
              </tr>
            </thead>
            <tbody>
              {clouds.map(([cloud, byStatus]) => (
                <tr key={cloud} data-cloud={cloud}>
                  <td>{cloudName(cloud)}</td>
                  <td data-total>
                    {formatCount(Object.values(byStatus).reduce((sum, n) => sum + n, 0))}
                  </td>
                  {statuses.map((status) => (
                    <td key={status} data-status={status}>{formatCount(byStatus[status] ?? 0)}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </section>
  );
}

function WorkStreams({ section }: { section: SystemStats["work_streams"] }) {
  const streams = Object.entries(section.data ?? {}) as [string, WorkStreamStatus][];
  return (
    <section aria-label="Work streams">
      <h3>Work streams</h3>
      <SectionError error={section.error} />
      <table class="data" aria-label="Work streams">
        <thead>
          <tr>
            <th>Stream</th>
            <th>Backlog</th>
            <th>Being handled</th>
            <th>Length</th>
            <th>Consumers</th>
            <th>Oldest entry</th>
          </tr>
        </thead>
        <tbody>
          {streams.map(([name, stream]) => (
            <tr key={name} class={stream.backlog > 0 ? "backlog" : undefined}>
              <td>
                <code>{name}</code>
                {stream.groupMissing ? <span class="badge muted">not used yet</span> : null}
              </td>
              <td>{formatCount(stream.backlog)}</td>
              <td>{formatCount(stream.pending)}</td>
              <td>{formatCount(stream.length)}</td>
              <td>{formatCount(stream.consumers)}</td>
              <td>{stream.oldestAgeMs === null ? "–" : formatAge(stream.oldestAgeMs)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** Pools whose runs go on with last-known settings: Postgres is away from their workers. */
function PoolSettings({ section }: { section: SystemStats["pool_settings"] }) {
  const data = section.data;
  return (
    <section aria-label="Provider-API pools">
      <h3>Provider-API pools</h3>
      <SectionError error={section.error} />
      {data
        ? (
          <p data-pools-on-last-known={data.on_last_known}>
            {data.on_last_known === 0
              ? <span class="ok-text">No pool runs on last-known settings.</span>
              : (
                <span class="warning-text">
                  {formatCount(data.on_last_known)}{" "}
                  {data.on_last_known === 1 ? "pool runs" : "pools run"}{" "}
                  on their connectors' last-known settings: reaped, checked and refilled, but no
                  edit reaches them until Postgres answers.
                </span>
              )} {data.workers_without_postgres > 0
              ? (
                <span class="muted">
                  {formatCount(data.workers_without_postgres)}{" "}
                  {data.workers_without_postgres === 1 ? "worker finds" : "workers find"}{" "}
                  Postgres away.
                </span>
              )
              : null}
          </p>
        )
        : null}
      {data && data.connector_ids.length > 0
        ? (
          <ul class="pools-on-last-known" aria-label="Pools on last-known settings">
            {data.connector_ids.map((id) => (
              <li key={id}>
                <code>{id}</code>
              </li>
            ))}
          </ul>
        )
        : null}
    </section>
  );
}

const STATUS_COLOURS: Record<string, string> = {
  healthy: "#16a34a",
  degraded: "#f59e0b",
  unhealthy: "#ef4444",
  initializing: "#3b82f6",
  disabled: "#6b7280",
};
const SPARE_COLOURS = ["#8b5cf6", "#14b8a6", "#ec4899", "#84cc16"];

function Storage() {
  const [range, setRange] = useState("24h");
  const history = useApi<SystemHistory>("/system/stats/history", { range }, HISTORY_REFRESH_MS);
  const points = history.data?.points ?? [];
  const latest = points.at(-1);
  const charts = useMemo(() => {
    if (!history.data) return undefined;
    const pts = history.data.points;
    const times = pts.map((p) => Date.parse(p.t) / 1000);
    const statuses = [...new Set(pts.flatMap((p) => Object.keys(p.proxies_by_status)))];
    return {
      times,
      database: [{
        label: "database",
        stroke: "#3b82f6",
        values: pts.map((p) => p.database_bytes),
      }],
      redis: [{
        label: "Redis memory",
        stroke: "#ef4444",
        values: pts.map((p) => p.redis_used_memory_bytes),
      }],
      keys: [{ label: "Redis keys", stroke: "#8b5cf6", values: pts.map((p) => p.redis_keys) }],
      entities: [
        { label: "projects", stroke: "#f59e0b", values: pts.map((p) => p.projects) },
        { label: "connectors", stroke: "#14b8a6", values: pts.map((p) => p.connectors) },
      ],
      proxies: statuses.map((status, i) => ({
        label: status,
        stroke: STATUS_COLOURS[status] ?? SPARE_COLOURS[i % SPARE_COLOURS.length],
        values: pts.map((p) => p.proxies_by_status[status] ?? 0),
      })),
    };
  }, [history.data]);
  return (
    <section aria-label="Storage">
      <header class="toolbar">
        <h3>Storage and trends</h3>
        <label>
          Range <Select name="range" value={range} onChange={setRange} options={RANGES} />
        </label>
      </header>
      <ErrorNote error={history.error?.status === 403 ? undefined : history.error} />
      <p class="muted">
        From the snapshot job's readings (every OCTOPROX_SYSTEM_METRICS_INTERVAL, 5 minutes by
        default), averaged per {bucketLabel(history.data?.bucket_seconds)}.
      </p>
      {latest
        ? (
          <div class="tiles" aria-label="Storage figures">
            <Figure label="Database" value={formatBytes(latest.database_bytes)} />
            <Figure label="Redis memory" value={formatBytes(latest.redis_used_memory_bytes)} />
            <Figure label="Redis keys" value={formatCount(latest.redis_keys)} />
            <Figure label="Projects" value={formatCount(latest.projects, 1)} />
            <Figure label="Connectors" value={formatCount(latest.connectors, 1)} />
            {Object.entries(latest.proxies_by_status).map(([status, count]) => (
              <Figure key={status} label={`Proxies ${status}`} value={formatCount(count, 1)} />
            ))}
          </div>
        )
        : history.data
        ? <p class="muted">No reading in this range yet.</p>
        : null}
      {points.length === 1
        ? <p class="muted">One reading so far: the trends draw from the second.</p>
        : null}
      {charts && points.length > 1
        ? (
          <div class="charts">
            <Chart
              title="Database size"
              times={charts.times}
              series={charts.database}
              format={formatBytes}
            />
            <Chart
              title="Redis memory"
              times={charts.times}
              series={charts.redis}
              format={formatBytes}
            />
            <Chart
              title="Redis keys"
              times={charts.times}
              series={charts.keys}
              format={(v) => formatCount(v)}
            />
            <Chart
              title="Projects and connectors"
              times={charts.times}
              series={charts.entities}
              format={(v) => formatCount(v, 1)}
            />
            <Chart
              title="Proxies by status"
              times={charts.times}
              series={charts.proxies}
              format={(v) => formatCount(v, 1)}
            />
          </div>
        )
        : null}
    </section>
  );
}

function bucketLabel(seconds: number | undefined): string {
  if (!seconds) return "bucket";
  if (seconds % 86_400 === 0) return seconds === 86_400 ? "day" : `${seconds / 86_400} days`;
  if (seconds % 3600 === 0) return seconds === 3600 ? "hour" : `${seconds / 3600} hours`;
  return `${Math.round(seconds / 60)} minutes`;
}

function Figure({ label, value }: { label: string; value: string }) {
  return (
    <div class="tile" data-tile={label}>
      <span class="tile-value">{value}</span>
      <span class="tile-label">{label}</span>
    </div>
  );
}
