/**
 * Descriptor templates: how a vendor's username, password, call URL or list item is written.
 *
 * A template is a string with `{name}` or `{scope.key}` placeholders, each with optional filters
 * (`{country|lower}`, `{item.user|or:anonymous}`), or a composed username: parts joined by a
 * separator, each part kept only `when` the value it names is present (`!name`: absent).
 *
 * Names: `credential.<key>`, `connector.<key>` (the configs), `auth.token`, `item.<key>` (a list
 * entry), the slot's or request's own: `session_id`, `index`, `port`, `country`, `state`,
 * `city`, `session_time`, and a provider-API fetch's `count`. A secret field is never written out here: it renders as the stored
 * placeholder `{key}`, which the one placeholder function (shared/feed/placeholders.ts) fills
 * where the row is used, so rows in Postgres never hold it.
 *
 * Templates compile once (cached by identity), since the gateway renders a dynamic-session row
 * on every request. Runs unchanged on Node and Deno.
 */
import * as v from "valibot";
import { usStateSlug } from "./us-states.ts";

export interface ComposedTemplate {
  separator: string;
  parts: { text: string; when?: string }[];
}
export type TemplateSpec = string | ComposedTemplate;

export function templateSpecSchema() {
  return v.union([
    v.string(),
    v.strictObject({
      separator: v.optional(v.string(), "-"),
      parts: v.pipe(
        v.array(v.strictObject({ text: v.string(), when: v.optional(v.string()) })),
        v.minLength(1),
      ),
    }),
  ], "a template is a string or { separator, parts }");
}

type Value = string | number | boolean | null | undefined;
type Scope = Readonly<Record<string, unknown>> | null | undefined;

/** What a template reads. */
export interface RenderContext {
  credential?: Scope;
  connector?: Scope;
  auth?: { token?: string } | null;
  item?: Scope;
  session_id?: string;
  index?: number;
  port?: number;
  country?: string;
  state?: string;
  city?: string;
  session_time?: number;
  /** A provider-API fetch: the proxies this call asks for. */
  count?: number;
}

export interface RenderOptions {
  /** Config keys (credential's or connector's) that are secret: rendered as `{key}`. */
  secrets?: ReadonlySet<string>;
  /** Told when a filter could not write a value (it renders empty). */
  unwritable?: () => void;
}

/**
 * The filters, by name; `arg` is what follows `:` (`or:fallback`). A filter answers undefined
 * for a value it cannot write: the render then counts as unwritable (`RenderOptions.unwritable`),
 * so a place the vendor's syntax has no word for is not served rather than sent garbled.
 */
const FILTERS: Readonly<
  Record<string, (value: string, arg: string | undefined) => string | undefined>
> = {
  lower: (s) => s.toLowerCase(),
  upper: (s) => s.toUpperCase(),
  urlencode: (s) => encodeURIComponent(s),
  /** The fallback when the value is empty. */
  or: (s, arg) => s === "" ? arg ?? "" : s,
  /** Without the `_` between words: `new_york` as `newyork`. */
  compact: (s) => s.replaceAll("_", ""),
  /** Words joined by `+` rather than `_`: `new_york` as `new+york`. */
  plus: (s) => s.replaceAll("_", "+"),
  /**
   * A US state's code as its name, lower case with `_` between words (`NY` as `new_york`, from
   * us-states.ts). A code the table lacks cannot be written: the request is not served by the
   * connector, rather than sent on to serve the whole country. Types using it restrict states
   * to `["US"]`.
   */
  us_state: (s) => s === "" ? "" : usStateSlug(s),
  /** A US state's code as the code itself (`NY`), refused when no US state has it. */
  us_state_code: (s) => s === "" ? "" : usStateSlug(s) === undefined ? undefined : s,
  /** The United Kingdom as `UK` rather than ISO's `GB` (NetNut's spelling). */
  gb_as_uk: (s) => s.toUpperCase() === "GB" ? "UK" : s,
  /** The argument when the value is present, else nothing: `{state|then:_sc}`. */
  then: (s, arg) => s === "" ? "" : arg ?? "",
};
export const FILTER_NAMES: readonly string[] = Object.keys(FILTERS);

interface Placeholder {
  path: readonly string[];
  filters: readonly { name: string; arg: string | undefined }[];
}
type Segment = string | Placeholder;
interface CompiledPart {
  segments: readonly Segment[];
  when: { path: readonly string[]; negate: boolean } | undefined;
}
interface Compiled {
  separator: string;
  parts: readonly CompiledPart[];
}

const PLACEHOLDER = /\{([^{}]*)\}/g;

function compileText(text: string): Segment[] {
  const segments: Segment[] = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    if (match.index > last) segments.push(text.slice(last, match.index));
    const [path, ...filters] = match[1].split("|");
    segments.push({
      path: path.trim().split("."),
      filters: filters.map((f) => {
        const colon = f.indexOf(":");
        return colon === -1
          ? { name: f.trim(), arg: undefined }
          : { name: f.slice(0, colon).trim(), arg: f.slice(colon + 1) };
      }),
    });
    last = match.index + match[0].length;
  }
  if (last < text.length) segments.push(text.slice(last));
  return segments;
}

