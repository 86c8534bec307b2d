/**
 * A project's usage over time: the project, one of its connectors or one of its proxies (the
 * most used ones offered), as charts; and its destination hosts, searched and paged on the
 * server, with up to 12 picked hosts charted side by side.
 */
import { useEffect, useMemo, useState } from "preact/hooks";
import type { Series } from "../../../api/answers/metrics.ts";
import { Chart } from "../ui/chart.tsx";
import { formatBytes, formatCount, formatPercent } from "../ui/format.ts";
import { Select } from "../ui/forms.tsx";
import { RANGES } from "../ui/ranges.ts";
import { ErrorNote } from "../ui/status.tsx";
import { UsageCharts } from "../ui/usage-charts.tsx";
import { useApi } from "../ui/use-api.ts";
import type { Usage as UsageCounts } from "../../../api/answers/common.ts";

interface Named {
  id: string;
  name: string;
}

interface ProxyRow {
  proxy_id: string;
  host: string;
  port: number;
  usage: UsageCounts;
}

interface HostRow extends UsageCounts {
  host: string;
}

const HOSTS_PAGE = 25;
const MAX_PICKED = 12;
const COLOURS = [
  "#3b82f6",
  "#ef4444",
  "#16a34a",
  "#f59e0b",
  "#8b5cf6",
  "#0ea5e9",
  "#db2777",
  "#65a30d",
  "#ea580c",
  "#7c3aed",
  "#0891b2",
  "#be123c",
];

export function Usage({ projectId }: { projectId: string }) {
  const base = `/projects/${projectId}`;
  const [range, setRange] = useState("24h");
  const [scope, setScope] = useState("project");
  const connectors = useApi<Named[]>(`${base}/connectors`);
  const proxies = useApi<{ items: ProxyRow[] }>(`${base}/metrics/proxies`, {
    order: "requests",
    page_size: 50,
  });
  const seriesPath = scope === "project"
    ? `${base}/metrics/history`
    : scope.startsWith("connector:")
    ? `${base}/connectors/${scope.slice(10)}/metrics/history`
    : `${base}/proxies/${scope.slice(6)}/metrics/history`;
  const series = useApi<Series>(seriesPath, { range });

  const scopes: [string, string][] = [
    ["project", "The whole project"],
    ...(connectors.data ?? []).map((c) =>
      [`connector:${c.id}`, `Connector ${c.name}`] as [
        string,
        string,
      ]
    ),
    ...(proxies.data?.items ?? []).map((p) =>
      [
        `proxy:${p.proxy_id}`,
        `Proxy ${p.host}:${p.port} (${formatCount(p.usage.requests)} requests)`,
      ] as [string, string]
    ),
  ];

  return (
    <section class="usage">
      <header class="toolbar">
        <h2>Usage</h2>
        <div class="row-inline">
          <label>
            Of <Select name="scope" value={scope} onChange={setScope} options={scopes} />
          </label>
          <label>
            Range <Select name="range" value={range} onChange={setRange} options={RANGES} />
          </label>
        </div>
      </header>
      <ErrorNote error={series.error} />
      <UsageCharts series={series.data} />
      <Hosts projectId={projectId} range={range} />
    </section>
  );
}

function Hosts({ projectId, range }: { projectId: string; range: string }) {
  const base = `/projects/${projectId}`;
  const [typed, setTyped] = useState("");
  const [search, setSearch] = useState("");
  const [page, setPage] = useState(1);
  const [picked, setPicked] = useState<string[]>([]);
  // The search asks the server once typing pauses.
  useEffect(() => {
    const timer = setTimeout(() => {
      setSearch(typed.trim());
      setPage(1);
    }, 300);
    return () => clearTimeout(timer);
  }, [typed]);
  const hosts = useApi<{ items: HostRow[]; total: number }>(`${base}/metrics/hosts`, {
    range,
    search,
    page,
    page_size: HOSTS_PAGE,
  });
  const history = useApi<{ items: { host: string; series: Series }[] }>(
    picked.length > 0 ? `${base}/metrics/hosts/history` : null,
    { range, hosts: picked.join(",") },
  );
  const chart = useMemo(() => {
    const items = history.data?.items ?? [];
    if (items.length === 0) return undefined;
    return {
      times: items[0].series.points.map((p) => Date.parse(p.t) / 1000),
      series: items.map((item, index) => ({
        label: item.host,
        stroke: COLOURS[index % COLOURS.length],
        values: item.series.points.map((p) => p.requests),
      })),
    };
  }, [history.data]);
  const total = hosts.data?.total ?? 0;
  const pages = Math.max(1, Math.ceil(total / HOSTS_PAGE));
  const toggle = (host: string) =>
    setPicked((old) =>
      old.includes(host)
        ? old.filter((h) => h !== host)
        : old.length >= MAX_PICKED
        ? old
        : [...old, host]
    );

  return (
    <section>
      <header class="toolbar">
        <h3>Destination hosts</h3>
        <input
          type="search"
          name="host-search"
          aria-label="Search hosts"
          placeholder="Part of a host name"
          value={typed}
          onInput={(event) => setTyped((event.currentTarget as HTMLInputElement).value)}
          style={{ maxWidth: "280px" }}
        />
      </header>
      <ErrorNote error={hosts.error ?? history.error} />
      {chart
        ? (
          <Chart
            title="Requests by host"
            times={chart.times}
            series={chart.series}
            format={(v) => formatCount(v)}
          />
        )
        : <p class="muted">Tick up to {MAX_PICKED} hosts to chart them side by side.</p>}
      <table class="data" aria-label="Destination hosts">
        <thead>
          <tr>
            <th>Chart</th>
            <th>Host</th>
            <th>Requests</th>
            <th>Success</th>
            <th>Sent</th>
            <th>Received</th>
          </tr>
        </thead>
        <tbody>
          {(hosts.data?.items ?? []).map((row) => (
            <tr key={row.host}>
              <td>
                <input
                  type="checkbox"
                  aria-label={`Chart ${row.host}`}
                  checked={picked.includes(row.host)}
                  onChange={() => toggle(row.host)}
                />
              </td>
              <td>{row.host}</td>
              <td>{formatCount(row.requests)}</td>
              <td>{formatPercent(row.success_rate)}</td>
              <td>{formatBytes(row.bytes_sent)}</td>
              <td>{formatBytes(row.bytes_received)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {total === 0 && !hosts.loading ? <p class="muted">No hosts in this range.</p> : null}
      <div class="pager">
        <button
          type="button"
          class="secondary"
          disabled={page <= 1}
          onClick={() => setPage(page - 1)}
        >
          Previous
        </button>
        <span>
          Page {page} of {pages} ({formatCount(total)} hosts)
        </span>
        <button
          type="button"
          class="secondary"
          disabled={page >= pages}
          onClick={() => setPage(page + 1)}
        >
          Next
        </button>
      </div>
    </section>
  );
}
