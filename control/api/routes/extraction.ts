/**
 * The extraction API (the Distribution API): a project's proxies handed out exclusively, under
 * a lease, to callers holding one of its distribution keys (routes/distribution-keys.ts). No
 * admin token is taken here, and a distribution key opens nothing else.
 */
import { ValidationError } from "../../../shared/errors.ts";
import type { Extraction } from "../../provider-api/extraction/extraction.ts";
import type { ExtractRequest } from "../../provider-api/extraction/service.ts";
import type { DistributionCaller } from "../context.ts";
import { defineRoute, type Route } from "../registry.ts";
import { ExtractBody, IDEMPOTENCY_KEY, RenewLeaseBody } from "../../model/extraction.ts";
import type { Context } from "hono";

const EXTRACT = "/api/v1/projects/:id/extract";

const RAW_NOTE = "The answer holds each proxy's address and credentials in clear: whoever " +
  "holds them can use the proxy directly, outside the gateway's limits and metering.";

/** The caller the route's authentication found (always set on these routes). */
function caller(c: Context): DistributionCaller {
  const found = c.get("distribution");
  if (!found) throw new Error("An extraction route ran without its distribution key check");
  return found;
}

function idempotencyKey(c: Context): string | undefined {
  const value = c.req.header("idempotency-key");
  if (value === undefined) return undefined;
  if (!IDEMPOTENCY_KEY.test(value)) {
    throw new ValidationError([{
      field: "header.idempotency-key",
      message: "must be 1-255 printable ASCII characters",
    }]);
  }
  return value;
}

export function extractionRoutes(extraction: Extraction): Route[] {
  return [
    defineRoute({
      method: "post",
      path: EXTRACT,
      tag: "extraction",
      summary: "Extract proxies exclusively, under a lease",
      description: `${RAW_NOTE} Takes only proxies no gateway routes, from the project's ` +
        "enabled provider_api connectors with a `pool.reserve_for_gateway`, never below that " +
        "reserve; each proxy is the caller's alone until the lease is released or ends, then " +
        "it is checked again before anyone gets it. `partial` (the default) hands out what " +
        "there is, `all_or_nothing` all of `count` or nothing: `returned` says how many (0 " +
        "with `lease` null when none). With an `Idempotency-Key` header, a repeat of the same " +
        "request within an hour answers the same proxies and lease (`Idempotent-Replayed: " +
        "true`); the key with another request is a 409.",
      access: "distribution",
      body: ExtractBody,
      responses: {
        200: "`requested`, `returned`, `lease` {id, expires_at} and `proxies`",
        409: "The Idempotency-Key was used with another request",
      },
      async handler({ c, body, params }) {
        const key = idempotencyKey(c);
        const request: ExtractRequest = {
          count: body.count,
          protocol: body.protocol ?? null,
          country: body.country ?? null,
          carrier: body.carrier ?? null,
          connectors: body.connectors ?? null,
          mode: body.mode,
          minRemainingTtlSeconds: body.min_remaining_ttl_seconds,
          maxHealthCheckAgeSeconds: body.max_health_check_age_seconds ?? null,
          leaseSeconds: body.lease_seconds,
        };
        const { answer, replayed } = await extraction.service.extract(
          params.id,
          caller(c).keyId,
          request,
          key,
        );
        if (replayed) c.header("Idempotent-Replayed", "true");
        // Credentials in the answer: no cache on the way may keep it.
        c.header("Cache-Control", "no-store");
        return c.json(answer);
      },
    }),
    defineRoute({
      method: "post",
      path: `${EXTRACT}/:lease/renew`,
      tag: "extraction",
      summary: "Renew an extraction lease",
      description: "Moves the lease's end to `lease_seconds` from now. A lease whose end has " +
        "passed is not renewed (404): its proxies are no longer held.",
      access: "distribution",
      body: RenewLeaseBody,
      responses: { 200: "The lease: {id, expires_at}" },
      async handler({ c, body, params }) {
        caller(c);
        return c.json(await extraction.service.renew(params.id, params.lease, body.lease_seconds));
      },
    }),
    defineRoute({
      method: "post",
      path: `${EXTRACT}/:lease/release`,
      tag: "extraction",
      summary: "Release an extraction lease",
      description: "Ends the lease now; stop using its proxies. They are retired (never routed " +
        "or handed out again), unless their connector sets `pool.reuse_after_release_seconds`: " +
        "then they go back to be checked after that cool-down.",
      access: "distribution",
      responses: {
        200: "`retired`: proxies never handed out again; `returned`: proxies back to the pool",
      },
      async handler({ c, params }) {
        caller(c);
        return c.json(await extraction.service.release(params.id, params.lease));
      },
    }),
  ];
}
