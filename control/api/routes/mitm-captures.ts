/**
 * The Inspector's routes: a project's interception captures (each exchange inside an
 * intercepted tunnel, as the gateways captured it), read newest first a page at a time, and
 * cleared. The captures live in Redis alone: without it both answer 503.
 */
import { UserRole } from "../../../shared/roles.ts";
import { STREAM_CAPS } from "../../../shared/redis-keys.ts";
import { clearMitmCaptures, mitmCaptures } from "../../metrics/mitm-captures.ts";
import { MitmCapturesQuery } from "../../model/mitm-captures.ts";
import { getProject } from "../../services/projects.ts";
import { MitmCapturesAnswer } from "../answers/mitm-captures.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";

const CAPTURES = "/api/v1/projects/:id/mitm/requests";

export function mitmCaptureRoutes(deps: ApiDeps): Route[] {
  const stores = {
    redis: deps.redis,
    keys: deps.keys,
    database: deps.database,
    deadlineMs: deps.settings.redisRequestTimeoutMs,
  };
  return [
    defineRoute({
      method: "get",
      path: CAPTURES,
      tag: "inspector",
      summary: "A project's intercepted requests (the Inspector), newest first",
      description: "Each exchange inside a tunnel the gateway intercepted (docs/tls-" +
        "interception.md): method, host, path (its query replaced by `?…`), status, timings, " +
        "the exit (`connector_name`, `proxy_address`: host and port, no login), bytes, the " +
        "request headers as the client sent them and as the target got them, the answer's " +
        "headers (credentials and cookies `[scrubbed]`), the client's JA3, JA4 and SNI. A " +
        `sample: the project's last ${STREAM_CAPS.mitmRequests} or so, dropped while Redis ` +
        "is away. `count` (1 to 1000, default 50) a page; `cursor` (the previous page's " +
        "`next_cursor`) continues with older ones. Needs Redis (503 without it).",
      access: UserRole.viewer,
      query: MitmCapturesQuery,
      responses: { 200: answer("`{items, next_cursor}`", MitmCapturesAnswer) },
      async handler({ c, params, query }) {
        await getProject(deps, params.id);
        return c.json(
          await mitmCaptures(stores, params.id, { count: query.count, cursor: query.cursor }),
        );
      },
    }),
    defineRoute({
      method: "delete",
      path: CAPTURES,
      tag: "inspector",
      summary: "Clear a project's intercepted requests",
      description: "Removes every capture the Inspector holds for the project; the gateways' " +
        "next captures start a new list. Needs Redis (503 without it).",
      access: UserRole.editor,
      responses: { 204: "Cleared" },
      async handler({ c, params, principal }) {
        await getProject(deps, params.id);
        await clearMitmCaptures(stores, params.id);
        deps.logger.info(
          { project: params.id, user: principal.username },
          "Interception captures cleared",
        );
        return c.body(null, 204);
      },
    }),
  ];
}
