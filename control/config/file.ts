/**
 * A configuration file: YAML or JSON (JSON is YAML), read into a document with its secret
 * references resolved, or every problem it has, each with its path and line. The CLI reads a
 * file with the environment and files of the machine it runs on; an api reads its
 * OCTOPROX_CONFIG_FILE with its own.
 *
 * Secrets are never written in clear: a project's password, a credential's secret fields and a
 * proxy address's password are `${ENV_NAME}` or `file:/path` references (a proxy's password as
 * `scheme://user:${NAME}@host:port`). Left out, a stored secret is kept. `${NAME}` reads an
 * environment variable in any text of the file; `$${` writes a literal `${`.
 */
import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import * as v from "valibot";
import { isMap, isSeq, LineCounter, parseDocument, stringify } from "yaml";
import type { FieldIssue } from "../../shared/errors.ts";
import { errorText } from "../../shared/errors.ts";
import { fieldIssues } from "../model/validation.ts";
import { secretFields } from "../services/credentials.ts";
import {
  type ConfigDocument,
  ConfigDocumentSchema,
  type ConfigInput,
  documentIssues,
} from "./document.ts";

/** A problem of a file: its path in the document (`projects.0.connectors.1.weight`), its line. */
export interface FileIssue extends FieldIssue {
  line?: number;
}

export interface ReadOptions {
  /** Where `${NAME}` is looked up; process.env by default. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where a relative `file:` path starts; the working directory by default. */
  baseDir?: string;
}

export type ReadResult =
  | {
    ok: true;
    config: ConfigDocument;
    input: ConfigInput;
    /** The line a path of the document starts on, for problems found later (by an apply). */
    lineOf(field: string): number | undefined;
  }
  | { ok: false; issues: FileIssue[] };

const REFERENCE = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
const WHOLE_REFERENCE = /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/;
const FILE_PREFIX = "file:";

const IN_CLEAR = "is a secret written in clear: write it as ${ENV_NAME} or file:/path " +
  "(or leave it out to keep the stored one)";

type Path = readonly (string | number)[];

class Resolver {
  readonly issues: FieldIssue[] = [];
  readonly #env: Readonly<Record<string, string | undefined>>;
  readonly #baseDir: string;

  constructor(options: ReadOptions) {
    this.#env = options.env ?? process.env;
    this.#baseDir = options.baseDir ?? process.cwd();
  }

