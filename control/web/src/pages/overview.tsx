/**
 * A project at a glance over a chosen range: requests a second, success rate, bytes and latency
 * as charts; the pool by status and what rests in quarantine now; the traffic split across
 * connectors with their spend; the top failures; what block rules found today (verdicts, retries,
 * the blocked attempts' spend, cooled exits, escalated sites, the most blocked sites), when they
 * found anything; the exits by the country they were seen in.
 * Refreshed every 15 s.
 */
import { useMemo, useState } from "preact/hooks";
import type {
  FailureReport,
  ProjectMetrics,
  Series,
  Split,
  SplitRow,
} from "../../../api/answers/metrics.ts";
import type { DomainsPageAnswer } from "../../../api/answers/domains.ts";
import { formatBytes, formatCount, formatMs, formatPercent } from "../ui/format.ts";
import { Select } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { RANGES } from "../ui/ranges.ts";
import { UsageCharts } from "../ui/usage-charts.tsx";
import { useApi } from "../ui/use-api.ts";
import { ExitCountries } from "./exit-countries.tsx";

const REFRESH_MS = 15_000;

/** Why a connector takes no share, in a few words (the API's codes are the router's). */
const EXCLUDED: Record<NonNullable<SplitRow["excluded_reason"]>, string> = {
  disabled: "disabled",
  not_taking_requests: "being deleted",
  place_not_served: "no proxies",
  domain_filtered: "allow list only",
  no_healthy_proxy: "no healthy proxy",
  traffic_blocked: "traffic limit reached",
  out_of_sequence: "not current in sequence",
  not_in_domain_rule: "not named by a domain rule",
  all_proxies_quarantined: "all proxies resting",
  no_usable_proxy: "no usable proxy",
  not_in_routing: "not in routing",
};

