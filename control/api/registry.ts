/**
 * The route registry: each route is declared once (method, path, summary, who may call it, the
 * schemas of its body and query, its answers) and that one declaration both mounts the route,
 * with its authentication and validation, and writes its part of the OpenAPI document, so the
 * document cannot drift from what the routes accept.
 */
import type { Context, Hono, MiddlewareHandler, TypedResponse } from "hono";
import type { StatusCode } from "hono/utils/http-status";
import { bodyLimit } from "hono/body-limit";
import type * as v from "valibot";
import {
  type FieldIssue,
  NotFoundError,
  UnauthorizedError,
  ValidationError,
} from "../../shared/errors.ts";
import type { Access } from "./auth.ts";
import type { AppEnv, Principal } from "./context.ts";
import { payloadTooLargeResponse } from "./errors.ts";
import { type AnySchema, parseInput, parseJsonObject } from "../model/validation.ts";
import { unstorableIssues, unstorableQueryIssues, unstorableText } from "../core/unstorable.ts";
import { isUuid } from "../core/store.ts";

export type Method = "get" | "post" | "put" | "patch" | "delete";

type Output<TSchema> = TSchema extends AnySchema ? v.InferOutput<TSchema> : undefined;

/**
 * A JSON answer as a route declares it: what it means, and its schema (control/api/answers/).
 * The same schema types the handler's answer, writes the OpenAPI document's response schema and
 * checks the real answers in tests/api/answers.test.ts.
 */
export interface Answer<TSchema extends AnySchema = AnySchema> {
  description: string;
  schema: TSchema;
}

export function answer<TSchema extends AnySchema>(
  description: string,
  schema: TSchema,
): Answer<TSchema> {
  return { description, schema };
}

/** A route's answers by status: a description, or for a JSON answer its declaration. */
export type Responses = Readonly<Record<number, string | Answer>>;

/**
 * What a handler may return: for each success status declared with a schema, a JSON response
 * (`c.json`) whose serialised type is the schema's output; a success status declared by a
 * description alone leaves the answer unchecked (a 204, a file).
 */
type Success<TResponses> = {
  [K in keyof TResponses]: `${K & number}` extends `2${string}`
    ? TResponses[K] extends Answer<infer TSchema>
      ? Response & TypedResponse<v.InferOutput<TSchema>, StatusCode, "json">
    : Response
    : never;
}[keyof TResponses];

export type HandlerAnswer<TResponses> = [Success<TResponses>] extends [never] ? Response
  : Success<TResponses>;

/** JSON bodies are small; an upload declares its own bound. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export interface RouteInput<TAccess extends Access, TBody, TQuery> {
  c: Context<AppEnv>;
  body: Output<TBody>;
  query: Output<TQuery>;
  /** A text/plain body, for routes that declare `textBody`; "" otherwise. */
  text: string;
  /** The raw body, for routes that declare `fileBody` (an IP database); empty otherwise. */
  file: Uint8Array;
  /** Path parameters, each a uuid (anything else answered 404 before the handler). */
  params: Readonly<Record<string, string>>;
  principal: TAccess extends "public" | "distribution" ? undefined : Principal;
}

export interface RouteSpec<
  TAccess extends Access,
  TBody extends AnySchema | undefined,
  TQuery extends AnySchema | undefined,
  TResponses extends Responses = Responses,
