/**
 * Provider accuracy: per connector, the countries it claims (declared, or promised per exit by
 * its vendor) against where its exits were seen, and the share of judged exits seen where they
 * were claimed, overall and per claimed country. From GET /geo/exits and GET /geo/accuracy.
 */
import { useMemo } from "preact/hooks";
import type { ConnectorAccuracy, ConnectorExits } from "../../../api/answers/geo-exits.ts";
import { formatCount, formatPercent } from "../ui/format.ts";
import { Country } from "../ui/location.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

const REFRESH_MS = 15_000;

/** `3 of 4`, or why nothing was judged. */
function Judged(
  { row }: { row: { exits_judged: number; exits_matching: number; accuracy: number | null } },
) {
  if (row.accuracy === null) {
    return (
      <span class="muted" title="No exit has both a claimed country and a seen one">
        not judged
      </span>
    );
  }
  return (
    <span data-accuracy={row.accuracy}>
      {formatPercent(row.accuracy)}{" "}
      <span class="muted">
        ({formatCount(row.exits_matching)} of {formatCount(row.exits_judged)})
      </span>
    </span>
  );
}

export function ExitAccuracy({ projectId }: { projectId: string }) {
  const exits = useApi<{ items: ConnectorExits[] }>(
    "/geo/exits",
    { project_id: projectId },
    REFRESH_MS,
  );
  const accuracy = useApi<{ items: ConnectorAccuracy[] }>(
    "/geo/accuracy",
    { project_id: projectId },
    REFRESH_MS,
  );
  const byCountry = useMemo(
    () =>
      (accuracy.data?.items ?? []).flatMap((connector) =>
        connector.by_country.map((row) => ({ ...row, connector: connector.connector_name }))
      ),
    [accuracy.data],
  );
  const rows = exits.data?.items ?? [];

  return (
    <section class="exit-accuracy" aria-label="Provider accuracy">
      <p class="muted">
        What each connector claims (the countries it declares, and those its vendor promised for
        each exit) against where its exits were seen. An exit is judged when it has both a claimed
        and a seen country; it matches when they agree.
      </p>
      <ErrorNote error={exits.error ?? accuracy.error} />
      <table class="data" aria-label="Connectors' exits">
        <thead>
          <tr>
            <th>Connector</th>
            <th>Claims</th>
            <th>Seen at</th>
            <th class="number">Exits</th>
            <th class="number">Observations</th>
            <th class="number">Hand-outs</th>
            <th>Accuracy</th>
            <th>Last seen</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => <ConnectorRow key={row.connector_id} row={row} />)}
        </tbody>
      </table>
      {exits.data && rows.length === 0
        ? (
          <p class="muted">
            No exit seen yet. Health checks and vendor syncs record the exit each proxy leaves
            through.
          </p>
        )
        : null}
      {byCountry.length > 0
        ? (
          <>
            <h3>By claimed country</h3>
            <table class="data" aria-label="Accuracy by claimed country">
              <thead>
                <tr>
                  <th>Connector</th>
                  <th>Claimed</th>
                  <th>Accuracy</th>
                </tr>
              </thead>
              <tbody>
                {byCountry.map((row) => (
                  <tr key={`${row.connector}/${row.claimed_country}`}>
                    <td>{row.connector}</td>
                    <td>
                      <Country code={row.claimed_country} />
                    </td>
                    <td>
                      <Judged row={row} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </>
        )
        : null}
    </section>
  );
}

function ConnectorRow({ row }: { row: ConnectorExits }) {
  const claimed = new Set(row.claimed_countries);
  return (
    <tr data-connector={row.connector_name}>
      <td>
        {row.connector_name}{" "}
        <span class="muted">{row.kind === "vendor" ? row.provider : row.kind}</span>
      </td>
      <td>
        {row.claimed_countries.length === 0
          ? <span class="muted">nothing claimed</span>
          : row.claimed_countries.map((code) => (
            <span key={code} class="country-count">
              <Country code={code} />
            </span>
          ))}
      </td>
      <td data-seen>
        {row.seen_countries.map((seen) => {
          // A country seen that the connector never claimed, when it claims any.
          const unclaimed = claimed.size > 0 && seen.country !== null &&
            !claimed.has(seen.country);
          return (
            <span
              key={seen.country ?? "none"}
              class={`country-count${unclaimed ? " unclaimed" : ""}`}
              title={unclaimed ? "Not a country the connector claims" : undefined}
            >
              {seen.country === null
                ? <span class="muted">not placed</span>
                : <Country code={seen.country} />} {formatCount(seen.exits)}
            </span>
          );
        })}
      </td>
      <td class="number">{formatCount(row.exits)}</td>
      <td class="number">{formatCount(row.observations)}</td>
      <td class="number">{formatCount(row.hand_outs)}</td>
      <td>
        <Judged row={row} />
      </td>
      <td>
        <Time value={row.last_seen_at} />
      </td>
    </tr>
  );
}