  #fail(path: Path, message: string): undefined {
    this.issues.push({ field: path.join("."), message });
    return undefined;
  }

  /** `${NAME}` read in a text; `encode` escapes what it reads (a password inside an address). */
  interpolate(text: string, path: Path, encode?: (value: string) => string): string {
    return text.replace(REFERENCE, (match, name: string | undefined) => {
      if (name === undefined) return "${"; // `$${`
      const value = this.#env[name];
      if (value === undefined) {
        this.#fail(path, `reads the environment variable ${name}, which is not set`);
        return match;
      }
      return encode ? encode(value) : value;
    });
  }

  /** A secret field: a whole `${NAME}` or `file:` reference, nothing in clear. */
  secret(value: unknown, path: Path): unknown {
    if (typeof value !== "string" || value === "") return value;
    if (value.startsWith(FILE_PREFIX)) return this.#readFile(value.slice(FILE_PREFIX.length), path);
    if (!WHOLE_REFERENCE.test(value)) return this.#fail(path, IN_CLEAR);
    return this.interpolate(value, path);
  }

  #readFile(name: string, path: Path): string | undefined {
    const file = isAbsolute(name) ? name : resolve(this.#baseDir, name);
    try {
      // A secret file usually ends in a newline its writer added; the secret does not.
      return readFileSync(file, "utf8").replace(/\r?\n$/, "");
    } catch (error) {
      return this.#fail(path, `cannot read ${FILE_PREFIX}${name}: ${errorText(error)}`);
    }
  }

  /** A proxy address: its password only as a reference; `file:` for the whole address. */
  proxyUrl(value: unknown, path: Path): unknown {
    if (typeof value !== "string") return value;
    if (value.startsWith(FILE_PREFIX) || WHOLE_REFERENCE.test(value)) {
      return this.secret(value, path);
    }
    const schemeEnd = value.indexOf("://");
    const at = value.lastIndexOf("@");
    if (schemeEnd < 0 || at < schemeEnd) return this.interpolate(value, path);
    const userinfo = value.slice(schemeEnd + 3, at);
    const colon = userinfo.indexOf(":");
    if (colon < 0) return this.interpolate(value, path);
    const password = userinfo.slice(colon + 1);
    if (password !== "" && !WHOLE_REFERENCE.test(password)) return this.#fail(path, IN_CLEAR);
    const head = this.interpolate(value.slice(0, schemeEnd + 3 + colon + 1), path);
    const secret = this.interpolate(password, path, encodeURIComponent);
    return head + secret + this.interpolate(value.slice(at), path);
  }

  /** Every other text: `${NAME}` read, nothing else. */
  plain(value: unknown, path: Path): unknown {
    if (typeof value === "string") return this.interpolate(value, path);
    if (Array.isArray(value)) return value.map((item, i) => this.plain(item, [...path, i]));
    if (isObject(value)) {
      return Object.fromEntries(
        Object.entries(value).map(([key, item]) => [key, this.plain(item, [...path, key])]),
      );
    }
    return value;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Resolves every reference of a document as written, at the places secrets may be. */
function resolveReferences(raw: unknown, resolver: Resolver): unknown {
  if (!isObject(raw) || !Array.isArray(raw.projects)) return resolver.plain(raw, []);
  const projects = raw.projects.map((project: unknown, p) => {
    const at = ["projects", p];
    if (!isObject(project)) return resolver.plain(project, at);
    const { password, credentials, connectors, ...rest } = project;
    const out: Record<string, unknown> = resolver.plain(rest, at) as Record<string, unknown>;
    if (password !== undefined) out.password = resolver.secret(password, [...at, "password"]);
    if (credentials !== undefined) {
      out.credentials = !Array.isArray(credentials)
        ? credentials
        : credentials.map((credential: unknown, c) => {
          const cAt = [...at, "credentials", c];
          if (!isObject(credential) || !isObject(credential.config)) {
            return resolver.plain(credential, cAt);
          }
          const secrets = new Set(
            secretFields(String(credential.provider ?? "").trim().toLowerCase()),
          );
          const config = Object.fromEntries(
            Object.entries(credential.config).map(([key, value]) => {
              const path = [...cAt, "config", key];
              return [
                key,
                secrets.has(key) ? resolver.secret(value, path) : resolver.plain(value, path),
              ];
            }),
          );
          return { ...(resolver.plain({ ...credential, config: {} }, cAt) as object), config };
        });
    }
    if (connectors !== undefined) {
      out.connectors = !Array.isArray(connectors)
        ? connectors
        : connectors.map((connector: unknown, c) => {
          const cAt = [...at, "connectors", c];
          if (!isObject(connector) || !Array.isArray(connector.proxies)) {
            return resolver.plain(connector, cAt);
          }
          const proxies = connector.proxies.map((proxy: unknown, i) => {
            const path = [...cAt, "proxies", i];
            if (typeof proxy === "string") return resolver.proxyUrl(proxy, path);
            if (!isObject(proxy)) return proxy;
            const { url, ...others } = proxy;
            return {
              ...(resolver.plain(others, path) as object),
              url: resolver.proxyUrl(url, [...path, "url"]),
            };
          });
          return { ...(resolver.plain({ ...connector, proxies: [] }, cAt) as object), proxies };
        });
    }
    return out;
  });
  return { ...(resolver.plain({ ...raw, projects: [] }, []) as object), projects };
}

/** Reads a configuration file's text: the document, or every problem with its line. */
export function parseConfigFile(text: string, options: ReadOptions = {}): ReadResult {
  const lines = new LineCounter();
  const yaml = parseDocument(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true });
  if (yaml.errors.length > 0) {
    return {
      ok: false,
      issues: yaml.errors.map((error) => ({
        field: "",
        message: error.message.split("\n")[0],
        line: error.linePos?.[0]?.line,
      })),
    };
  }
  const lineOf = (field: string): number | undefined => {
    const path = field === "" ? [] : field.split(".").map((k) => /^\d+$/.test(k) ? Number(k) : k);
    // The deepest node the path reaches (a missing key is reported at its parent).
    for (let depth = path.length; depth >= 0; depth--) {
      const node = depth === 0 ? yaml.contents : yaml.getIn(path.slice(0, depth), true);
      const range = (node as { range?: [number, number, number] } | null)?.range;
      if (range) return lines.linePos(range[0]).line;
    }
    return undefined;
  };
  const located = (issues: readonly FieldIssue[]): ReadResult => ({
    ok: false,
    issues: issues.map((issue) => ({ ...issue, line: lineOf(issue.field) })),
  });

  let raw: unknown;
  try {
    raw = yaml.toJS();
  } catch (error) {
    // Parsed, yet not a value: an alias to no anchor, or aliases past the parser's bound.
    return { ok: false, issues: [{ field: "", message: (error as Error).message.split("\n")[0] }] };
  }
  if (!isMap(yaml.contents) && !(raw === null || raw === undefined)) {
    return located([{ field: "", message: "must be a mapping with version and projects" }]);
  }
  if (isMap(yaml.contents) && yaml.contents.has("projects")) {
    const projects = yaml.contents.get("projects", true);
    if (projects !== null && !isSeq(projects)) {
      return located([{ field: "projects", message: "must be a list of projects" }]);
    }
  }
  const resolver = new Resolver(options);
  const resolved = resolveReferences(raw ?? {}, resolver);
  const checked = checkConfig(resolved, "");
  // A reference that failed leaves its field unread, which the schema names again (or names
  // its entry): the reference's own message says more.
  const failed = resolver.issues.map((issue) => issue.field);
  const related = (field: string) =>
    failed.some((f) => f === field || f.startsWith(`${field}.`) || field.startsWith(`${f}.`));
  const issues = [
    ...resolver.issues,
    ...(checked.ok ? [] : checked.issues.filter((issue) => !related(issue.field))),
  ];
  if (issues.length > 0 || !checked.ok) return located(dedupe(issues));
  return { ok: true, config: checked.config, input: resolved as ConfigInput, lineOf };
}

