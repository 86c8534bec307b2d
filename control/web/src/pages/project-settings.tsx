/** A project's every field, its traffic quota's usage, and deleting it (typed confirmation). */
import { api } from "../api/client.ts";
import type { Project } from "../../../api/answers/projects.ts";
import { useSession } from "../session.tsx";
import { TypedDelete } from "../ui/typed-delete.tsx";
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
  return (
    <TypedDelete what="project" name={project.name} path={`/projects/${project.id}`} then="/">
      Its connectors, proxies and credentials go with it.
    </TypedDelete>
  );
}
