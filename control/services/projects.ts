/**
 * Projects: the one way their rows change. Names and proxy usernames are unique regardless of
 * case; the unique indexes enforce it and a clash answers DuplicateError naming the field.
 */
import type { DomainRule } from "../../shared/routing/domain-rules.ts";
import type { BlockRule, RetryPolicy } from "../../shared/blocking/rules.ts";
import type { EscalationPolicy } from "../../shared/blocking/escalation.ts";
import { and, asc, eq, ne, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import {
  connectors,
  geoSettings,
  type ProjectRateLimit,
  projects,
  projectSequences,
  type TrafficConfig,
} from "../../db/schema.ts";
import { SEQUENCE_OR_ESCALATION } from "./sequences.ts";
import { DEFAULT_POLICY, LocationSource } from "../../shared/geo/attribute.ts";
import { formatCidr, openToAnyone, parseCidrs } from "../../shared/net/cidr-set.ts";
import {
  DuplicateError,
  type FieldIssue,
  NotFoundError,
  ValidationError,
} from "../../shared/errors.ts";
import {
  projectPasswordProblem,
  projectUsernameProblem,
} from "../../shared/project-credentials.ts";
import { ChangeKind, JobKind, type Strategy } from "../../shared/roles.ts";
import { generatePassword } from "./passwords.ts";
import { settleTlsMitm, type TlsMitmFields, tlsMitmIssues } from "../model/tls-mitm.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import { clearProjectState, readFootprint, type StateDeps } from "./project-state.ts";
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
  /** Null: the install's attribution sources and conflict rule. */
  locationSources: string[] | null;
  locationConflictRule: string | null;
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
  /** TLS interception (control/model/tls-mitm.ts: one rule for the three). */
  tlsMitmMode: string;
  /** The browser `override_ua` presents; null under every other mode. */
  tlsMitmBrowser: string | null;
  tlsMitmBypass: string[];
  /** Judging the target's answers (shared/blocking/rules.ts). */
  blockRules: BlockRule[];
  retry: RetryPolicy | null;
  blockBodyBytes: number | null;
  /** Cost-aware escalation between connector tiers (shared/blocking/escalation.ts); null: none. */
  escalation: EscalationPolicy | null;
  /** Per-domain routing rules (shared/routing/domain-rules.ts). */
  domainRules: DomainRule[];
}

export type NewProject = Pick<ProjectFields, "name" | "username"> & Partial<ProjectFields>;
export type ProjectPatch = Partial<ProjectFields>;

const projectChange = (id: string) => ({ kind: ChangeKind.project, ref: id });

export const ESCALATION_NEEDS_RULES =
  "needs a block rule that is on: escalation moves a site after block verdicts, and no rule gives one";

export const OPEN_TO_ANYONE =
  "must not let every address use the project without a password (such as 0.0.0.0/0 or ::/0): " +
  "list your clients' networks, or narrow allowed_cidrs";

/** The rules a stored project keeps, each broken one named `body.<field>`. */
export function projectIssues(project: ProjectFields): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const username = projectUsernameProblem(project.username);
  if (username) issues.push({ field: "body.username", message: username });
  const password = projectPasswordProblem(project.password);
  if (password) issues.push({ field: "body.password", message: password });
  // A gateway listening beyond loopback refuses to start with such a project (strict mode).
  const allowed = project.allowedCidrs.length === 0 ? undefined : parseCidrs(project.allowedCidrs);
  if (openToAnyone(parseCidrs(project.passwordlessCidrs), allowed)) {
    issues.push({ field: "body.passwordless_cidrs", message: OPEN_TO_ANYONE });
  }
  if (project.locationSources !== null) {
    const preflight = preflightSourcesIssue(
      project.locationPreflight,
      project.locationSources,
      "this project's location_sources",
    );
    if (preflight) issues.push(preflight);
  }
  issues.push(...tlsMitmIssues(project));
  if (project.escalation !== null && project.blockRules.every((rule) => rule.mode !== "on")) {
    issues.push({ field: "body.escalation", message: ESCALATION_NEEDS_RULES });
  }
  return issues;
}

/**
 * A project as it is stored: the fields its interception mode does not use cleared (the one
 * rule of control/model/tls-mitm.ts, on every create, edit and configuration file).
 */
export function settleProject<T extends TlsMitmFields>(project: T): T {
  return settleTlsMitm(project);
}

