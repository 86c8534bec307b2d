/**
 * What Postgres refuses whatever the column: a NUL character in text or jsonb, a lone UTF-16
 * surrogate in jsonb (and silently replaced in text), an infinite number, JSON nested past any
 * sane depth. The api walks every value a request carries through here before its schema
 * (api/registry.ts), and so does any service that parses text into a document of its own (a
 * descriptor's YAML), so such input is a 422 naming its field rather than a database error.
 */
import type { FieldIssue } from "../../shared/errors.ts";

/**
 * How deep a JSON body may nest. Our deepest document (a configuration file) is a handful of
 * levels; far deeper input only costs stack on the way to Postgres (and jsonb has its own
 * depth limit), so it is refused here rather than failing there.
 */
export const MAX_JSON_DEPTH = 32;

type TextFault = "nul" | "surrogate";

const TEXT_MESSAGES: Readonly<Record<TextFault, { value: string; key: string }>> = {
  nul: {
    value: "must not contain the NUL character (U+0000)",
    key: "has a key holding the NUL character (U+0000)",
  },
  surrogate: {
    value: "must be valid Unicode text (it holds a lone UTF-16 surrogate)",
    key: "has a key holding a lone UTF-16 surrogate",
  },
};

/** A high surrogate not followed by a low one, or a low one not after a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why Postgres would refuse this text: text and jsonb both refuse NUL; jsonb refuses a lone
 * surrogate, and the driver would silently turn one into U+FFFD in a text column, so what is
 * kept would not be what was sent.
 */
function textFault(text: string): TextFault | undefined {
  if (text.includes("\u0000")) return "nul";
  if (LONE_SURROGATE.test(text)) return "surrogate";
  return undefined;
}

/** The issue of one text value (a path parameter, a query value) Postgres would refuse. */
export function unstorableText(field: string, text: string): FieldIssue | undefined {
  const fault = textFault(text);
  return fault ? { field, message: TEXT_MESSAGES[fault].value } : undefined;
}

/**
 * The issues of a query string: each value (a repeated key has several) and each key, named
 * `query.<key>`; a key at fault is named `query`, so the answer does not echo it.
 */
export function unstorableQueryIssues(queries: Readonly<Record<string, string[]>>): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const [key, values] of Object.entries(queries)) {
    const keyFault = textFault(key);
    if (keyFault) {
      issues.push({ field: "query", message: TEXT_MESSAGES[keyFault].key });
      continue;
    }
    const issue = values.map((value) => unstorableText(`query.${key}`, value)).find(Boolean);
    if (issue) issues.push(issue);
  }
  return issues;
}

/**
 * What no column can store, wherever it sits in a request's input: a NUL or a lone surrogate in
 * any string (object keys and the nested values of free JSON such as configs and metadata
 * included), a number JSON read as infinite, nesting deeper than MAX_JSON_DEPTH. One issue per
 * field, each named from `where` (`body.config.url`, `query.search`, `path.id`). A key at fault
 * is named by its object, so the answer does not echo the character it refuses.
 */
export function unstorableIssues(where: string, value: unknown): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const walk = (item: unknown, path: string, depth: number): void => {
    if (typeof item === "string") {
      const fault = textFault(item);
      if (fault) issues.push({ field: path, message: TEXT_MESSAGES[fault].value });
    } else if (typeof item === "number") {
      if (!Number.isFinite(item)) issues.push({ field: path, message: "is too large a number" });
    } else if (typeof item === "object" && item !== null) {
      if (depth >= MAX_JSON_DEPTH) {
        issues.push({ field: path, message: `nests deeper than ${MAX_JSON_DEPTH} levels` });
        return;
      }
      if (Array.isArray(item)) {
        item.forEach((element, index) => walk(element, `${path}.${index}`, depth + 1));
        return;
      }
      for (const [key, element] of Object.entries(item)) {
        const fault = textFault(key);
        if (fault) issues.push({ field: path, message: TEXT_MESSAGES[fault].key });
        else walk(element, `${path}.${key}`, depth + 1);
      }
    }
  };
  walk(value, where, 0);
  return issues;
}
