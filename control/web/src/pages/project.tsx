/** One project's pages, under /projects/:id, with its own tabs. */
import { useEffect, useState } from "preact/hooks";
import { useRoute } from "preact-iso";
import type { Project as ProjectData } from "../../../api/answers/projects.ts";
import { ErrorNote } from "../ui/status.tsx";
import { useApi } from "../ui/use-api.ts";
import { Connect } from "./connect.tsx";
import { Connectors } from "./connectors.tsx";
import { Credentials } from "./credentials.tsx";
import { Devices } from "./devices.tsx";
import { DistributionKeys } from "./distribution-keys.tsx";
import { ExitLocations } from "./exit-locations.tsx";
import { Failures } from "./failures.tsx";
import { Inspector } from "./inspector.tsx";
import { Domains } from "./domains.tsx";
import { Overview } from "./overview.tsx";
import { ProjectSettings } from "./project-settings.tsx";
import { Proxies } from "./proxies.tsx";
import { Sequence } from "./sequence.tsx";
import { Usage } from "./usage.tsx";

const TABS = [
  ["", "Overview"],
  ["connectors", "Connectors"],
  ["credentials", "Credentials"],
  ["proxies", "Proxies"],
  ["exits", "Exit locations"],
  ["usage", "Usage"],
  ["connect", "Connect"],
  ["devices", "Devices"],
  ["failures", "Failures"],
  ["inspector", "Inspector"],
  ["domains", "Domains"],
  ["sequence", "Sequence"],
  ["distribution-keys", "Distribution keys"],
  ["settings", "Settings"],
] as const;

export function Project() {
  const { params } = useRoute();
  const id = params.id;
  const tab = params.tab ?? "";
  const loaded = useApi<ProjectData>(`/projects/${id}`);
  const [project, setProject] = useState<ProjectData | undefined>();
  useEffect(() => setProject(loaded.data), [loaded.data]);

  if (loaded.error) return <ErrorNote error={loaded.error} />;
  if (!project) return <p class="muted">Loading…</p>;
  return (
    <section class="project">
      <header class="project-header">
        <h1>{project.name}</h1>
        <code class="muted">{project.username}</code>
      </header>
      <nav class="tabs" aria-label="Project pages">
        {TABS.map(([path, label]) => (
          <a
            key={path}
            href={`/projects/${id}${path ? `/${path}` : ""}`}
            aria-current={tab === path ? "page" : undefined}
          >
            {label}
          </a>
        ))}
      </nav>
      {tab === "settings"
        ? <ProjectSettings project={project} onChange={setProject} />
        : tab === "connectors"
        ? <Connectors projectId={id} connectorId={params.item} />
        : tab === "credentials"
        ? <Credentials projectId={id} credentialId={params.item} />
        : tab === "proxies"
        ? <Proxies projectId={id} />
        : tab === "exits"
        ? <ExitLocations projectId={id} view={params.item} />
        : tab === "usage"
        ? <Usage projectId={id} />
        : tab === "connect"
        ? <Connect project={project} />
        : tab === "devices"
        ? <Devices projectId={id} />
        : tab === "failures"
        ? <Failures projectId={id} />
        : tab === "inspector"
        ? <Inspector project={project} />
        : tab === "domains"
        ? <Domains project={project} />
        : tab === "sequence"
        ? <Sequence projectId={id} />
        : tab === "distribution-keys"
        ? <DistributionKeys projectId={id} />
        : <Overview projectId={id} />}
    </section>
  );
}