/** The rules checked on the copy about to be saved. */
function validateProject(project: ProjectFields): void {
  const issues = projectIssues(project);
  if (issues.length > 0) throw new ValidationError(issues);
}

/** What a project's fields are when a create leaves them out (but its password: generated). */
export function projectDefaults(
  defaultStrategy: Strategy,
): Omit<ProjectFields, "name" | "username" | "password"> {
  return {
    description: "",
    strategy: defaultStrategy,
    locationPolicy: "off",
    locationPreflight: "off",
    locationSources: null,
    locationConflictRule: null,
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
    tlsMitmMode: "off",
    tlsMitmBrowser: null,
    tlsMitmBypass: [],
    blockRules: [],
    retry: null,
    blockBodyBytes: null,
    escalation: null,
    domainRules: [],
  };
}

/**
 * Every connector a per-domain rule names is one of the project's: one that is not is a 422
 * naming its place (`body.domain_rules.0.connectors.1`).
 */
export async function checkDomainRuleConnectors(
  tx: Tx,
  projectId: string | undefined,
  rules: readonly DomainRule[],
): Promise<void> {
  const named = rules.flatMap((rule) => rule.connectors ?? []);
  if (named.length === 0) return;
  const own = projectId === undefined ? [] : await tx.select({ id: connectors.id })
    .from(connectors).where(eq(connectors.projectId, projectId));
  const ids = new Set(own.map((row) => row.id));
  const issues: FieldIssue[] = [];
  rules.forEach((rule, index) => {
    (rule.connectors ?? []).forEach((id, at) => {
      if (!ids.has(id)) {
        issues.push({
          field: `body.domain_rules.${index}.connectors.${at}`,
          message: `is not a connector of this project: ${id}`,
        });
      }
    });
  });
  if (issues.length > 0) throw new ValidationError(issues);
}

/** The transaction lock of writes that set password-less blocks. */
export const PASSWORDLESS_LOCK = "octoprox.passwordless_cidrs";

/**
 * A client's address must select one project: a password-less block (as a network: `10.1.2.3/8`
 * is `10.0.0.0/8`) that another project lists is refused. One lock serialises the writes that
 * set such blocks, so two racing ones cannot both pass (gateways still reach neither project by
 * a block two list, should a feed ever carry one).
 */
export async function checkPasswordlessBlocks(
  tx: Tx,
  projectId: string | undefined,
  blocks: readonly string[],
): Promise<void> {
  if (blocks.length === 0) return;
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${PASSWORDLESS_LOCK}))`);
  const mine = new Set(parseCidrs(blocks).map(formatCidr));
  const listing = sql`${projects.passwordlessCidrs} <> '[]'::jsonb`;
  const others = await tx.select({ name: projects.name, blocks: projects.passwordlessCidrs })
    .from(projects)
    .where(projectId === undefined ? listing : and(listing, ne(projects.id, projectId)))
    .orderBy(asc(projects.name));
  for (const other of others) {
    for (const block of parseCidrs(other.blocks).map(formatCidr)) {
      if (mine.has(block)) {
        throw new DuplicateError(
          "passwordless_cidrs",
          `${block} is already a password-less block of project ${other.name}: a client's ` +
            "address must select one project",
        );
      }
    }
  }
}

/** The attribution sources that can check a vendor's claim: the databases, and the echo. */
const CHECKING_SOURCES: readonly string[] = [LocationSource.database, LocationSource.endpoint];

/**
 * Preflight compares an exit with what the request requires, so a mode other than `off` needs a
 * source that can place an exit: the project's sources (else the install's) must name `database`
 * or `endpoint`. With `vendor` alone, every check would take the vendor's word for where its own
 * exit is. `whose` names the sources the issue is about.
 */
function preflightSourcesIssue(
  mode: string,
  sources: readonly string[],
  whose: string,
): FieldIssue | undefined {
  if (mode === "off" || sources.some((source) => CHECKING_SOURCES.includes(source))) {
    return undefined;
  }
  return {
    field: "body.location_preflight",
    message: `cannot be ${mode}: ${whose} (${sources.join(", ")}) name neither database nor ` +
      "endpoint, so nothing could check a vendor's claim; add one of them",
  };
}

/**
 * The check of a project inheriting the install's sources, which only the store knows
 * (geo_settings); a project's own sources are checked with its other rules (projectIssues).
 */
