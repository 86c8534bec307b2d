/** Long-lived API tokens for scripts and the CLI. */
import { ForbiddenError } from "../../../shared/errors.ts";
import { UserRole } from "../../../shared/roles.ts";
import { createToken, listTokens, revokeToken } from "../../services/tokens.ts";
import { hasRole } from "../auth.ts";
import type { ApiDeps } from "../deps.ts";
import { presentToken } from "../present.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import { CreatedTokenAnswer, TokenListAnswer } from "../answers/users.ts";
import { CreateTokenBody, ListTokensQuery } from "../../model/tokens.ts";

const TOKENS = "/api/v1/tokens";

export function tokenRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "post",
      path: TOKENS,
      tag: "tokens",
      summary: "Create an API token for yourself",
      description: "The token is in this answer only; the server keeps its SHA-256. " +
        "It acts with your role, and stops working when revoked, expired, or you are deactivated.",
      access: UserRole.viewer,
      body: CreateTokenBody,
      responses: {
        201: answer("The token's record and `token`, shown this once", CreatedTokenAnswer),
      },
      async handler({ c, body, principal }) {
        const { row, token } = await createToken(deps, principal.userId, {
          name: body.name,
          expiresInDays: body.expires_in_days,
        });
        return c.json({ ...presentToken(row), token }, 201);
      },
    }),
    defineRoute({
      method: "get",
      path: TOKENS,
      tag: "tokens",
      summary: "List your API tokens (admins: any user's, with user_id)",
      access: UserRole.viewer,
      query: ListTokensQuery,
      responses: { 200: answer("The tokens, oldest first, without their secret", TokenListAnswer) },
      async handler({ c, query, principal }) {
        const userId = query.user_id ?? principal.userId;
        if (userId !== principal.userId && !hasRole(principal, UserRole.admin)) {
          throw new ForbiddenError("Only admins may list another user's tokens");
        }
        return c.json((await listTokens(deps, userId)).map(presentToken));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${TOKENS}/:id`,
      tag: "tokens",
      summary: "Revoke an API token (yours; admins: any)",
      access: UserRole.viewer,
      responses: { 204: "Revoked (also when it already was)" },
      async handler({ c, params, principal }) {
        const owner = hasRole(principal, UserRole.admin) ? undefined : principal.userId;
        await revokeToken(deps, params.id, owner);
        return c.body(null, 204);
      },
    }),
  ];
}
