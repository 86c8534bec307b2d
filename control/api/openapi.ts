/**
 * The OpenAPI 3.1 document of the whole API, written from the route registry and the same
 * valibot schemas that validate each request (converted with @valibot/to-json-schema, as the
 * input a client sends) and declare each answer (control/api/answers/, as the output the server
 * writes; the answers named there are components, referred to). Errors share one shape, added
 * to every operation that can answer them.
 */
import { type ConversionConfig, toJsonSchema, toJsonSchemaDefs } from "@valibot/to-json-schema";
import { NAMED_ANSWERS } from "./answers/index.ts";
import type { AnySchema } from "../model/validation.ts";
import type { Route } from "./registry.ts";
import { RETRY_AFTER_SECONDS } from "./errors.ts";
import { jsonObjectField } from "../model/common.ts";

type JsonObject = Record<string, unknown>;

const CONVERSION: ConversionConfig = {
  target: "draft-2020-12",
  typeMode: "input",
  // Checks and transforms with no JSON Schema equivalent are described in words instead.
  errorMode: "ignore",
  // A custom schema has no JSON Schema of its own; the one we use is "a JSON object".
  overrideSchema: ({ valibotSchema }) =>
    valibotSchema === jsonObjectField ? { type: "object" } : undefined,
};

function jsonSchema(schema: AnySchema): JsonObject {
  const converted = toJsonSchema(schema, CONVERSION) as JsonObject;
  delete converted.$schema;
  return converted;
}

/** Answers are what the server writes: their output, named answers as components. */
const ANSWER_CONVERSION: ConversionConfig = {
  ...CONVERSION,
  typeMode: "output",
  overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
};

function answerSchema(schema: AnySchema): JsonObject {
  const converted = toJsonSchema(schema, {
    ...ANSWER_CONVERSION,
    definitions: NAMED_ANSWERS,
  }) as JsonObject;
  delete converted.$schema;
  // The definitions are the document's components, written once.
  delete converted.$defs;
  return converted;
}

/** The named answers as the document's components. */
function answerComponents(): JsonObject {
  return toJsonSchemaDefs(NAMED_ANSWERS, ANSWER_CONVERSION) as JsonObject;
}

const ERROR_SCHEMA = {
  type: "object",
  required: ["error"],
  properties: {
    error: { type: "string", description: "What went wrong, for a person" },
    detail: {
      type: "array",
      description: "Each field at fault (422, and 400 for a duplicate)",
      items: {
        type: "object",
        required: ["field", "message"],
        properties: {
          field: { type: "string", examples: ["body.port", "query.page_size"] },
          message: { type: "string" },
        },
      },
    },
    request_id: { type: "string", description: "Quote it when reporting a 500" },
  },
};

const errorAnswer = (description: string, headers?: JsonObject) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
});

/** `/projects/:id` as OpenAPI writes it: `/projects/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, "{$1}");
}

function operationId(route: Route): string {
  const words = route.path.replace(/^\/api\/v1/, "").split("/").filter(Boolean)
    .map((part) => part.startsWith(":") ? "by_" + part.slice(1) : part.replace(/\W/g, "_"));
  return [route.method, ...words].join("_");
}

function queryParameters(schema: AnySchema): JsonObject[] {
  const converted = jsonSchema(schema);
  const properties = (converted.properties ?? {}) as Record<string, JsonObject>;
  const required = new Set((converted.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: "query",
    required: required.has(name),
    schema: property,
  }));
}

function operation(route: Route): JsonObject {
  const responses: JsonObject = {};
  for (const [status, declared] of Object.entries(route.responses)) {
    responses[status] = typeof declared === "string" ? { description: declared } : {
      description: declared.description,
      content: { "application/json": { schema: answerSchema(declared.schema) } },
    };
  }
  const distribution = route.access === "distribution";
  const guarded = route.access !== "public" && !distribution;
  if (route.body || route.query || route.textBody || route.fileBody) {
    responses["422"] = errorAnswer("A field of the body or query is invalid; `detail` names each");
  }
  if (route.params.length > 0) responses["404"] = errorAnswer("No such entity");
  if (guarded) {
    responses["401"] = errorAnswer("No valid bearer token");
    responses["403"] = errorAnswer(`Needs the ${route.access} role or higher`);
  }
  if (distribution) {
    responses["401"] = errorAnswer("No valid distribution key (admin tokens are refused here)");
    responses["403"] = errorAnswer(
      "The key is another project's, or not taken from the caller's address",
    );
  }
  responses["503"] = errorAnswer("A store did not answer; try again", {
    "Retry-After": {
      description: `Seconds to wait (${RETRY_AFTER_SECONDS})`,
      schema: { type: "integer" },
    },
  });

  const parameters: JsonObject[] = route.params.map((name) => ({
    name,
    in: "path",
    required: true,
    schema: { type: "string", format: "uuid" },
  }));
  if (route.query) parameters.push(...queryParameters(route.query));

  const result: JsonObject = {
    operationId: operationId(route),
    tags: [route.tag],
    summary: route.summary,
    description: [
      route.description,
      distribution
        ? "A distribution key of the project: `Authorization: Bearer oxd_…` or `X-API-Key`."
        : guarded
        ? `Role: ${route.access} or higher.`
        : "Public: no token needed.",
    ].filter(Boolean).join("\n\n"),
    security: distribution
      ? [{ distribution_bearer: [] }, { distribution_api_key: [] }]
      : guarded
      ? [{ bearer: [] }]
      : [],
    responses,
  };
  if (parameters.length > 0) result.parameters = parameters;
  if (route.body) {
    result.requestBody = {
      required: route.bodyOptional !== true,
      content: { "application/json": { schema: jsonSchema(route.body) } },
    };
  } else if (route.textBody) {
    result.requestBody = {
      required: true,
      description: route.textBody.description,
      content: { "text/plain": { schema: { type: "string" } } },
    };
  } else if (route.fileBody) {
    result.requestBody = {
      required: true,
      description: route.fileBody.description,
      content: { "application/octet-stream": { schema: { type: "string", format: "binary" } } },
    };
  }
  return result;
}

/** Routes served beside the registry's (the probes), described here. */
const PROBES: readonly [string, string, string][] = [
  ["/health", "The process is up and says who it is", "Process identity"],
  ["/live", "The event loop turns", "Alive"],
  ["/ready", "Every store the role needs answered the last heartbeat", "Ready (503 with reasons)"],
];

export function buildOpenApiDocument(routes: readonly Route[], version: string): JsonObject {
  const paths: Record<string, JsonObject> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    paths[path] ??= {};
    paths[path][route.method] = operation(route);
  }
  for (const [path, summary, answer] of PROBES) {
    paths[path] = {
      get: {
        operationId: `get_${path.slice(1)}`,
        tags: ["probes"],
        summary,
        security: [],
        responses: { "200": { description: answer } },
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Octoprox admin API",
      version,
      description: "Projects, credentials, connectors, proxies, users and tokens. " +
        "Authenticate with `Authorization: Bearer <token>`: a JWT from POST /api/v1/auth/login " +
        "or an API token from POST /api/v1/tokens.",
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: "A login JWT or an API token (oxp_…)",
        },
        distribution_bearer: {
          type: "http",
          scheme: "bearer",
          description: "A distribution key (oxd_…): the extraction routes only",
        },
        distribution_api_key: {
          type: "apiKey",
          in: "header",
          name: "X-API-Key",
          description: "A distribution key (oxd_…): the extraction routes only",
        },
      },
      schemas: { Error: ERROR_SCHEMA, ...answerComponents() },
    },
    paths,
  };
}
