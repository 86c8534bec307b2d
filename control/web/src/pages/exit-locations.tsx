/**
 * A project's Exit locations: where its exits were really seen, against what was claimed for
 * them. Three views, each its own address under /projects/:id/exits so a link opens it:
 * provider accuracy (per connector), the exit IPs, and the observation log they come from.
 */
import { ExitAccuracy } from "./exit-accuracy.tsx";
import { ExitIps } from "./exit-ips.tsx";
import { ObservationLog } from "./observation-log.tsx";

const VIEWS = [
  ["", "Provider accuracy"],
  ["ips", "Exit IPs"],
  ["log", "Observation log"],
] as const;

export function ExitLocations({ projectId, view }: { projectId: string; view?: string }) {
  const current = view ?? "";
  return (
    <section class="exit-locations">
      <nav class="tabs sub-tabs" aria-label="Exit locations views">
        {VIEWS.map(([path, label]) => (
          <a
            key={path}
            href={`/projects/${projectId}/exits${path ? `/${path}` : ""}`}
            aria-current={current === path ? "page" : undefined}
          >
            {label}
          </a>
        ))}
      </nav>
      {current === "ips"
        ? <ExitIps projectId={projectId} />
        : current === "log"
        ? <ObservationLog projectId={projectId} />
        : <ExitAccuracy projectId={projectId} />}
    </section>
  );
}