async function inheritedSourcesIssue(
  tx: Tx,
  project: Pick<ProjectFields, "locationPreflight" | "locationSources">,
): Promise<FieldIssue | undefined> {
  if (project.locationPreflight === "off" || project.locationSources !== null) return undefined;
  const [install] = await tx.select({ sources: geoSettings.locationSources }).from(geoSettings)
    .where(eq(geoSettings.id, 1));
  return preflightSourcesIssue(
    project.locationPreflight,
    install?.sources ?? DEFAULT_POLICY.sources,
    "the install's location sources (GET /api/v1/geo/settings)",
  );
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
  const project: ProjectFields = settleProject({
    ...projectDefaults(deps.settings.defaultStrategy),
    password: generatePassword(),
    ...definedOnly(input),
    name: input.name,
    username: input.username,
  });
  validateProject(project);
  return write(deps, async (tx) => {
    const preflight = await inheritedSourcesIssue(tx, project);
    if (preflight) throw new ValidationError([preflight]);
    await checkPasswordlessBlocks(tx, undefined, project.passwordlessCidrs);
    // A new project has no connector yet for a rule to name.
    await checkDomainRuleConnectors(tx, undefined, project.domainRules);
    const [row] = await tx.insert(projects).values(project).returning();
    return { result: row, change: projectChange(row.id) };
  });
}

/** Edits a project; answers the row before the edit too (what changed decides the follow-ups). */
export async function updateProject(
  deps: ServiceDeps,
  id: string,
  patch: ProjectPatch,
): Promise<{ row: ProjectRow; previous: ProjectRow }> {
  let previous: ProjectRow | undefined;
  const row = await write(deps, async (tx) => {
    const [current] = await tx.select().from(projects).where(eq(projects.id, id)).for("update");
    if (!current) throw new NotFoundError("Project");
    previous = current;
    const next = settleProject({ ...current, ...definedOnly(patch) } as ProjectRow);
    validateProject({ ...next, strategy: next.strategy as Strategy });
    // What the rule cleared is written too (a mode that drops its browser).
    const changes = changedFields(current, {
      ...patch,
      tlsMitmMode: next.tlsMitmMode,
      tlsMitmBrowser: next.tlsMitmBrowser,
    });
    if (!changes) return { result: current, change: null };
    // Checked when the edit touches preflight or the sources, not for an unrelated field.
    if (changes.locationPreflight !== undefined || changes.locationSources !== undefined) {
      const preflight = await inheritedSourcesIssue(tx, next);
      if (preflight) throw new ValidationError([preflight]);
    }
    if (changes.passwordlessCidrs !== undefined) {
      await checkPasswordlessBlocks(tx, id, next.passwordlessCidrs);
    }
    if (changes.domainRules !== undefined) {
      await checkDomainRuleConnectors(tx, id, next.domainRules);
    }
    if (changes.escalation != null) {
      const [sequence] = await tx.select({ id: projectSequences.projectId })
        .from(projectSequences).where(eq(projectSequences.projectId, id));
      if (sequence !== undefined) {
        throw new ValidationError([{ field: "body.escalation", message: SEQUENCE_OR_ESCALATION }]);
      }
    }
    const [row] = await tx.update(projects).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(projects.id, id)).returning();
    return { result: row, change: projectChange(id) };
  });
  // How the project's exits are judged changed: they are judged again by the new rule.
  if (
    previous !== undefined &&
    (JSON.stringify(previous.locationSources) !== JSON.stringify(row.locationSources) ||
      previous.locationConflictRule !== row.locationConflictRule)
  ) {
    await deps.jobs.request(JobKind.reattribute, [`project:${id}`]);
  }
  return { row, previous: previous ?? row };
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

/**
 * Deletes a project with its credentials, connectors and proxies (by cascade), then what it left
 * in Redis (project-state.ts).
 */
export async function deleteProject(deps: ServiceDeps & StateDeps, id: string): Promise<void> {
  const footprint = await write(deps, async (tx) => {
    const footprint = await readFootprint(tx, [id]);
    const deleted = await tx.delete(projects).where(eq(projects.id, id))
      .returning({ id: projects.id });
    if (deleted.length === 0) throw new NotFoundError("Project");
    return { result: footprint, change: projectChange(id) };
  });
  await clearProjectState(deps, footprint);
}
