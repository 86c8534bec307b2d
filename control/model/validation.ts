/**
 * The one way a request's input is read: a valibot schema over the JSON body or the query, and
 * every issue at fault answered as a ValidationError naming `body.<path>` or `query.<path>`.
 * Before any schema, every value read (path parameters, query, body) is walked once for what
 * Postgres refuses whatever the field (core/unstorable.ts), so no route can forget it.
 */
import * as v from "valibot";
import { type FieldIssue, ValidationError } from "../../shared/errors.ts";

export type AnySchema = v.GenericSchema<unknown, unknown>;

export type Where = "body" | "query";

function fieldOf(where: string, issue: v.BaseIssue<unknown>): string {
  const keys = (issue.path ?? []).map((item) => String(item.key));
  return (where === "" ? keys : [where, ...keys]).join(".");
}

function messageOf(issue: v.BaseIssue<unknown>): string {
  // An object reports a key it does not know (expected "never") and a required key that is
  // missing with its own message; say which it is.
  if (issue.type === "strict_object" || issue.type === "strict_tuple" || issue.type === "object") {
    if (!issue.path?.length) return "must be a JSON object";
    return issue.expected === "never" ? "is not a known field" : "is required";
  }
  return issue.message;
}

/**
 * The issues of a failed parse, one per field (the first message for each), each path after
 * `where` (`body`, `query`, or "" for a document's own paths).
 */
export function fieldIssues(
  where: Where | "config" | "",
  issues: readonly v.BaseIssue<unknown>[],
): FieldIssue[] {
  const byField = new Map<string, FieldIssue>();
  for (const issue of issues) {
    const field = fieldOf(where, issue);
    if (!byField.has(field)) byField.set(field, { field, message: messageOf(issue) });
  }
  return [...byField.values()];
}

/** Parses input against a schema, or throws a ValidationError naming every field at fault. */
export function parseInput<TSchema extends AnySchema>(
  schema: TSchema,
  input: unknown,
  where: Where,
): v.InferOutput<TSchema> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  throw new ValidationError(fieldIssues(where, result.issues));
}

/** Reads a JSON object body; anything else is a 422 naming `body`. */
export function parseJsonObject(text: string): Record<string, unknown> {
  if (text.trim() === "") {
    throw new ValidationError([{ field: "body", message: "is required (a JSON object)" }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ValidationError([{ field: "body", message: "is not valid JSON" }]);
  }
  // Every body of this API is an object; an array would pass a strict object's key checks.
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ValidationError([{ field: "body", message: "must be a JSON object" }]);
  }
  return value as Record<string, unknown>;
}

/** valibot's path items for a reader's `[2].header.pattern`. */
function pathOf(input: unknown, path: string) {
  const keys = path.replace(/\[(\d+)\]/g, ".$1").split(".").filter((key) => key !== "");
  return keys.map((key) => ({
    type: "unknown" as const,
    origin: "value" as const,
    input,
    key,
    value: undefined,
  }));
}

/**
 * A field read by one of shared/'s readers (block rules, retry, domain rules), which say each
 * refusal's place below the field as `[2].header.pattern`: each becomes an issue at that path.
 */
export function readerField<T>(
  read: (raw: unknown, issues: { path: string; message: string }[]) => T | undefined,
) {
  return v.rawTransform<unknown, T>(({ dataset, addIssue, NEVER }) => {
    const issues: { path: string; message: string }[] = [];
    const value = read(dataset.value, issues);
    if (value !== undefined && issues.length === 0) return value;
    for (const issue of issues) {
      const path = pathOf(dataset.value, issue.path);
      addIssue({
        message: issue.message,
        ...(path.length === 0 ? {} : { path: path as [typeof path[0], ...typeof path] }),
      });
    }
    return NEVER;
  });
}
