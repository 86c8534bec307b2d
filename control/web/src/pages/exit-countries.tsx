/**
 * The overview's world breakdown: the project's exits by the country they were seen in, most
 * first, as bars against the largest. Summed over its connectors from GET /geo/exits, so it
 * counts distinct exits, not proxies or requests.
 */
import { useMemo } from "preact/hooks";
import type { ConnectorExits } from "../../../api/answers/geo-exits.ts";
import { formatCount } from "../ui/format.ts";
import { Country, countryName } from "../ui/location.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { useApi } from "../ui/use-api.ts";

export function ExitCountries(
  { projectId, refreshMs }: { projectId: string; refreshMs: number },
) {
  const exits = useApi<{ items: ConnectorExits[] }>(
    "/geo/exits",
    { project_id: projectId },
    refreshMs,
  );
  const rows = useMemo(() => {
    const counts = new Map<string | null, number>();
    for (const connector of exits.data?.items ?? []) {
      for (const seen of connector.seen_countries) {
        counts.set(seen.country, (counts.get(seen.country) ?? 0) + seen.exits);
      }
    }
    // Most exits first; those no source placed last.
    return [...counts].map(([country, count]) => ({ country, count })).sort((a, b) =>
      (a.country === null ? 1 : 0) - (b.country === null ? 1 : 0) || b.count - a.count ||
      (a.country ?? "").localeCompare(b.country ?? "")
    );
  }, [exits.data]);
  const largest = Math.max(1, ...rows.map((row) => row.count));

  return (
    <section aria-label="Exits by country">
      <h3>
        Exits by country{" "}
        <a class="muted small-link" href={`/projects/${projectId}/exits`}>Exit locations</a>
      </h3>
      <ErrorNote error={exits.error} />
      {exits.data && rows.length === 0
        ? <p class="muted">No exit seen yet.</p>
        : (
          <table class="data bar-list" aria-label="Exits by country">
            <tbody>
              {rows.map((row) => (
                <tr key={row.country ?? "none"} data-country={row.country ?? ""}>
                  <td>
                    {row.country === null ? <span class="muted">not placed</span> : (
                      <>
                        <Country code={row.country} />{" "}
                        <span class="muted">{countryName(row.country)}</span>
                      </>
                    )}
                  </td>
                  <td class="bar-cell">
                    <span class="bar" style={{ width: `${(row.count / largest) * 100}%` }} />
                  </td>
                  <td class="number" data-exits>{formatCount(row.count)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </section>
  );
}
