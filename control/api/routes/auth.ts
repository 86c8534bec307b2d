/** Login and the caller's own identity. */
import { UnauthorizedError } from "../../../shared/errors.ts";
import { UserRole } from "../../../shared/roles.ts";
import { getUser, verifyLogin } from "../../services/users.ts";
import { issueAccessToken, writerOf } from "../auth.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import { LoginAnswer, MeAnswer } from "../answers/users.ts";
import { LoginBody } from "../../model/auth.ts";
import { SetPasswordBody } from "../../model/users.ts";
import { acceptInvitation } from "../../services/invites.ts";
import { presentUser } from "../present.ts";

const V1 = "/api/v1";

const INVALID_LOGIN = "Invalid username or password";

export function authRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "post",
      path: `${V1}/auth/login`,
      tag: "auth",
      summary: "Log in with a username and password",
      description: "Answers a bearer JWT. Wrong credentials and inactive users get the same 401.",
      access: "public",
      body: LoginBody,
      // A username or password no account can have is a wrong login, answered as one.
      credentials: { fields: ["username", "password"], message: INVALID_LOGIN },
      responses: {
        200: answer('`{access_token, token_type: "bearer", expires_in}` (seconds)', LoginAnswer),
      },
      async handler({ c, body }) {
        const user = await verifyLogin(deps, body.username, body.password);
        if (!user) throw new UnauthorizedError(INVALID_LOGIN);
        const { accessToken, expiresInSeconds } = await issueAccessToken(deps.settings, user);
        return c.json({
          access_token: accessToken,
          token_type: "bearer" as const,
          expires_in: expiresInSeconds,
        });
      },
    }),
    defineRoute({
      method: "post",
      path: `${V1}/auth/set-password`,
      tag: "auth",
      summary: "Set your password through an invitation link",
      description: "`token` is the link's; it works once, until it ends. A link used already, " +
        "never issued or past its end is a 422 on `body.token` saying which, and nothing changes.",
      access: "public",
      body: SetPasswordBody,
      responses: { 204: "The password is set: sign in with it" },
      async handler({ c, body }) {
        // The link's user is the writer of its password (the audit log).
        await acceptInvitation(
          deps,
          body.token,
          body.password,
          (user) => writerOf(user, undefined, c),
        );
        return c.body(null, 204);
      },
    }),
    defineRoute({
      method: "get",
      path: `${V1}/auth/me`,
      tag: "auth",
      summary: "Who the token belongs to",
      access: UserRole.viewer,
      responses: { 200: answer("The user, and `via` (`jwt` or `api_token`)", MeAnswer) },
      async handler({ c, principal }) {
        const user = await getUser(deps, principal.userId);
        return c.json({
          ...presentUser(user),
          via: principal.tokenId ? "api_token" as const : "jwt" as const,
        });
      },
    }),
  ];
}
