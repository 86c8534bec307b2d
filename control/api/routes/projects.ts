/** Projects. */
import { checkDirectRules } from "../../model/domain-rules.ts";
import type { DomainRule } from "../../../shared/routing/domain-rules.ts";
import type * as v from "valibot";
import { UserRole } from "../../../shared/roles.ts";
import { errorText } from "../../../shared/errors.ts";
import { projectSubject } from "../../../shared/traffic-subjects.ts";
import {
  createProject,
  deleteProject,
  getProject,
  listProjects,
  type ProjectPatch,
  type ProjectRow,
  resetProjectTraffic,
  updateProject,
} from "../../services/projects.ts";
import { askPending } from "../../traffic/asks.ts";
import { changesDecision } from "../../traffic/rules.ts";
import { trafficUsageViews } from "../../traffic/usage-view.ts";
import { hasRole } from "../auth.ts";
import type { ApiDeps } from "../deps.ts";
import { presentProject } from "../present.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import { ProjectAnswer, ProjectListAnswer } from "../answers/projects.ts";
import { CreateProjectBody, PROJECT_FIELD_NAMES, UpdateProjectBody } from "../../model/projects.ts";
import { renameFields } from "../../model/common.ts";
import type { Principal } from "../context.ts";

/** A project body's fields under the service's names: one mapping for create and edit. */
function projectFields(body: v.InferOutput<typeof UpdateProjectBody>): ProjectPatch {
  return renameFields(body, PROJECT_FIELD_NAMES) as ProjectPatch;
}

const PROJECTS = "/api/v1/projects";

/** The proxy password lets anyone spend the project's traffic: editors and admins see it. */
const seesPassword = (principal: Principal) => hasRole(principal, UserRole.editor);

const PASSWORD_NOTE = "`password` (the proxy password clients present) is shown to editors " +
  "and admins only.";

const LIMITS_NOTE = "`traffic_quota` (a traffic_config of connectors, its `limit_bytes` " +
  "and `period` required) limits the project's traffic over every connector: decided by the " +
  "same job, refused with its `limit_status` (509 by default) once reached; `traffic_usage` " +
  "shows its window as a connector's does. `rate_limit` (`requests_per_second`, `burst`) holds " +
  "across every gateway; `max_connections` caps the connections at once per gateway; both are " +
  "refused with 429. `allowed_cidrs` (empty: anywhere) are the client addresses allowed; " +
  "`passwordless_cidrs` reach the project by address alone: a list letting every address in " +
  "is a 422, a block another project lists a 400.";

const TLS_MITM_NOTE = "`tls_mitm_mode` (`off`, the default: tunnels stay raw; `plain`: the " +
  "gateway opens them with the install's CA; `match_ua` and `override_ua`: a browser's TLS " +
  "and HTTP/2 fingerprint towards the target) keeps `tls_mitm_browser` only under a mode that " +
  "uses one (`override_ua`) and clears it otherwise; a write lacking a browser the mode needs is " +
  "a 422 naming `tls_mitm_browser`, and `safari` is a 422 with the reason (the engine has no " +
  "Safari fingerprint). " +
  "`tls_mitm_bypass`: at most 1000 host names, `.suffixes` (every name under one) and IP " +
  "addresses whose tunnels stay raw; lower-cased, IDNA ASCII, deduplicated; a port or a " +
  "wildcard is a 422 naming its index.";

const BLOCKING_NOTE = "`block_rules` judge the target's answers, in order: each names " +
  "`status` (codes), `header` (`{name}` present, `{name, value}` equal without case, or " +
  "`{name, pattern}` a regular expression), `body_contains` (markers looked for in the first " +
  "`block_body_bytes` of the body, 8192 unless set, at most 65536) and `domains` (host names and " +
  "`.suffixes`; none: every host), all of which must hold, and gives a `verdict` (`ok`, " +
  "`blocked`, `rate_limited`) and a `cool_down_seconds` for the exit on that site; `mode` `on` " +
  'acts, `shadow` only records, `off` skips. `{"preset": name}` uses a shipped rule (GET ' +
  "/api/v1/block-rules/presets). `retry` (`attempts`, `methods`, `max_total_seconds`, " +
  "`rebind_sticky`; null: 3 attempts of GET and HEAD within 30 s, sticky sessions kept) says " +
  "how a blocked answer is sent again through another exit. A rule that does not parse (an " +
  "invalid regular expression, a header name that is no token, a domain that is no host) is a " +
  "422 naming its place, such as `body.block_rules.2.header.pattern`.";

