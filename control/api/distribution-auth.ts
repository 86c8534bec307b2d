/**
 * The distribution key an extraction request presents, read off its headers (the keys' own
 * rules live in control/provider-api/extraction/keys.ts).
 */
import type { Context } from "hono";
import { UnauthorizedError } from "../../shared/errors.ts";
import { isDistributionKey } from "../provider-api/extraction/distribution-keys.ts";

const BEARER = /^Bearer\s+(\S+)\s*$/i;
const ONLY_KEYS = "The extraction API takes a distribution key only: " +
  "Authorization: Bearer oxd_… or X-API-Key: oxd_…";

/** The distribution key a request presents; UnauthorizedError when it presents none or another secret. */
export function presentedKey(c: Context): string {
  const authorization = c.req.header("authorization");
  const apiKey = c.req.header("x-api-key")?.trim();
  let bearer: string | undefined;
  if (authorization !== undefined) {
    bearer = BEARER.exec(authorization)?.[1];
    if (bearer === undefined) throw new UnauthorizedError(ONLY_KEYS);
  }
  if (bearer !== undefined && apiKey !== undefined && apiKey !== bearer) {
    throw new UnauthorizedError("Send the distribution key once: Authorization or X-API-Key");
  }
  const key = bearer ?? apiKey;
  if (key === undefined || key === "") {
    throw new UnauthorizedError(`Authentication required. ${ONLY_KEYS}`);
  }
  if (!isDistributionKey(key)) throw new UnauthorizedError(ONLY_KEYS);
  return key;
}
