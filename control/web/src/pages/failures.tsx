/**
 * What a project's failed requests failed of, over a chosen range and optionally one connector:
 * the counts by kind, the same split by connector and the upstream's own status, and recent
 * scrubbed examples, newest first, paged by the API's cursor ("Load more"). Clicking a kind
 * shows that kind's examples. The counts are the flushed ones (up to a flush interval behind).
 */
import { useMemo, useState } from "preact/hooks";
import { FAILURE_KINDS } from "../../../../shared/failure-kinds.ts";
import type { ConnectorSummary } from "../../../api/answers/connectors.ts";
import type { FailureExample, FailureReport } from "../../../api/answers/metrics.ts";
import { formatCount } from "../ui/format.ts";
import { Select } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";
import { useCursorPages } from "../ui/use-cursor-pages.ts";
import { LoadMore } from "../ui/load-more.tsx";

const RANGES = [
  ["1h", "1 hour"],
  ["6h", "6 hours"],
  ["24h", "24 hours"],
  ["7d", "7 days"],
  ["30d", "30 days"],
] as const;

const PAGE = 20;
const REFRESH_MS = 15_000;

export const kindLabel = (kind: string) => kind.replaceAll("_", " ");

export function Failures({ projectId }: { projectId: string }) {
  const base = `/projects/${projectId}`;
  const [range, setRange] = useState("24h");
  const [connectorId, setConnectorId] = useState("");
  const [kind, setKind] = useState("");
  const connectors = useApi<ConnectorSummary[]>(`${base}/connectors`);
  const summary = useApi<FailureReport>(
    `${base}/failures`,
    { range, connector_id: connectorId },
    REFRESH_MS,
  );
  const names = useMemo(
    () => new Map((connectors.data ?? []).map((c) => [c.id, c.name])),
    [connectors.data],
  );
  const connectorName = (id: string | null) =>
    id === null ? "none: the gateway refused it" : names.get(id) ?? id;
  const report = summary.data;

  return (
    <section class="failures">
      <header class="toolbar">
        <h2>Failures</h2>
        <div class="toolbar-filters">
          <label>
            Range <Select name="range" value={range} onChange={setRange} options={RANGES} />
          </label>
          <label>
            Connector{" "}
            <Select
              name="connector"
              value={connectorId}
              onChange={setConnectorId}
              options={[
                ["", "All connectors"],
                ...(connectors.data ?? []).map((c) => [c.id, c.name] as const),
              ]}
            />
          </label>
        </div>
      </header>
      <ErrorNote error={summary.error ?? connectors.error} />
      <p class="muted">
        Counted at each metrics flush, so the newest failures can take up to a flush interval to
        show here. Their examples show at once.
      </p>
      <div class="failure-tables">
        <section>
          <h3>
            By kind <span class="muted">({formatCount(report?.total)} in this range)</span>
          </h3>
          {report && report.by_kind.length === 0
            ? <p class="muted">No failures in this range.</p>
            : (
              <table class="data" aria-label="Failures by kind">
                <thead>
                  <tr>
                    <th>Kind</th>
                    <th>Count</th>
                  </tr>
                </thead>
                <tbody>
                  {(report?.by_kind ?? []).map((row) => (
                    <tr key={row.kind} class={row.kind === kind ? "selected" : undefined}>
                      <td>
                        <button
                          type="button"
                          class="link"
                          title="Show this kind's examples"
                          aria-pressed={row.kind === kind}
                          onClick={() =>
                            setKind(row.kind === kind ? "" : row.kind)}
                        >
                          {kindLabel(row.kind)}
                        </button>
                      </td>
                      <td>{formatCount(row.count)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
        </section>
        <section>
          <h3>By connector and upstream status</h3>
          <table class="data" aria-label="Failures by connector">
            <thead>
              <tr>
                <th>Kind</th>
                <th>Connector</th>
                <th>Upstream status</th>
                <th>Count</th>
              </tr>
            </thead>
            <tbody>
              {(report?.rows ?? []).map((row) => (
                <tr key={`${row.kind}/${row.connector_id}/${row.vendor_status}`}>
                  <td>{kindLabel(row.kind)}</td>
                  <td>{connectorName(row.connector_id)}</td>
                  <td>{row.vendor_status ?? "–"}</td>
                  <td>{formatCount(row.count)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      </div>
      <Examples
        base={base}
        kind={kind}
        connectorId={connectorId}
        onKind={setKind}
        connectorName={connectorName}
      />
    </section>
  );
}

function Examples(
  { base, kind, connectorId, onKind, connectorName }: {
    base: string;
    kind: string;
    connectorId: string;
    onKind: (kind: string) => void;
    connectorName: (id: string | null) => string;
  },
) {
  const examples = useCursorPages<FailureExample>(`${base}/failures/examples`, {
    kind,
    connector_id: connectorId,
    limit: PAGE,
  });
  const { items, error, loading } = examples;

  return (
    <section class="examples">
      <header class="toolbar">
        <h3>Examples{kind ? `: ${kindLabel(kind)}` : ""}</h3>
        <div class="toolbar-filters">
          <label>
            Kind{" "}
            <Select
              name="kind"
              value={kind}
              onChange={onKind}
              options={[["", "All kinds"], ...FAILURE_KINDS.map((k) => [k, kindLabel(k)] as const)]}
            />
          </label>
          <button type="button" class="secondary" onClick={examples.reload}>
            Refresh
          </button>
        </div>
      </header>
      <p class="muted">
        A sample of recent failures, newest first, with credentials and URL queries taken out.
      </p>
      <ErrorNote error={error} />
      <table class="data" aria-label="Failure examples">
        <thead>
          <tr>
            <th>When</th>
            <th>Kind</th>
            <th>Request</th>
            <th>Client got</th>
            <th>Upstream</th>
            <th>Connector</th>
            <th>Message</th>
          </tr>
        </thead>
        <tbody>
          {items.map((item) => (
            <tr key={`${item.id}:${item.kind}`}>
              <td>
                <Time value={item.at} />
              </td>
              <td>{kindLabel(item.kind)}</td>
              <td>
                <span class="muted">{item.protocol}</span> <code>{item.target}</code>
              </td>
              <td>{item.client_status}</td>
              <td>
                {item.vendor_status ?? "–"}{" "}
                <span class="muted">{item.proxy_status.replaceAll("_", " ")}</span>
              </td>
              <td>{connectorName(item.connector_id)}</td>
              <td class="message">{item.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {!loading && items.length === 0 && !error
        ? <p class="muted">No examples{kind ? " of this kind" : ""} kept.</p>
        : null}
      <LoadMore pages={examples} />
    </section>
  );
}
