/**
 * The one place errors become HTTP answers. Catalogue errors map to their status; a store that
 * did not answer is a 503 with Retry-After and one warn line; anything else is a bug: a 500 that
 * tells the client only the request id, and one error line with the stack.
 *
 * No answer or log line ever carries SQL or its parameters: drizzle puts both in the message of
 * the error it wraps driver errors in, so log lines read the driver's error, never the wrapper.
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { isPostgresUnavailable } from "../../db/errors.ts";
import {
  BackupRefusedError,
  CloudCallError,
  ConflictError,
  DuplicateError,
  EgressRefusedError,
  ForbiddenError,
  IdempotencyConflictError,
  MitmCaError,
  NotFoundError,
  PreconditionError,
  StaleError,
  StoreUnavailableError,
  UnauthorizedError,
  UnconfirmedHostsError,
  ValidationError,
  VendorCallError,
} from "../../shared/errors.ts";
import type { Logger } from "../core/logging.ts";
import type { AppEnv } from "./context.ts";

/** Seconds a client should wait before trying again after a 503. */
export const RETRY_AFTER_SECONDS = 5;

export interface ErrorBody {
  error: string;
  detail?: { field: string; message: string }[];
  /** A custom descriptor's egress hosts still to confirm (409). */
  unconfirmed_hosts?: string[];
  request_id?: string;
}

function json(c: Context<AppEnv>, status: ContentfulStatusCode, body: ErrorBody): Response {
  return c.json(body, status);
}

/** The links of an error's cause chain, outermost first. */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; current != null && chain.length < 8;) {
    chain.push(current);
    current = (current as { cause?: unknown }).cause;
  }
  return chain;
}

/** A wrapper that holds the statement and its parameters (drizzle's DrizzleQueryError). */
function holdsQuery(error: unknown): boolean {
  return typeof error === "object" && error !== null && "query" in error && "params" in error;
}

/** The error worth logging: the first link of the chain that holds no statement. */
function loggable(
  error: unknown,
): { type: string; message: string; code?: string; stack?: string } {
  const link = causes(error).find((candidate) => !holdsQuery(candidate)) ?? error;
  if (link instanceof Error) {
    const code = (link as { code?: unknown }).code;
    return {
      type: link.name,
      message: holdsQuery(link) ? "(query error)" : link.message,
      ...(typeof code === "string" ? { code } : {}),
      ...(link.stack && !holdsQuery(link) ? { stack: link.stack } : {}),
    };
  }
  return { type: typeof link, message: "(non-error thrown)" };
}

/** The driver's code for an outage (ECONNREFUSED, 57P01…), for the one warn line. */
function outageCode(error: unknown): string | undefined {
  const codes = causes(error).map((link) => (link as { code?: unknown }).code)
    .filter((code): code is string => typeof code === "string" && !code.startsWith("OX_"));
  return codes.at(-1);
}

function storeOf(error: unknown): "postgres" | "redis" | undefined {
  if (error instanceof StoreUnavailableError) return error.store;
  if (isPostgresUnavailable(error)) return "postgres";
  return undefined;
}

export function errorResponse(error: unknown, c: Context<AppEnv>, logger: Logger): Response {
  if (error instanceof ValidationError) {
    return json(c, 422, { error: error.message, detail: [...error.issues] });
  }
  if (error instanceof DuplicateError) {
    const field = error.field.includes(".") ? error.field : `body.${error.field}`;
    return json(c, 400, { error: error.message, detail: [{ field, message: error.message }] });
  }
  if (error instanceof ConflictError) return json(c, 400, { error: error.message });
  if (error instanceof StaleError) return json(c, 409, { error: error.message });
  if (error instanceof PreconditionError) return json(c, 409, { error: error.message });
  if (error instanceof IdempotencyConflictError) return json(c, 409, { error: error.message });
  if (error instanceof EgressRefusedError) return json(c, 422, { error: error.message });
  // A cloud that did not answer, or failed itself, while a connector was checked against it.
  if (error instanceof CloudCallError) {
    return json(c, 502, { error: `The cloud did not answer the check: ${error.message}` });
  }
  if (error instanceof VendorCallError) {
    return json(c, 502, { error: `The vendor did not answer as expected: ${error.message}` });
  }
  if (error instanceof UnconfirmedHostsError) {
    return json(c, 409, { error: error.message, unconfirmed_hosts: [...error.hosts] });
  }
  if (error instanceof BackupRefusedError) return json(c, 400, { error: error.message });
  if (error instanceof NotFoundError) return json(c, 404, { error: error.message });
  if (error instanceof UnauthorizedError) {
    c.header("WWW-Authenticate", "Bearer");
    return json(c, 401, { error: error.message });
  }
  if (error instanceof ForbiddenError) return json(c, 403, { error: error.message });
  if (error instanceof MitmCaError) {
    // The operator's to fix (a file missing, replaced by a wrong one, expired): named, not a bug.
    logger.warn({ path: c.req.path, error: error.message }, "TLS interception CA unusable");
    return json(c, 503, { error: `The TLS interception CA cannot be used: ${error.message}` });
  }

  const store = storeOf(error);
  if (store) {
    const name = store === "postgres" ? "Postgres" : "Redis";
    logger.warn(
      { store, method: c.req.method, path: c.req.path, code: outageCode(error) },
      `${name} did not answer; answered 503`,
    );
    c.header("Retry-After", String(RETRY_AFTER_SECONDS));
    return json(c, 503, { error: `Service temporarily unavailable: ${name} did not answer` });
  }

  if (error instanceof HTTPException && error.status < 500) {
    return json(c, error.status as ContentfulStatusCode, { error: error.message || "Bad request" });
  }

  logger.error(
    { method: c.req.method, path: c.req.path, error: loggable(error) },
    "Unhandled error; answered 500",
  );
  return json(c, 500, { error: "Internal server error", request_id: c.get("requestId") });
}

export function notFoundResponse(c: Context<AppEnv>): Response {
  return json(c, 404, { error: `No route for ${c.req.method} ${c.req.path}` });
}

export function payloadTooLargeResponse(c: Context<AppEnv>, maxBytes: number): Response {
  return json(c, 413, { error: `The body is larger than ${maxBytes} bytes` });
}
