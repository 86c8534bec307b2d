/**
 * Every exit the project's connectors were seen leaving through, last seen first, a page at a
 * time from GET /geo/exits/ips: where it is (country, region, city, ASN), the sources that placed
 * it, what was claimed for it, when it was first and last seen, and how often proxies were
 * handed onto it. An exit seen elsewhere than claimed says so. Each address links to its
 * observations.
 */
import { useState } from "preact/hooks";
import type { ConnectorSummary } from "../../../api/answers/connectors.ts";
import type { ExitIp } from "../../../api/answers/geo-exits.ts";
import { formatCount } from "../ui/format.ts";
import { Field, Select, TextInput } from "../ui/forms.tsx";
import { ClaimedElsewhere, Country } from "../ui/location.tsx";
import { Pager } from "../ui/pager.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

const REFRESH_MS = 15_000;

interface ExitIpPage {
  items: ExitIp[];
  total: number;
  page: number;
  page_size: number;
}

export function ExitIps({ projectId }: { projectId: string }) {
  const connectors = useApi<ConnectorSummary[]>(`/projects/${projectId}/connectors`);
  const [connectorId, setConnectorId] = useState("");
  const [country, setCountry] = useState("");
  const [page, setPage] = useState(1);
  const [pageSize, setPageSize] = useState(50);
  const list = useApi<ExitIpPage>("/geo/exits/ips", {
    project_id: projectId,
    connector_id: connectorId,
    country: country.trim(),
    page,
    page_size: pageSize,
  }, REFRESH_MS);
  const filter = (set: (value: string) => void) => (value: string) => {
    set(value);
    setPage(1);
  };
  const items = list.data?.items ?? [];

  return (
    <section class="exit-ips">
      <div class="filters" role="search" aria-label="Exit filters">
        <Field label="Connector" field="connector_id">
          <Select
            name="exit_connector"
            value={connectorId}
            onChange={filter(setConnectorId)}
            options={[
              ["", "Every connector"],
              ...(connectors.data ?? []).map((c) => [c.id, c.name] as const),
            ]}
          />
        </Field>
        <Field label="Country seen" field="country" error={list.error}>
          <TextInput name="exit_country" value={country} onInput={filter(setCountry)} />
        </Field>
      </div>
      <ErrorNote error={list.error} />
      <table class="data" aria-label="Exit IPs">
        <thead>
          <tr>
            <th>Exit IP</th>
            <th>Connector</th>
            <th>Country</th>
            <th>Region</th>
            <th>City</th>
            <th>ASN</th>
            <th>Sources</th>
            <th>Claimed</th>
            <th>First seen</th>
            <th>Last seen</th>
            <th class="number">Observations</th>
            <th class="number">Hand-outs</th>
          </tr>
        </thead>
        <tbody>
          {items.map((exit) => (
            <ExitRow key={`${exit.connector_id}/${exit.ip}`} exit={exit} projectId={projectId} />
          ))}
        </tbody>
      </table>
      {list.data && items.length === 0 ? <p class="muted">No exit seen here.</p> : null}
      <Pager
        page={page}
        pageSize={pageSize}
        total={list.data?.total ?? 0}
        noun="exits"
        onPage={setPage}
        onPageSize={(size) => {
          setPageSize(size);
          setPage(1);
        }}
      />
    </section>
  );
}

function ExitRow({ exit, projectId }: { exit: ExitIp; projectId: string }) {
  return (
    <tr data-exit={exit.ip}>
      <td>
        <a
          href={`/projects/${projectId}/exits/log?ip=${encodeURIComponent(exit.ip)}`}
          title="Its observations"
        >
          <code>{exit.ip}</code>
        </a>
      </td>
      <td>{exit.connector_name}</td>
      <td data-country>
        <Country code={exit.country} />
        <ClaimedElsewhere seen={exit.country} claimed={exit.claimed_country} />
      </td>
      <td>{exit.region ?? "–"}</td>
      <td>{exit.city ?? "–"}</td>
      <td>{exit.asn === null ? "–" : `AS${exit.asn}`}</td>
      <td data-sources>
        {exit.sources.length === 0 ? <span class="muted">–</span> : exit.sources.join(", ")}
      </td>
      <td>
        <Country code={exit.claimed_country} />
      </td>
      <td>
        <Time value={exit.first_seen_at} />
      </td>
      <td>
        <Time value={exit.last_seen_at} />
      </td>
      <td class="number">{formatCount(exit.observations)}</td>
      <td class="number">{formatCount(exit.hand_outs)}</td>
    </tr>
  );
}
