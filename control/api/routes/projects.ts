/** Projects. */
import type * as v from "valibot";
import { UserRole } from "../../../shared/roles.ts";
import {
  createProject,
  deleteProject,
  getProject,
  listProjects,
  updateProject,
} from "../../services/projects.ts";
import { hasRole } from "../auth.ts";
import type { ApiDeps } from "../deps.ts";
import { presentProject } from "../present.ts";
import { defineRoute, type Route } from "../registry.ts";
import { CreateProjectBody, UpdateProjectBody } from "../schemas/projects.ts";
import type { Principal } from "../context.ts";

/** A project body's fields under the service's names: one mapping for create and edit. */
function projectFields(body: v.InferOutput<typeof UpdateProjectBody>) {
  return {
    name: body.name,
    username: body.username,
    password: body.password,
    description: body.description,
    strategy: body.strategy,
    locationPolicy: body.location_policy,
    locationPreflight: body.location_preflight,
    sessionTtlSeconds: body.session_ttl_seconds,
    stickyQuarantine: body.sticky_quarantine,
    metricsRetentionDays: body.metrics_retention_days,
    connectionTimeoutSeconds: body.connection_timeout_seconds,
    maxRetries: body.max_retries,
  };
}

const PROJECTS = "/api/v1/projects";

/** The proxy password lets anyone spend the project's traffic: editors and admins see it. */
const seesPassword = (principal: Principal) => hasRole(principal, UserRole.editor);

const PASSWORD_NOTE = "`password` (the proxy password clients present) is shown to editors " +
  "and admins only.";

export function projectRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: PROJECTS,
      tag: "projects",
      summary: "List projects",
      description: PASSWORD_NOTE,
      access: UserRole.viewer,
      responses: { 200: "Every project, oldest first" },
      async handler({ c, principal }) {
        const rows = await listProjects(deps);
        return c.json(rows.map((row) => presentProject(row, seesPassword(principal))));
      },
    }),
    defineRoute({
      method: "post",
      path: PROJECTS,
      tag: "projects",
      summary: "Create a project",
      description: "Name and proxy username are unique regardless of case (400 naming the " +
        "field). Without `password`, one is generated. `strategy` defaults to the install's " +
        "OCTOPROX_DEFAULT_STRATEGY.",
      access: UserRole.editor,
      body: CreateProjectBody,
      responses: { 201: "The project", 400: "The name or username is taken" },
      async handler({ c, body }) {
        // The fields a create requires, as the create body's schema guarantees them.
        const required = { name: body.name, username: body.username };
        const row = await createProject(deps, { ...projectFields(body), ...required });
        return c.json(presentProject(row, true), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROJECTS}/:id`,
      tag: "projects",
      summary: "Read a project",
      description: PASSWORD_NOTE,
      access: UserRole.viewer,
      responses: { 200: "The project" },
      async handler({ c, params, principal }) {
        return c.json(presentProject(await getProject(deps, params.id), seesPassword(principal)));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${PROJECTS}/:id`,
      tag: "projects",
      summary: "Edit a project",
      access: UserRole.editor,
      body: UpdateProjectBody,
      responses: { 200: "The project", 400: "The name or username is taken" },
      async handler({ c, body, params }) {
        const row = await updateProject(deps, params.id, projectFields(body));
        return c.json(presentProject(row, true));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${PROJECTS}/:id`,
      tag: "projects",
      summary: "Delete a project with its credentials, connectors and proxies",
      access: UserRole.editor,
      responses: { 204: "Deleted" },
      async handler({ c, params }) {
        await deleteProject(deps, params.id);
        return c.body(null, 204);
      },
    }),
  ];
}