/** One issue per field: a reference that failed also fails the schema. */
function dedupe(issues: readonly FieldIssue[]): FieldIssue[] {
  const byField = new Map<string, FieldIssue>();
  for (const issue of issues) if (!byField.has(issue.field)) byField.set(issue.field, issue);
  return [...byField.values()];
}

/** Checks a document (references already read) by the API's rules; paths after `prefix`. */
export function checkConfig(
  input: unknown,
  prefix: "config" | "",
): { ok: true; config: ConfigDocument } | { ok: false; issues: FieldIssue[] } {
  const parsed = v.safeParse(ConfigDocumentSchema, input, { abortEarly: false });
  const issues = dedupe([
    ...(parsed.success ? [] : fieldIssues(prefix, parsed.issues)),
    ...documentIssues(input, prefix),
  ]);
  if (!parsed.success || issues.length > 0) return { ok: false, issues };
  return { ok: true, config: parsed.output };
}

const EXPORT_HEADER = [
  "Octoprox configuration. Apply with `octoprox apply -f <file>`.",
  "Secrets are not exported: an entry without its password keeps the stored one.",
  "Set one as ${ENV_NAME} or file:/path (a proxy's as scheme://user:${NAME}@host:port).",
];

/** A document as a file: YAML with a header comment, or JSON. */
export function formatConfigFile(config: ConfigInput, format: "yaml" | "json"): string {
  if (format === "json") return `${JSON.stringify(config, null, 2)}\n`;
  const body = stringify(config, { lineWidth: 0 });
  return `${EXPORT_HEADER.map((line) => `# ${line}`).join("\n")}\n${body}`;
}
