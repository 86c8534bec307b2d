/**
 * Who asks, and whether their role may. A caller presents `Authorization: Bearer <token>`: a
 * login's JWT (HS256, settings.jwtSecret) or an API token (`oxp_…`). Either way the user is read
 * again on every request, so a deactivated user or a changed role takes effect at once.
 */
import type { Context } from "hono";
import { jwtVerify, SignJWT } from "jose";
import { ForbiddenError, UnauthorizedError } from "../../shared/errors.ts";
import { UserRole } from "../../shared/roles.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { requestContext } from "../core/logging.ts";
import { callerIp } from "../core/echo.ts";
import { type Actor, nameWriter } from "../../db/actor.ts";
import type { ServiceDeps } from "../core/store.ts";
import { isApiToken, resolveToken } from "../services/tokens.ts";
import { isDistributionKey } from "../provider-api/extraction/distribution-keys.ts";
import { activeUser, type UserRow } from "../services/users.ts";
import type { AppEnv, Principal } from "./context.ts";

const ISSUER = "octoprox";
const AUDIENCE = "octoprox-api";

/**
 * Who may call a route: anyone, a user of at least this role, or (`distribution`) a
 * distribution key of the project in the path, which no other route takes
 * (control/provider-api/extraction/keys.ts).
 */
export type Access = "public" | "distribution" | UserRole;

const RANK: Readonly<Record<UserRole, number>> = {
  [UserRole.viewer]: 1,
  [UserRole.editor]: 2,
  [UserRole.admin]: 3,
};

/** The one role rule: admin ⊃ editor ⊃ viewer. */
export function hasRole(principal: Principal, minimum: UserRole): boolean {
  return RANK[principal.role] >= RANK[minimum];
}

export function requireRole(principal: Principal, minimum: UserRole): void {
  if (!hasRole(principal, minimum)) {
    throw new ForbiddenError(`This needs the ${minimum} role or higher; you are ${principal.role}`);
  }
}

function jwtKey(settings: ControlSettings): Uint8Array {
  return new TextEncoder().encode(settings.jwtSecret);
}

export async function issueAccessToken(
  settings: ControlSettings,
  user: Pick<UserRow, "id" | "role">,
): Promise<{ accessToken: string; expiresInSeconds: number }> {
  const expiresInSeconds = Math.floor(settings.jwtExpiryMs / 1000);
  const accessToken = await new SignJWT({ role: user.role })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(user.id)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${expiresInSeconds}s`)
    .sign(jwtKey(settings));
  return { accessToken, expiresInSeconds };
}

/** The user id a valid, unexpired JWT names, or undefined. */
async function verifyAccessToken(
  settings: ControlSettings,
  token: string,
): Promise<string | undefined> {
  try {
    const { payload } = await jwtVerify(token, jwtKey(settings), {
      algorithms: ["HS256"],
      issuer: ISSUER,
      audience: AUDIENCE,
    });
    return typeof payload.sub === "string" ? payload.sub : undefined;
  } catch {
    return undefined;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** The caller behind the request's bearer token; UnauthorizedError when there is none. */
export async function authenticate(deps: ServiceDeps, c: Context<AppEnv>): Promise<Principal> {
  const header = c.req.header("authorization");
  if (!header) throw new UnauthorizedError("Authentication required: send Authorization: Bearer");
  const bearer = BEARER.exec(header)?.[1];
  if (!bearer) throw new UnauthorizedError("The Authorization header must be Bearer <token>");

  if (isDistributionKey(bearer)) {
    throw new UnauthorizedError("A distribution key calls a project's extraction API only");
  }
  let principal: Principal | undefined;
  let tokenName: string | undefined;
  if (isApiToken(bearer)) {
    const found = await resolveToken(deps, bearer);
    if (found) principal = toPrincipal(found.user, found.tokenId);
    tokenName = found?.tokenName;
  } else {
    const userId = await verifyAccessToken(deps.settings, bearer);
    const user = userId === undefined ? undefined : await activeUser(deps, userId);
    if (user) principal = toPrincipal(user);
  }
  if (!principal) throw new UnauthorizedError("Invalid, expired or revoked token");

  // Log lines of the rest of the request name the user.
  const context = requestContext.getStore();
  if (context) {
    context.userId = principal.userId;
    context.username = principal.username;
  }
  // The writes of the rest of the request name their writer to the audit log.
  nameWriter(writerOf(principal, tokenName, c));
  return principal;
}

/** The header the CLI and the dashboard name themselves in (the audit's `via`). */
export const CLIENT_HEADER = "x-octoprox-client";

/** The writer a request's transactions name to the audit log (db/actor.ts). */
export function writerOf(
  principal: Pick<Principal, "userId" | "username" | "tokenId">,
  tokenName: string | undefined,
  c: Context<AppEnv>,
): Actor {
  const client = c.req.header(CLIENT_HEADER);
  const token = principal.tokenId !== undefined;
  return {
    kind: token ? "token" : "user",
    id: principal.tokenId ?? principal.userId,
    name: token ? tokenName ?? principal.tokenId ?? "" : principal.username,
    user: principal.username,
    address: callerIp(c),
    via: client === "cli" || client === "dashboard" ? client : "api",
    request: `${c.req.method} ${c.req.routePath}`,
  };
}

function toPrincipal(user: UserRow, tokenId?: string): Principal {
  return {
    userId: user.id,
    username: user.username,
    role: user.role as UserRole,
    ...(tokenId === undefined ? {} : { tokenId }),
  };
}

/**
 * Authenticates and checks the role a route needs; undefined for a public route. Extraction
 * routes (`distribution`) are the extraction's own to authenticate (app.ts routes them there).
 */
export async function authorize(
  deps: ServiceDeps,
  c: Context<AppEnv>,
  access: Exclude<Access, "distribution">,
): Promise<Principal | undefined> {
  if (access === "public") return undefined;
  const principal = await authenticate(deps, c);
  requireRole(principal, access);
  return principal;
}
