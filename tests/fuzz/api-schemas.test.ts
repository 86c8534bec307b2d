/**
 * Properties of every body and query schema of the admin API, taken from the route registry (so
 * a route added later is covered without a line here). Input goes the way a request's does in
 * control/api/registry.ts: a body's text read as a JSON object, then checked for what no column
 * stores, then its schema; a query's values likewise. Whatever comes in, the only thing thrown is
 * a ValidationError, and each of its issues names a field (`body...`, `query...`) of the input or
 * of the schema, with a message.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { apiRoutes } from "../../control/api/app.ts";
import type { ApiDeps } from "../../control/api/deps.ts";
import type { Route } from "../../control/api/registry.ts";
import { parseInput, parseJsonObject } from "../../control/model/validation.ts";
import { unstorableIssues, unstorableQueryIssues } from "../../control/core/unstorable.ts";
import { ValidationError } from "../../shared/errors.ts";
import { check, mutatedText, outcome } from "./runs.ts";
import { schemaKeys, valueFor } from "./valibot-arbitrary.ts";

/**
 * The routes as the app declares them. Their handlers never run here, so the dependencies they
 * would use are a stand-in that answers anything with itself.
 */
function declaredRoutes(): Route[] {
  const anything: unknown = new Proxy(function () {}, {
    get: (_target, key) => (key === "then" ? undefined : anything),
    apply: () => anything,
    construct: () => anything as object,
  });
  const deps = new Proxy({ process: { version: "fuzz" } } as Record<string, unknown>, {
    get: (target, key) => target[key as string] ?? anything,
  });
  return apiRoutes(deps as unknown as ApiDeps);
}

const routes = declaredRoutes();
const withBody = routes.filter((route) => route.body !== undefined);
const withQuery = routes.filter((route) => route.query !== undefined);

const isValidationError = (error: unknown) => error instanceof ValidationError;

/** Every issue names `where` or a field under it, of the input or of the schema, with a message. */
function expectNamedIssues(
  error: Error,
  where: "body" | "query",
  input: Record<string, unknown> | undefined,
  schema: unknown,
): void {
  const issues = (error as ValidationError).issues;
  expect(issues.length).toBeGreaterThan(0);
  const known = new Set([...schemaKeys(schema), ...Object.keys(input ?? {})]);
  for (const issue of issues) {
    expect(issue.message.length).toBeGreaterThan(4);
    // A key may hold dots itself: the field is `where`, or `where.<key>` and a path below it.
    const named = issue.field === where ||
      [...known].some((key) =>
        issue.field === `${where}.${key}` || issue.field.startsWith(`${where}.${key}.`)
      );
    expect(named, `${issue.field}: ${issue.message}`).toBe(true);
  }
}

/** A body through the registry's steps: JSON object, storable text, schema. */
function readBody(route: Route, text: string): void {
  let json: Record<string, unknown> | undefined;
  const read = outcome(() => {
    json = parseJsonObject(text);
    const issues = unstorableIssues("body", json);
    if (issues.length > 0) throw new ValidationError(issues);
    return parseInput(route.body!, json, "body");
  }, isValidationError);
  if (!read.ok) expectNamedIssues(read.error, "body", json, route.body);
}

/** A query as Hono hands it over: each value text (a repeated key's first). */
function queryText(value: unknown): fc.Arbitrary<Record<string, string>> {
  return fc.constant(value).map((item) => {
    const out: Record<string, string> = {};
    if (typeof item !== "object" || item === null || Array.isArray(item)) return out;
    for (const [key, field] of Object.entries(item)) {
      if (field === undefined) continue;
      out[key] = typeof field === "string" ? field : JSON.stringify(field);
    }
    return out;
  });
}

describe("admin API bodies and queries (property)", () => {
  it("the registry declares the schemas this file covers", () => {
    // A stand-in for the dependencies must not hide the routes: the known ones are all there.
    expect(withBody.length).toBeGreaterThanOrEqual(20);
    expect(withQuery.length).toBeGreaterThanOrEqual(10);
  });

  for (const route of withBody) {
    it(`${route.method.toUpperCase()} ${route.path}: any body is read or refused with its fields named`, () => {
      const shapedText = valueFor(route.body).map((value) => JSON.stringify(value) ?? "");
      check(
        fc.property(mutatedText(shapedText), (text) => readBody(route, text)),
        0.5,
      );
    });
  }

  for (const route of withQuery) {
    it(`${route.method.toUpperCase()} ${route.path}: any query is read or refused with its fields named`, () => {
      check(
        fc.property(valueFor(route.query).chain(queryText), (query) => {
          const read = outcome(() => {
            const issues = unstorableQueryIssues(
              Object.fromEntries(Object.entries(query).map(([key, value]) => [key, [value]])),
            );
            if (issues.length > 0) throw new ValidationError(issues);
            return parseInput(route.query!, query, "query");
          }, isValidationError);
          if (!read.ok) expectNamedIssues(read.error, "query", query, route.query);
        }),
        0.5,
      );
    });
  }
});