> {
  method: Method;
  /** The Hono path, such as `/api/v1/projects/:id`; parameters are uuids. */
  path: string;
  /** Parameters that are identifiers (a provider id) rather than uuids. */
  nameParams?: readonly string[];
  tag: string;
  summary: string;
  description?: string;
  access: TAccess;
  body?: TBody;
  /** An empty body reads as `{}`: for a body whose every field may be left out. */
  bodyOptional?: boolean;
  /** A text/plain body instead of JSON, such as an upload. */
  textBody?: { maxBytes: number; description: string };
  /** Raw bytes instead of JSON (a binary file, taken as sent). */
  fileBody?: { maxBytes: number; description: string };
  /** A JSON body's bound, when larger than DEFAULT_MAX_BODY_BYTES (a configuration, a backup). */
  maxBodyBytes?: number;
  query?: TQuery;
  /**
   * Body fields that are credentials (a login's username and password): text refused in them
   * answers as wrong credentials would (401 with this message), so the answer tells nothing
   * more than a wrong password does.
   */
  credentials?: { fields: readonly string[]; message: string };
  /**
   * The answers by status, with what each means, and a JSON answer's schema (`answer(...)`).
   * Error answers are added to the doc.
   */
  responses: TResponses;
  handler(
    input: RouteInput<TAccess, TBody, TQuery>,
  ): HandlerAnswer<TResponses> | Promise<HandlerAnswer<TResponses>>;
}

/** A declared route, its types erased: what the app mounts and the document describes. */
export interface Route {
  method: Method;
  path: string;
  tag: string;
  summary: string;
  description?: string;
  access: Access;
  body?: AnySchema;
  bodyOptional?: boolean;
  textBody?: { maxBytes: number; description: string };
  fileBody?: { maxBytes: number; description: string };
  maxBodyBytes?: number;
  query?: AnySchema;
  responses: Responses;
  /** Path parameter names, in order. */
  params: readonly string[];
  run(c: Context<AppEnv>): Promise<Response>;
}

/** What a name parameter may be (a provider id). */
const NAME_PARAM = /^[A-Za-z0-9_-]{1,64}$/;

const SINGULAR: Readonly<Record<string, string>> = {
  providers: "Provider",
  proxies: "Proxy",
  users: "User",
  tokens: "Token",
  projects: "Project",
  credentials: "Credential",
  connectors: "Connector",
  "distribution-keys": "Distribution key",
  extract: "Lease",
  databases: "IP database",
  rules: "Alert rule",
  channels: "Alert channel",
  peers: "Device",
};

/** The entity a path parameter names: the collection before it (`/projects/:id` → Project). */
export function paramEntity(path: string, param: string): string {
  const segments = path.split("/");
  const index = segments.indexOf(`:${param}`);
  const collection = index > 0 ? segments[index - 1] : "";
  return SINGULAR[collection] ?? "Resource";
}

export function pathParams(path: string): string[] {
  return path.split("/").filter((s) => s.startsWith(":")).map((s) => s.slice(1));
}

export function defineRoute<
  TAccess extends Access,
  TBody extends AnySchema | undefined = undefined,
  TQuery extends AnySchema | undefined = undefined,
  TResponses extends Responses = Responses,
