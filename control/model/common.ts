/**
 * Field schemas more than one resource reads. Bodies are strict objects (an unknown key is a 422
 * naming it, so a typo is caught rather than ignored); queries are plain objects of strings.
 */
import * as v from "valibot";

/** A display name: trimmed, 1 to `max` characters. */
export function nameField(max = 100) {
  return v.pipe(
    v.string("must be text"),
    v.trim(),
    v.minLength(1, "must not be empty"),
    v.maxLength(max, `must be at most ${max} characters`),
  );
}

export function textField(max: number) {
  return v.pipe(v.string("must be text"), v.maxLength(max, `must be at most ${max} characters`));
}

/** The range of a Postgres `integer` (32-bit) column. */
export const INT32_MAX = 2_147_483_647;
export const INT32_MIN = -2_147_483_648;

/**
 * A whole number from `min` to `max`, for a column of `column`'s type: its bounds are checked
 * against the column when the schema is made, so a bound past what the column holds (which
 * Postgres would answer with an error) fails at start, not on a request. A `bigint` column (or
 * a number kept in jsonb) takes safe integers, what a JavaScript number holds exactly.
 */
export function integerField(min: number, max: number, column: "integer" | "bigint" = "integer") {
  const [low, high] = column === "integer"
    ? [INT32_MIN, INT32_MAX]
    : [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
  if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || min < low || max > high) {
    throw new Error(`integerField(${min}, ${max}) is past what an ${column} column holds`);
  }
  const message = `must be a whole number from ${min} to ${max}`;
  return v.pipe(
    v.number(message),
    v.integer(message),
    v.minValue(min, message),
    v.maxValue(max, message),
  );
}

export const booleanField = v.boolean("must be true or false");

export const uuidField = v.pipe(v.string("must be an id"), v.uuid("must be an id (a uuid)"));

/** A field the server sets; sending it is an error rather than silently ignored. */
export function readOnly(message = "is read-only") {
  return v.optional(v.never(message));
}

/** A whole number in a query string, with its default; at most 10 digits, within 32 bits. */
export function queryInteger(min: number, max: number, defaultValue: number) {
  if (min < 0 || max > INT32_MAX) throw new Error(`queryInteger(${min}, ${max}) is past 32 bits`);
  const message = `must be a whole number from ${min} to ${max}`;
  return v.optional(
    v.pipe(
      v.string(message),
      v.description(`A whole number from ${min} to ${max}; ${defaultValue} when absent`),
      v.regex(/^\d{1,10}$/, message),
      v.transform(Number),
      v.minValue(min, message),
      v.maxValue(max, message),
    ),
    String(defaultValue),
  );
}

/** A JSON object of anything (metadata). valibot's record would take an array as well. */
export const jsonObjectField = v.custom<Record<string, unknown>>(
  (value) => typeof value === "object" && value !== null && !Array.isArray(value),
  "must be a JSON object",
);

/**
 * A body's fields under the names a service uses (`session_ttl_seconds` as
 * `sessionTtlSeconds`), by one table per resource that the routes and the configuration file
 * share; fields the table does not name are left out, and absent ones stay absent.
 */
export function renameFields(
  input: Readonly<Record<string, unknown>>,
  names: Readonly<Record<string, string>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [from, to] of Object.entries(names)) {
    if (input[from] !== undefined) out[to] = input[from];
  }
  return out;
}