const compiledStrings = new Map<string, Compiled>();
const compiledObjects = new WeakMap<ComposedTemplate, Compiled>();

function compile(spec: TemplateSpec): Compiled {
  if (typeof spec === "string") {
    let compiled = compiledStrings.get(spec);
    if (compiled === undefined) {
      compiled = { separator: "", parts: [{ segments: compileText(spec), when: undefined }] };
      // Strings come from descriptors, a bounded set; the bound is a guard, not a cache policy.
      if (compiledStrings.size > 10_000) compiledStrings.clear();
      compiledStrings.set(spec, compiled);
    }
    return compiled;
  }
  let compiled = compiledObjects.get(spec);
  if (compiled === undefined) {
    compiled = {
      separator: spec.separator,
      parts: spec.parts.map((part) => ({
        segments: compileText(part.text),
        when: part.when === undefined ? undefined : {
          negate: part.when.startsWith("!"),
          path: part.when.replace(/^!/, "").trim().split("."),
        },
      })),
    };
    compiledObjects.set(spec, compiled);
  }
  return compiled;
}

function lookup(context: RenderContext, path: readonly string[]): Value {
  const head = (context as Record<string, unknown>)[path[0]];
  if (path.length === 1) return head as Value;
  if (head === null || typeof head !== "object") return undefined;
  const scope = head as Record<string, unknown>;
  return Object.hasOwn(scope, path[1]) ? scope[path[1]] as Value : undefined;
}

function text(value: Value): string {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : String(value);
}

function isSecret(path: readonly string[], options: RenderOptions): boolean {
  return path.length === 2 && (path[0] === "credential" || path[0] === "connector") &&
    options.secrets !== undefined && options.secrets.has(path[1]);
}

/** Renders a template; a placeholder with nothing to read renders empty (or its `or:`). */
export function renderTemplate(
  spec: TemplateSpec,
  context: RenderContext,
  options: RenderOptions = {},
): string {
  const compiled = compile(spec);
  let out = "";
  let first = true;
  for (const part of compiled.parts) {
    if (part.when !== undefined) {
      const present = text(lookup(context, part.when.path)) !== "";
      if (present === part.when.negate) continue;
    }
    if (!first) out += compiled.separator;
    first = false;
    for (const segment of part.segments) {
      if (typeof segment === "string") {
        out += segment;
        continue;
      }
      if (isSecret(segment.path, options)) {
        out += `{${segment.path[1]}}`;
        continue;
      }
      let value = text(lookup(context, segment.path));
      for (const filter of segment.filters) {
        const next = FILTERS[filter.name](value, filter.arg);
        if (next === undefined) {
          options.unwritable?.();
          value = "";
          break;
        }
        value = next;
      }
      out += value;
    }
  }
  return out;
}

/** Every name a template reads (`country`, `credential.username`), its `when`s included. */
export function templateNames(spec: TemplateSpec): string[] {
  const names = new Set<string>();
  for (const part of compile(spec).parts) {
    if (part.when) names.add(part.when.path.join("."));
    for (const segment of part.segments) {
      if (typeof segment !== "string") names.add(segment.path.join("."));
    }
  }
  return [...names];
}

export interface TemplateScope {
  credential: ReadonlySet<string>;
  connector: ReadonlySet<string>;
  secrets: ReadonlySet<string>;
  /** The descriptor has a token flow, so `auth.token` is there to read. */
  auth: boolean;
  /** Bare names allowed here (`session_id`, `item`). */
  names: readonly string[];
}

/** What is wrong with a template: unknown names and filters, filters on a secret. */
export function templateIssues(spec: TemplateSpec, scope: TemplateScope): string[] {
  const issues: string[] = [];
  const compiled = compile(spec);
  const checkPath = (path: readonly string[]) => {
    const [head, key] = path;
    const name = path.join(".");
    if (head === "credential" || head === "connector") {
      if (path.length !== 2 || !scope[head].has(key)) {
        issues.push(`{${name}} names no ${head} field`);
      }
    } else if (head === "auth") {
      if (!scope.auth || name !== "auth.token") issues.push(`{${name}} needs an auth token flow`);
    } else if (head === "item") {
      if (!scope.names.includes("item") || path.length !== 2) {
        issues.push(`{${name}} is not readable here`);
      }
    } else if (path.length !== 1 || !scope.names.includes(head)) {
      issues.push(`{${name}} is not a name a template can read here`);
    }
  };
  for (const part of compiled.parts) {
    if (part.when) checkPath(part.when.path);
    for (const segment of part.segments) {
      if (typeof segment === "string") continue;
      checkPath(segment.path);
      for (const filter of segment.filters) {
        if (!Object.hasOwn(FILTERS, filter.name)) {
          issues.push(`filter ${filter.name} is not one of ${FILTER_NAMES.join(", ")}`);
        }
      }
      const [head, key] = segment.path;
      if (
        (head === "credential" || head === "connector") && scope.secrets.has(key) &&
        segment.filters.length > 0
      ) {
        issues.push(
          `{${segment.path.join(".")}} is secret: it is filled as stored, with no filter`,
        );
      }
    }
  }
  return issues;
}
