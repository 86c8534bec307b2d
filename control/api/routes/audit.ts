/** The audit log: who changed what, when, from where, and what it was before (admins). */
import { UserRole } from "../../../shared/roles.ts";
import { readAuditLog } from "../../audit/log.ts";
import { AuditQuery } from "../../model/audit.ts";
import { read } from "../../core/store.ts";
import type { ApiDeps } from "../deps.ts";
import { AuditPageAnswer } from "../answers/audit.ts";
import { answer, defineRoute, type Route } from "../registry.ts";

export function auditRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: "/api/v1/audit",
      tag: "audit",
      summary: "The audit log: every write, newest first",
      description: "One entry for each entity a write changed (a bulk proxy write: one entry " +
        "with its `count`), written in the write's own transaction: who (`actor`: a user, a " +
        "token with the user it acts for, or the api's configuration file), `at`, `address`, " +
        "`via` (dashboard, cli, api or config) and the `request`, what (`entity`, `entity_id`, " +
        "`action`) and the fields that changed `before` and `after`, secrets masked as " +
        "`********`. Filtered by `entity`, `entity_id`, `user` (who wrote, or the user a token " +
        "acts for), `action`, `via`, `since` and `until` (ISO 8601); `limit` (1-500, default " +
        "100) a page, `next_cursor` as `cursor` for the next, older page. Reads and refused " +
        "writes are not in it. Kept `OCTOPROX_AUDIT_RETENTION_DAYS`.",
      access: UserRole.admin,
      query: AuditQuery,
      responses: { 200: answer("`{items, next_cursor}`", AuditPageAnswer) },
      async handler({ c, query }) {
        return c.json(await read(deps, () => readAuditLog(deps.database, query)));
      },
    }),
  ];
}