export function Overview({ projectId }: { projectId: string }) {
  const [range, setRange] = useState("1h");
  const base = `/projects/${projectId}`;
  const metrics = useApi<ProjectMetrics>(`${base}/metrics`, undefined, REFRESH_MS);
  const history = useApi<Series>(`${base}/metrics/history`, { range }, REFRESH_MS);
  const split = useApi<Split>(`${base}/metrics/connectors`, { range }, REFRESH_MS);
  const failures = useApi<FailureReport>(`${base}/failures`, { range }, REFRESH_MS);
  const domains = useApi<DomainsPageAnswer>(`${base}/domains`, { limit: "1000" }, REFRESH_MS);
  const verdicts = useMemo(() => verdictsToday(domains.data), [domains.data]);

  const usage = metrics.data?.usage;
  const pool = metrics.data?.pool;
  // Nothing shown as a count until the series has come (a dash, not a zero).
  const windowTotals = useMemo(() => {
    if (!history.data) return { requests: null, successRate: null, bytes: null };
    const points = history.data.points;
    const requests = points.reduce((sum, p) => sum + p.requests, 0);
    const successes = points.reduce((sum, p) => sum + p.successes, 0);
    const bytes = points.reduce((sum, p) => sum + p.bytes_sent + p.bytes_received, 0);
    return { requests, successRate: requests > 0 ? successes / requests : null, bytes };
  }, [history.data]);
  const spend = (split.data?.items ?? []).reduce(
    (
      acc,
      row,
    ) => (row.cost === null ? acc : { total: acc.total + row.cost, currency: row.currency }),
    { total: 0, currency: null as string | null },
  );
  const topFailures = [...(failures.data?.by_kind ?? [])].sort((a, b) => b.count - a.count)
    .slice(0, 5);

  return (
    <section class="overview">
      <header class="toolbar">
        <h2>Overview</h2>
        <label>
          Range <Select name="range" value={range} onChange={setRange} options={RANGES} />
        </label>
      </header>
      <ErrorNote error={metrics.error ?? history.error} />
      <div class="tiles">
        <Tile label="Requests in range" value={formatCount(windowTotals.requests)} />
        <Tile label="Success rate in range" value={formatPercent(windowTotals.successRate)} />
        <Tile label="Traffic in range" value={formatBytes(windowTotals.bytes)} />
        <Tile label="Requests, all time" value={formatCount(usage?.requests)} />
        <Tile label="Average latency, all time" value={formatMs(usage?.avg_latency_ms)} />
        <Tile
          label="Spend in range"
          value={spend.currency ? `${spend.total.toFixed(2)} ${spend.currency}` : "–"}
        />
      </div>
      <div class="tiles" aria-label="Pool">
        <Tile label="Proxies" value={formatCount(pool?.total)} />
        {Object.entries(pool?.by_status ?? {}).map(([status, count]) => (
          <Tile key={status} label={status} value={formatCount(count)} />
        ))}
        <Tile label="Quarantined now" value={formatCount(pool?.quarantined)} />
      </div>
      {verdicts === null ? null : (
        <section aria-label="Block verdicts today">
          <div class="tiles">
            <Tile label="Judged today" value={formatCount(verdicts.judged)} />
            <Tile label="Blocked today" value={formatCount(verdicts.blocked)} />
            <Tile label="Rate-limited today" value={formatCount(verdicts.rateLimited)} />
            <Tile label="Retries today" value={formatCount(verdicts.retries)} />
            <Tile label="Spend on blocked today" value={verdicts.blockedSpend} />
            <Tile label="Cooled exits now" value={formatCount(verdicts.cooldowns)} />
            <Tile label="Sites escalated" value={formatCount(verdicts.escalated)} />
          </div>
          {verdicts.mostBlocked.length === 0 ? null : (
            <p class="muted" data-testid="most-blocked">
              Most blocked: {verdicts.mostBlocked.join(", ")}.{" "}
              <a href={`${base}/domains`}>Domains</a>
            </p>
          )}
        </section>
      )}
      <UsageCharts series={history.data} />
      <div class="two-columns">
        <section>
          <h3>Traffic split</h3>
          {split.data?.runtime_included === false
            ? (
              <p class="muted">
                Redis did not answer: the shares by weight leave out quarantines, traffic limits and
                provider-API pools.
              </p>
            )
            : null}
          <table class="data" aria-label="Traffic split">
            <thead>
              <tr>
                <th>Connector</th>
                <th>Requests</th>
                <th>Share</th>
                <th>By weight</th>
                <th>Bytes</th>
                <th>Spend</th>
              </tr>
            </thead>
            <tbody>
              {(split.data?.items ?? []).map((row) => (
                <tr key={row.connector_id}>
                  <td>
                    {row.name}
                    {row.excluded_reason
                      ? <span class="badge muted">{EXCLUDED[row.excluded_reason]}</span>
                      : null}
                  </td>
                  <td>{formatCount(row.usage.requests)}</td>
                  <td>{formatPercent(row.observed_share)}</td>
                  <td>{formatPercent(row.expected_share)}</td>
                  <td>{formatBytes(row.usage.bytes_sent + row.usage.bytes_received)}</td>
                  <td>{row.cost === null ? "–" : `${row.cost.toFixed(2)} ${row.currency}`}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
        <section>
          <h3>Top failures</h3>
          {topFailures.length === 0
            ? <p class="muted">No failures in this range.</p>
            : (
              <table class="data" aria-label="Top failures">
                <tbody>
                  {topFailures.map((row) => (
                    <tr key={row.kind}>
                      <td>{row.kind.replaceAll("_", " ")}</td>
                      <td>{formatCount(row.count)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
        </section>
      </div>
      <ExitCountries projectId={projectId} refreshMs={REFRESH_MS} />
    </section>
  );
}

/** Today's verdicts summed over the sites; null when nothing was judged or escalated. */
function verdictsToday(page: DomainsPageAnswer | undefined) {
  if (page === undefined || page.sites.length === 0) return null;
  const sum = (pick: (site: DomainsPageAnswer["sites"][number]) => number) =>
    page.sites.reduce((total, site) => total + pick(site), 0);
  const byCurrency = new Map<string, number>();
  for (const site of page.sites) {
    for (const entry of site.spend) {
      byCurrency.set(entry.currency, (byCurrency.get(entry.currency) ?? 0) + entry.blocked);
    }
  }
  return {
    judged: sum((site) => site.judged),
    blocked: sum((site) => site.blocked),
    rateLimited: sum((site) => site.rate_limited),
    retries: sum((site) => site.retries),
    cooldowns: sum((site) => site.cooldowns),
    escalated: page.sites.filter((site) => (site.escalation?.tier ?? 0) > 0).length,
    blockedSpend: byCurrency.size === 0
      ? "–"
      : [...byCurrency].map(([currency, amount]) => `${amount.toFixed(2)} ${currency}`).join(", "),
    mostBlocked: page.sites.filter((site) => site.blocked + site.rate_limited > 0).slice(0, 3)
      .map((site) => `${site.site} (${formatCount(site.blocked + site.rate_limited)})`),
  };
}

function Tile({ label, value }: { label: string; value: string }) {
  return (
    <div class="tile" data-tile={label}>
      <span class="tile-value">{value}</span>
      <span class="tile-label">{label}</span>
    </div>
  );
}
