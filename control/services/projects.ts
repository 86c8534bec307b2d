/**
 * Projects: the one way their rows change. Names and proxy usernames are unique regardless of
 * case; the unique indexes enforce it and a clash answers DuplicateError naming the field.
 */
import { asc, eq, sql } from "drizzle-orm";
import { type ProjectRateLimit, projects, type TrafficConfig } from "../../db/schema.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import {
  projectPasswordProblem,
  projectUsernameProblem,
} from "../../shared/project-credentials.ts";
import { ChangeKind, type Strategy } from "../../shared/roles.ts";
import { generatePassword } from "./passwords.ts";
import { read, type ServiceDeps, write } from "./store.ts";
import { changedFields, definedOnly } from "./diff.ts";

export type ProjectRow = typeof projects.$inferSelect;

/** The fields an operator sets; id and timestamps are the database's. */
export interface ProjectFields {
  name: string;
  description: string;
  username: string;
  password: string;
  strategy: Strategy;
  locationPolicy: string;
  locationPreflight: string;
  sessionTtlSeconds: number;
  stickyQuarantine: boolean;
  metricsRetentionDays: number;
  connectionTimeoutSeconds: number;
  maxRetries: number;
  trafficQuota: TrafficConfig | null;
  rateLimit: ProjectRateLimit | null;
  maxConnections: number | null;
  allowedCidrs: string[];
  passwordlessCidrs: string[];
}

export type NewProject = Pick<ProjectFields, "name" | "username"> & Partial<ProjectFields>;
export type ProjectPatch = Partial<ProjectFields>;

const projectChange = (id: string) => ({ kind: ChangeKind.project, ref: id });

/** The rules a stored project keeps, checked on the copy about to be saved. */
function validateProject(project: ProjectFields): void {
  const issues = [];
  const username = projectUsernameProblem(project.username);
  if (username) issues.push({ field: "body.username", message: username });
  const password = projectPasswordProblem(project.password);
  if (password) issues.push({ field: "body.password", message: password });
  if (issues.length > 0) throw new ValidationError(issues);
}

export function listProjects(deps: ServiceDeps): Promise<ProjectRow[]> {
  return read(
    deps,
    (db) => db.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.id)),
  );
}

export async function getProject(deps: ServiceDeps, id: string): Promise<ProjectRow> {
  const [row] = await read(deps, (db) => db.select().from(projects).where(eq(projects.id, id)));
  if (!row) throw new NotFoundError("Project");
  return row;
}

export function createProject(deps: ServiceDeps, input: NewProject): Promise<ProjectRow> {
  const project: ProjectFields = {
    description: "",
    password: generatePassword(),
    strategy: deps.settings.defaultStrategy,
    locationPolicy: "off",
    locationPreflight: "off",
    sessionTtlSeconds: 300,
    stickyQuarantine: false,
    metricsRetentionDays: 90,
    connectionTimeoutSeconds: 30,
    maxRetries: 1,
    trafficQuota: null,
    rateLimit: null,
    maxConnections: null,
    allowedCidrs: [],
    passwordlessCidrs: [],
    ...definedOnly(input),
    name: input.name,
    username: input.username,
  };
  validateProject(project);
  return write(deps, async (tx) => {
    const [row] = await tx.insert(projects).values(project).returning();
    return { result: row, change: projectChange(row.id) };
  });
}

export function updateProject(
  deps: ServiceDeps,
  id: string,
  patch: ProjectPatch,
): Promise<ProjectRow> {
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(projects).where(eq(projects.id, id)).for("update");
    if (!current) throw new NotFoundError("Project");
    const next = { ...current, ...definedOnly(patch) } as ProjectRow;
    validateProject({ ...next, strategy: next.strategy as Strategy });
    const changes = changedFields(current, patch);
    if (!changes) return { result: current, change: null };
    const [row] = await tx.update(projects).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(projects.id, id)).returning();
    return { result: row, change: projectChange(id) };
  });
}

/**
 * Counts the project's quota usage from now on (`traffic_reset_at`), leaving its history as it
 * is. The decision it calls for is asked after the commit (routes/projects.ts).
 */
export function resetProjectTraffic(deps: ServiceDeps, id: string): Promise<ProjectRow> {
  return write(deps, async (tx) => {
    const [row] = await tx.update(projects).set({ trafficResetAt: sql`now()` })
      .where(eq(projects.id, id)).returning();
    if (!row) throw new NotFoundError("Project");
    // Nothing the feed carries changed: no entry to announce.
    return { result: row, change: null };
  });
}

/** Deletes a project with its credentials, connectors and proxies (by cascade). */
export async function deleteProject(deps: ServiceDeps, id: string): Promise<void> {
  await write(deps, async (tx) => {
    const deleted = await tx.delete(projects).where(eq(projects.id, id))
      .returning({ id: projects.id });
    if (deleted.length === 0) throw new NotFoundError("Project");
    return { result: undefined, change: projectChange(id) };
  });
}
