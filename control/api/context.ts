/**
 * What a request carries through the app: its id and, once authenticated, who asks. Declared on
 * Hono's ContextVariableMap, so the app is a plain `Hono` that any server can mount.
 */
import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import type { UserRole } from "../../shared/roles.ts";
import type { DistributionCaller } from "../provider-api/extraction/keys.ts";

export interface Principal {
  userId: string;
  username: string;
  role: UserRole;
  /** Set when the caller presented an API token rather than a login's JWT. */
  tokenId?: string;
}

/** Who calls an extraction route: a distribution key of the project in the path. */
export type { DistributionCaller };

declare module "hono" {
  interface ContextVariableMap {
    requestId: string;
    principal: Principal | undefined;
    distribution: DistributionCaller | undefined;
  }
}

/** The app's environment: Hono's default; variables are declared above. */
// deno-lint-ignore ban-types -- Hono's own BlankEnv is `{}`.
export type AppEnv = {};

/** The Node request behind a context, when @hono/node-server serves it (not in `app.request`). */
export function nodeBindings(c: Context<AppEnv>): Partial<HttpBindings> | undefined {
  const env: unknown = c.env;
  return typeof env === "object" && env !== null ? env as Partial<HttpBindings> : undefined;
}
