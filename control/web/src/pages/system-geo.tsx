/**
 * The System page's IP databases, from GET /geo/status: the admin's databases in the order they
 * are consulted, each with its version, how old its file is, its size, when it is downloaded
 * next and why the last download was refused; then the database every install ships with,
 * consulted last; and the attribution settings in force. Read every 30 s: ages move in hours.
 */
import type { GeoStatusRecord } from "../../../api/answers/geo.ts";
import { formatAge } from "../../../core/format-age.ts";
import { formatBytes, formatCount } from "../ui/format.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

const REFRESH_MS = 30_000;

type Database = GeoStatusRecord["databases"][number];

export function IpDatabases() {
  const status = useApi<GeoStatusRecord>("/geo/status", undefined, REFRESH_MS);
  const data = status.data;
  return (
    <section aria-label="IP databases">
      <h3>IP databases</h3>
      <ErrorNote error={status.error} />
      {data
        ? (
          <>
            <p class="muted" data-geo-settings>
              Sources asked, in order:{" "}
              {data.settings.location_sources.join(", ")}; when they disagree:{" "}
              {data.settings.location_conflict_rule}. Observations are kept{" "}
              {data.settings.observation_retention_days} days, exit IPs{" "}
              {data.settings.exit_ip_retention_days === null
                ? "for as long as their connector"
                : `${data.settings.exit_ip_retention_days} days after last seen`}.
            </p>
            <table class="data" aria-label="IP databases">
              <thead>
                <tr>
                  <th>Database</th>
                  <th>Format</th>
                  <th>In force</th>
                  <th>Version</th>
                  <th>Age</th>
                  <th>Size</th>
                  <th>Entries</th>
                  <th>Next download</th>
                  <th>Last error</th>
                </tr>
              </thead>
              <tbody>
                {data.databases.map((database) => (
                  <DatabaseRow key={database.id} database={database} />
                ))}
                <tr data-database={data.shipped.name}>
                  <td>
                    {data.shipped.name} <span class="badge muted">shipped</span>
                  </td>
                  <td>{data.shipped.format}</td>
                  <td>
                    <span class="badge ok">yes</span>
                  </td>
                  <td class="muted">this release's</td>
                  <td>–</td>
                  <td>{formatBytes(data.shipped.size_bytes)}</td>
                  <td>–</td>
                  <td>–</td>
                  <td />
                </tr>
              </tbody>
            </table>
          </>
        )
        : null}
    </section>
  );
}

function DatabaseRow({ database }: { database: Database }) {
  return (
    <tr data-database={database.name} class={database.last_error ? "failing" : undefined}>
      <td>
        {database.name}{" "}
        <span class="muted">{database.origin === "url" ? "downloaded" : "uploaded"}</span>
      </td>
      <td>{database.format}</td>
      <td>
        {database.in_force ? <span class="badge ok">yes</span> : (
          <span class="badge muted">
            {database.enabled ? "no file yet" : "disabled"}
          </span>
        )}
      </td>
      <td>{database.version ?? "–"}</td>
      <td data-age>
        {database.age_seconds === null ? "–" : formatAge(database.age_seconds * 1000)}
      </td>
      <td>{formatBytes(database.size_bytes)}</td>
      <td>{formatCount(database.entries)}</td>
      <td>
        {database.next_update_at ? <Time value={database.next_update_at} /> : "–"}
      </td>
      <td class="message">
        {database.last_error
          ? (
            <>
              {database.last_error} <Time value={database.last_error_at} />
            </>
          )
          : ""}
      </td>
    </tr>
  );
}
