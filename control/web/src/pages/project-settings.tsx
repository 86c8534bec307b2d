/** A project's every field, its traffic quota's usage, and deleting it (typed confirmation). */
import { useState } from "preact/hooks";
import { useLocation } from "preact-iso";
import { api, type ApiError } from "../api/client.ts";
import type { Project } from "../api/types.ts";
import { useSession } from "../session.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { UsageBar } from "../ui/usage-bar.tsx";
import { ProjectForm } from "./project-form.tsx";

export function ProjectSettings(
  { project, onChange }: { project: Project; onChange: (project: Project) => void },
) {
  const session = useSession();
  const save = async (body: Record<string, unknown>) => {
    const stored = await api<Project>("PATCH", `/projects/${project.id}`, { body });
    onChange(stored);
    return stored;
  };
  return (
    <section>
      <h2>Settings</h2>
      {project.traffic_usage
        ? (
          <UsageBar
            usage={project.traffic_usage}
            canReset={session.canEdit}
            onReset={async () => {
              await api("POST", `/projects/${project.id}/traffic/reset`);
              onChange(await api<Project>("GET", `/projects/${project.id}`));
            }}
          />
        )
        : null}
      <ProjectForm
        project={project}
        readOnly={!session.canEdit}
        onSubmit={save}
        submitLabel="Save changes"
      />
      {session.canEdit ? <DeleteProject project={project} /> : null}
    </section>
  );
}

function DeleteProject({ project }: { project: Project }) {
  const { route } = useLocation();
  const [typed, setTyped] = useState("");
  const [error, setError] = useState<ApiError | undefined>();
  const remove = async (event: Event) => {
    event.preventDefault();
    try {
      await api("DELETE", `/projects/${project.id}`);
      route("/");
    } catch (failure) {
      setError(failure as ApiError);
    }
  };
  return (
    <form class="card danger-zone" onSubmit={remove} aria-label="Delete project">
      <h3>Delete this project</h3>
      <p>
        Its connectors, proxies and credentials go with it. Type <code>{project.name}</code>{" "}
        to confirm.
      </p>
      <ErrorNote error={error} />
      <input
        name="confirm"
        value={typed}
        onInput={(event) => setTyped((event.currentTarget as HTMLInputElement).value)}
        aria-label="Project name to confirm"
      />
      <button type="submit" class="danger" disabled={typed !== project.name}>
        Delete project
      </button>
    </form>
  );
}