export function projectRoutes(deps: ApiDeps): Route[] {
  /** Projects as answered: each with its quota's usage. */
  const present = async (rows: readonly ProjectRow[], showPassword: boolean) => {
    const usage = await trafficUsageViews(
      deps,
      rows.map((row) => ({
        subject: { kind: "project", id: row.id },
        projectId: row.id,
        config: row.trafficQuota,
        resetAt: row.trafficResetAt,
      })),
    );
    return rows.map((row) =>
      presentProject(row, showPassword, usage.get(projectSubject(row.id)) ?? null)
    );
  };
  /** A reset or a quota edit asks for a decision, marked pending. */
  const askDecision = async (projectId: string) => {
    try {
      await askPending(deps, [projectSubject(projectId)], deps.settings.redisRequestTimeoutMs);
    } catch (error) {
      deps.logger.warn(
        { project: projectId, error: errorText(error) },
        "Traffic decision not asked; the next metered bytes or index hygiene ask again",
      );
    }
  };
  return [
    defineRoute({
      method: "get",
      path: PROJECTS,
      tag: "projects",
      summary: "List projects",
      description: PASSWORD_NOTE,
      access: UserRole.viewer,
      responses: { 200: answer("Every project, oldest first", ProjectListAnswer) },
      async handler({ c, principal }) {
        const rows = await listProjects(deps);
        return c.json(await present(rows, seesPassword(principal)));
      },
    }),
    defineRoute({
      method: "post",
      path: PROJECTS,
      tag: "projects",
      summary: "Create a project",
      description: "Name and proxy username are unique regardless of case (400 naming the " +
        "field). Without `password`, one is generated. `strategy` defaults to the install's " +
        `OCTOPROX_DEFAULT_STRATEGY. ${LIMITS_NOTE} ${TLS_MITM_NOTE} ${BLOCKING_NOTE}`,
      access: UserRole.editor,
      body: CreateProjectBody,
      responses: {
        201: answer("The project", ProjectAnswer),
        400: "The name or username is taken",
      },
      async handler({ c, body, principal }) {
        checkDirectRules(
          body.domain_rules as DomainRule[] | undefined,
          undefined,
          hasRole(principal, UserRole.admin),
        );
        // The fields a create requires, as the create body's schema guarantees them.
        const required = { name: body.name, username: body.username };
        const row = await createProject(deps, { ...projectFields(body), ...required });
        const [answer] = await present([row], true);
        return c.json(answer, 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROJECTS}/:id`,
      tag: "projects",
      summary: "Read a project",
      description: PASSWORD_NOTE,
      access: UserRole.viewer,
      responses: { 200: answer("The project", ProjectAnswer) },
      async handler({ c, params, principal }) {
        const [answer] = await present(
          [await getProject(deps, params.id)],
          seesPassword(principal),
        );
        return c.json(answer);
      },
    }),
    defineRoute({
      method: "patch",
      path: `${PROJECTS}/:id`,
      tag: "projects",
      summary: "Edit a project",
      description: `${LIMITS_NOTE} An edit of what decides the quota's block (a quota set or ` +
        "cleared, its bytes, period, reset day or action) asks for a decision; one of its price, " +
        `currency or warning line asks for none. ${TLS_MITM_NOTE} ${BLOCKING_NOTE} The rule holds on the project ` +
        "as the edit would leave it: a mode changed alone keeps or clears the stored browser.",
      access: UserRole.editor,
      body: UpdateProjectBody,
      responses: {
        200: answer("The project", ProjectAnswer),
        400: "The name or username is taken",
      },
      async handler({ c, body, params, principal }) {
        if (body.domain_rules !== undefined && !hasRole(principal, UserRole.admin)) {
          const stored = (await getProject(deps, params.id)).domainRules;
          checkDirectRules(body.domain_rules as DomainRule[], stored, false);
        }
        const { row, previous } = await updateProject(deps, params.id, projectFields(body));
        if (changesDecision(previous.trafficQuota, row.trafficQuota)) await askDecision(row.id);
        const [answer] = await present([row], true);
        return c.json(answer);
      },
    }),
    defineRoute({
      method: "post",
      path: `${PROJECTS}/:id/traffic/reset`,
      tag: "projects",
      summary: "Count a project's quota usage from now on",
      description: "Stores the moment the quota's usage counts from; the history stays. Asks " +
        "for a traffic decision (`traffic_usage.pending` until it lands).",
      access: UserRole.editor,
      responses: { 200: answer("The project, with its usage counted from now", ProjectAnswer) },
      async handler({ c, params }) {
        const row = await resetProjectTraffic(deps, params.id);
        await askDecision(row.id);
        const [answer] = await present([row], true);
        return c.json(answer);
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