>(spec: RouteSpec<TAccess, TBody, TQuery, TResponses>): Route {
  const params = pathParams(spec.path);
  return {
    method: spec.method,
    path: spec.path,
    tag: spec.tag,
    summary: spec.summary,
    description: spec.description,
    access: spec.access,
    body: spec.body,
    bodyOptional: spec.bodyOptional,
    textBody: spec.textBody,
    fileBody: spec.fileBody,
    maxBodyBytes: spec.maxBodyBytes,
    query: spec.query,
    responses: spec.responses,
    params,
    async run(c) {
      // Every value read is first checked for what Postgres refuses (core/unstorable.ts), before
      // its schema and the handler, so no route can let it through.
      const pathIssues = params.flatMap((name) =>
        unstorableText(`path.${name}`, c.req.param(name) ?? "") ?? []
      );
      if (pathIssues.length > 0) throw new ValidationError(pathIssues);
      const values: Record<string, string> = {};
      for (const name of params) {
        const value = c.req.param(name) ?? "";
        // A malformed id names no row: answer as for a missing one, before Postgres casts it.
        const valid = spec.nameParams?.includes(name) ? NAME_PARAM.test(value) : isUuid(value);
        if (!valid) throw new NotFoundError(paramEntity(spec.path, name));
        values[name] = value.toLowerCase();
      }
      const queryIssues = unstorableQueryIssues(c.req.queries());
      if (queryIssues.length > 0) throw new ValidationError(queryIssues);
      const query = spec.query ? parseInput(spec.query, c.req.query(), "query") : undefined;
      let body: unknown;
      let text = "";
      let file: Uint8Array = new Uint8Array(0);
      if (spec.fileBody) {
        // Bytes are stored as they are (bytea), never as text: nothing to refuse in them here.
        file = new Uint8Array(await c.req.arrayBuffer());
      } else if (spec.textBody) {
        text = await c.req.text();
        const issue = unstorableText("body", text);
        if (issue) throw new ValidationError([issue]);
      } else if (spec.body) {
        const raw = await c.req.text();
        const json = spec.bodyOptional && raw.trim() === "" ? {} : parseJsonObject(raw);
        const issues = unstorableIssues("body", json);
        if (issues.length > 0) refuse(spec.credentials, json, issues);
        try {
          body = parseInput(spec.body, json, "body");
        } catch (error) {
          if (error instanceof ValidationError) refuse(spec.credentials, json, error.issues);
          throw error;
        }
      }
      // The schemas above produced exactly these types; the generic input cannot be spelled
      // without the cast.
      const input = {
        c,
        body,
        query,
        text,
        file,
        params: values,
        principal: c.get("principal"),
      } as RouteInput<TAccess, TBody, TQuery>;
      return await spec.handler(input);
    },
  };
}

/**
 * Throws the answer to input at fault: a 422 naming the fields, or, when one of them is a
 * credential the caller sent as text, the route's 401.
 */
function refuse(
  credentials: RouteSpec<Access, undefined, undefined>["credentials"],
  json: Record<string, unknown>,
  issues: readonly FieldIssue[],
): never {
  const credential = credentials?.fields.find((name) =>
    typeof json[name] === "string" && issues.some((issue) => issue.field === `body.${name}`)
  );
  if (credentials && credential !== undefined) throw new UnauthorizedError(credentials.message);
  throw new ValidationError(issues);
}

export interface MountOptions {
  /** Authenticates and checks the role; undefined for a public route. */
  authorize(c: Context<AppEnv>, access: Access): Promise<Principal | undefined>;
}

/**
 * The body bound. A body that says its length is judged by its Content-Length header alone, so
 * the request is never turned into a web Request with a stream (what hono's bodyLimit does to
 * read `body`, and what costs the extraction path most): the handler then reads it straight off
 * the Node request. A chunked body is counted as it streams, by hono's bodyLimit.
 */
function limitBody(maxSize: number): MiddlewareHandler<AppEnv> {
  const streamed = bodyLimit({ maxSize, onError: (c) => payloadTooLargeResponse(c, maxSize) });
  return async (c, next) => {
    const length = c.req.header("content-length");
    if (length === undefined || c.req.header("transfer-encoding") !== undefined) {
      return await streamed(c, next);
    }
    if (Number.parseInt(length, 10) > maxSize) return payloadTooLargeResponse(c, maxSize);
    await next();
  };
}

/** Mounts routes: authentication first (401/403 before anything is read), then the body bound. */
export function mountRoutes(app: Hono<AppEnv>, routes: readonly Route[], options: MountOptions) {
  for (const route of routes) {
    const handlers: MiddlewareHandler<AppEnv>[] = [];
    if (route.access !== "public") {
      handlers.push(async (c, next) => {
        c.set("principal", await options.authorize(c, route.access));
        await next();
      });
    }
    if (route.method !== "get" && route.method !== "delete") {
      const maxSize = route.fileBody?.maxBytes ?? route.textBody?.maxBytes ?? route.maxBodyBytes ??
        DEFAULT_MAX_BODY_BYTES;
      handlers.push(limitBody(maxSize));
    }
    app.on(route.method.toUpperCase(), [route.path], ...handlers, (c) => route.run(c));
  }
}
