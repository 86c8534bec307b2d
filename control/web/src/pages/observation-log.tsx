/**
 * The observation log: every time one of the project's exits was seen, newest first, from GET
 * /geo/observations (paged by its cursor, "Load more"): when, the address, the connector and the
 * proxy, what saw it (a health check, a vendor sync, enrich…), where it was placed, what was
 * claimed, and whether a proxy was handed onto another exit than before. `?ip=` and `?proxy=`
 * (links from the Exit IPs view and the proxies list) open it filtered.
 */
import { useMemo, useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import type { ConnectorSummary } from "../../../api/answers/connectors.ts";
import type { ObservationView } from "../../../api/answers/geo-exits.ts";
import { Field, Select, TextInput } from "../ui/forms.tsx";
import { ClaimedElsewhere, Country } from "../ui/location.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";
import { useCursorPages } from "../ui/use-cursor-pages.ts";
import { LoadMore } from "../ui/load-more.tsx";

const PAGE = 50;

export function ObservationLog({ projectId }: { projectId: string }) {
  const { query } = useLocation();
  const connectors = useApi<ConnectorSummary[]>(`/projects/${projectId}/connectors`);
  const [connectorId, setConnectorId] = useState("");
  const [ip, setIp] = useState(query.ip ?? "");
  const proxyId = query.proxy ?? "";
  const log = useCursorPages<ObservationView>("/geo/observations", {
    project_id: projectId,
    connector_id: connectorId,
    proxy_id: proxyId,
    ip: ip.trim(),
    limit: PAGE,
  });
  const names = useMemo(
    () => new Map((connectors.data ?? []).map((c) => [c.id, c.name])),
    [connectors.data],
  );

  return (
    <section class="observation-log">
      <div class="filters" role="search" aria-label="Observation filters">
        <Field label="Connector" field="connector_id">
          <Select
            name="log_connector"
            value={connectorId}
            onChange={setConnectorId}
            options={[
              ["", "Every connector"],
              ...(connectors.data ?? []).map((c) => [c.id, c.name] as const),
            ]}
          />
        </Field>
        <Field label="Exit IP" field="ip" error={log.error}>
          <TextInput name="log_ip" value={ip} onInput={setIp} />
        </Field>
        {proxyId
          ? (
            <p class="muted">
              One proxy's: <code>{proxyId}</code>{" "}
              <a href={`/projects/${projectId}/exits/log`}>every proxy's</a>
            </p>
          )
          : null}
        <button type="button" class="secondary" onClick={log.reload}>Refresh</button>
      </div>
      <ErrorNote error={log.error} />
      <table class="data" aria-label="Observations">
        <thead>
          <tr>
            <th>When</th>
            <th>Exit IP</th>
            <th>Connector</th>
            <th>Seen by</th>
            <th>Country</th>
            <th>Region, city</th>
            <th>ASN</th>
            <th>Claimed</th>
            <th>Proxy</th>
          </tr>
        </thead>
        <tbody>
          {log.items.map((row) => (
            <ObservationRow
              key={row.id}
              row={row}
              connector={row.connector_id === null
                ? "gone"
                : names.get(row.connector_id) ?? row.connector_id}
            />
          ))}
        </tbody>
      </table>
      {!log.loading && log.items.length === 0 && !log.error
        ? <p class="muted">No observation kept{ip || connectorId || proxyId ? " of these" : ""}.</p>
        : null}
      <LoadMore pages={log} />
    </section>
  );
}

function ObservationRow({ row, connector }: { row: ObservationView; connector: string }) {
  return (
    <tr data-observation={row.id}>
      <td>
        <Time value={row.observed_at} />
      </td>
      <td>
        <code>{row.ip}</code>
      </td>
      <td>{connector}</td>
      <td>{row.source}</td>
      <td>
        <Country code={row.country} />
        <ClaimedElsewhere seen={row.country} claimed={row.claimed_country} />
      </td>
      <td>{[row.region, row.city].filter(Boolean).join(", ") || "–"}</td>
      <td>{row.asn === null ? "–" : `AS${row.asn}`}</td>
      <td>
        <Country code={row.claimed_country} />
      </td>
      <td>
        {row.proxy_id === null
          ? <span class="muted">–</span>
          : <code class="short-id" title={row.proxy_id}>{row.proxy_id.slice(0, 8)}</code>}
        {row.hand_out
          ? (
            <span class="badge" title="The proxy was seen on another exit than before">
              handed out
            </span>
          )
          : null}
      </td>
    </tr>
  );
}
