/** Every project, and a new one (editors). */
import { useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api } from "../api/client.ts";
import type { Project } from "../../../api/answers/projects.ts";
import { useSession } from "../session.tsx";
import { formatPercent } from "../ui/format.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";
import { ProjectForm } from "./project-form.tsx";

export function Projects() {
  const session = useSession();
  const { route } = useLocation();
  const projects = useApi<Project[]>("/projects");
  const [creating, setCreating] = useState(false);

  const create = async (body: Record<string, unknown>) => {
    const project = await api<Project>("POST", "/projects", { body });
    route(`/projects/${project.id}`);
  };

  return (
    <section>
      <header class="toolbar">
        <h2>Projects</h2>
        {session.canEdit && !creating
          ? <button type="button" onClick={() => setCreating(true)}>New project</button>
          : null}
      </header>
      <ErrorNote error={projects.error} />
      {creating
        ? (
          <div class="card">
            <h3>New project</h3>
            <ProjectForm readOnly={false} onSubmit={create} submitLabel="Create project" />
            <button type="button" class="secondary" onClick={() => setCreating(false)}>
              Cancel
            </button>
          </div>
        )
        : null}
      <table class="data" aria-label="Projects">
        <thead>
          <tr>
            <th>Name</th>
            <th>Username</th>
            <th>Strategy</th>
            <th>Interception</th>
            <th>Rate limit</th>
            <th>Quota used</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {(projects.data ?? []).map((project) => (
            <tr key={project.id}>
              <td>
                <a href={`/projects/${project.id}`}>{project.name}</a>
              </td>
              <td>
                <code>{project.username}</code>
              </td>
              <td>{project.strategy.replace("_", " ")}</td>
              <td data-testid="tls-mitm-mode">
                {project.tls_mitm_mode === "off" ? "–" : project.tls_mitm_mode}
                {project.tls_mitm_mode !== "off" && project.tls_mitm_bypass.length > 0
                  ? <span class="muted">{` (${project.tls_mitm_bypass.length} bypassed)`}</span>
                  : null}
              </td>
              <td>
                {project.rate_limit ? `${project.rate_limit.requests_per_second}/s` : "–"}
              </td>
              <td>
                {project.traffic_usage
                  ? formatPercent((project.traffic_usage.percent ?? 0) / 100)
                  : "–"}
                {project.traffic_usage?.blocked ? <span class="badge danger">blocked</span> : null}
              </td>
              <td>
                <Time value={project.created_at} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {projects.data?.length === 0 ? <p class="muted">No projects yet.</p> : null}
    </section>
  );
}
