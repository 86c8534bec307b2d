/**
 * The configuration document: projects with their credentials, connectors and static proxies,
 * as one file describes them. Every entry is read by the admin API's own body schemas (a project
 * entry is a project create body plus its lists), so a file and the API accept the same fields
 * with the same rules; what joins entries (names unique in their list, a connector's credential
 * named in its project) is checked here, over the whole document.
 *
 * Identity is by name: a project by its name, a credential or connector by its name within its
 * project (both regardless of case), a proxy by scheme, host, port and username within its
 * connector. A rename is a delete and a create.
 */
import * as v from "valibot";
import type { FieldIssue } from "../../shared/errors.ts";
import { CreateProjectBody } from "../model/projects.ts";
import { CreateConnectorBody } from "../model/connectors.ts";
import { CreateCredentialBody, StaticConfig, staticProvider } from "../model/credentials.ts";
import { CreateProxyBody } from "../model/proxies.ts";
import { integerField, nameField } from "../model/common.ts";
import { formatProxyUrl, parseProxyUrl, proxyIdentity } from "../model/proxy-url.ts";

/** The format's version; a file of another is refused by name. */
export const CONFIG_VERSION = 1;

// The server's own fields of each body schema, which a file never sets.
const { id: _p1, created_at: _p2, updated_at: _p3, ...projectFields } = CreateProjectBody.entries;
const { id: _c1, ...credentialFields } = CreateCredentialBody.entries;
const {
  id: _k1,
  created_at: _k2,
  updated_at: _k3,
  pending_deletion: _k4,
  credential_id: _k5,
  provider: _k6,
  config: _k7,
  ...connectorFields
} = CreateConnectorBody.entries;

/**
 * A proxy: its address alone, or the address with a country. A proxy's metadata is not the
 * file's: an apply leaves it as it is.
 */
const ProxyEntry = v.union(
  [
    v.pipe(
      CreateProxyBody.entries.url,
      v.transform((address) => ({ address, country: undefined as string | null | undefined })),
    ),
    v.pipe(
      v.strictObject({
        url: CreateProxyBody.entries.url,
        country: CreateProxyBody.entries.country,
      }),
      v.transform((entry) => ({ address: entry.url, country: entry.country })),
    ),
  ],
  "must be a proxy address (scheme://host:port) or {url, country}",
);

// A file holds static lists: vendor and provider-API credentials and connectors are made through
// the api.
const CredentialEntry = v.strictObject({
  ...credentialFields,
  provider: staticProvider,
  config: v.optional(StaticConfig, {}),
});

const ConnectorEntry = v.strictObject({
  ...connectorFields,
  kind: v.optional(
    v.picklist(
      ["static"],
      "a configuration file holds static connectors only; make vendor and provider_api " +
        "connectors through the api",
    ),
    "static",
  ),
  /** A credential of the same project, by name. */
  credential: v.optional(v.nullable(nameField())),
  proxies: v.optional(v.array(ProxyEntry, "must be a list of proxies"), []),
});

const ProjectEntry = v.strictObject({
  ...projectFields,
  credentials: v.optional(v.array(CredentialEntry, "must be a list of credentials"), []),
  connectors: v.optional(v.array(ConnectorEntry, "must be a list of connectors"), []),
});

export const ConfigDocumentSchema = v.strictObject({
  version: v.literal(CONFIG_VERSION, `must be ${CONFIG_VERSION}`),
  /** The file's own revision: an apply of one lower than the last applied is refused. */
  revision: v.optional(integerField(1, Number.MAX_SAFE_INTEGER, "bigint")),
  projects: v.optional(v.array(ProjectEntry, "must be a list of projects"), []),
});

/** A document as written (the API's `config` body field, the file once its references are read). */
export type ConfigInput = v.InferInput<typeof ConfigDocumentSchema>;
/** A document as read: every entry normalised by the API's rules. */
export type ConfigDocument = v.InferOutput<typeof ConfigDocumentSchema>;
export type ProjectEntry = ConfigDocument["projects"][number];
export type ConnectorEntry = ProjectEntry["connectors"][number];
export type CredentialEntry = ProjectEntry["credentials"][number];
export type ProxyEntry = ConnectorEntry["proxies"][number];

/** Where a proxy sits in its connector's list: its identity, shown as its address. */
export function proxyKey(entry: ProxyEntry): string {
  return proxyIdentity(entry.address);
}

export function proxyLabel(entry: ProxyEntry): string {
  return formatProxyUrl(entry.address);
}

/** A list's items, or none when it is not a list (the schema names that). */
function listOf(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value)
    ? value.map((item) => typeof item === "object" && item !== null ? item : {})
    : [];
}

/** A text field trimmed and lower-cased, or undefined when it is not text. */
function keyOf(value: unknown): string | undefined {
  return typeof value === "string" ? value.trim().toLowerCase() : undefined;
}

/** A proxy entry's identity, or undefined when its address does not read. */
function proxyKeyOf(item: unknown): string | undefined {
  const url = typeof item === "string"
    ? item
    : typeof item === "object" && item !== null
    ? (item as Record<string, unknown>).url
    : undefined;
  if (typeof url !== "string") return undefined;
  const parsed = parseProxyUrl(url);
  return parsed.ok ? proxyIdentity(parsed.value) : undefined;
}

/** Entries of a list that name an earlier one again: an issue at the later one's field. */
function repeats(
  keys: readonly (string | undefined)[],
  field: (index: number) => string,
  what: string,
): FieldIssue[] {
  const seen = new Map<string, number>();
  const issues: FieldIssue[] = [];
  keys.forEach((key, index) => {
    if (key === undefined) return;
    const first = seen.get(key);
    if (first === undefined) seen.set(key, index);
    else issues.push({ field: field(index), message: `names the same ${what} as entry ${first}` });
  });
  return issues;
}

/**
 * The rules that join entries, with `prefix` before each path (`config` in the API): names and
 * usernames unique, a connector's credential named in its project, one domain list at a time
 * (the connectors service keeps the last one for single writes; it is checked here so a file's
 * every error is listed at once). Read from the document as written, so they are listed beside
 * the schema's own issues even when an entry fails those.
 */
export function documentIssues(input: unknown, prefix: string): FieldIssue[] {
  const at = (path: string) => prefix === "" ? path : `${prefix}.${path}`;
  const projects = listOf((input as Record<string, unknown> | null)?.projects);
  const issues: FieldIssue[] = [
    ...repeats(projects.map((p) => keyOf(p.name)), (i) => at(`projects.${i}.name`), "project"),
    ...repeats(
      projects.map((p) => keyOf(p.username)),
      (i) => at(`projects.${i}.username`),
      "proxy username",
    ),
  ];
  projects.forEach((project, p) => {
    const base = `projects.${p}`;
    const credentials = listOf(project.credentials);
    const connectors = listOf(project.connectors);
    issues.push(
      ...repeats(
        credentials.map((c) => keyOf(c.name)),
        (i) => at(`${base}.credentials.${i}.name`),
        "credential",
      ),
      ...repeats(
        connectors.map((c) => keyOf(c.name)),
        (i) => at(`${base}.connectors.${i}.name`),
        "connector",
      ),
    );
    const credentialNames = new Set(credentials.map((c) => keyOf(c.name)));
    connectors.forEach((connector, c) => {
      const path = `${base}.connectors.${c}`;
      const credential = keyOf(connector.credential);
      if (credential !== undefined && !credentialNames.has(credential)) {
        issues.push({
          field: at(`${path}.credential`),
          message: `names no credential of project ${String(project.name)} in this file`,
        });
      }
      if (listOf(connector.domain_allow).length > 0 && listOf(connector.domain_deny).length > 0) {
        issues.push({
          field: at(`${path}.domain_deny`),
          message:
            "domain_allow and domain_deny are mutually exclusive; set one and empty the other",
        });
      }
      issues.push(
        ...repeats(
          (Array.isArray(connector.proxies) ? connector.proxies : []).map(proxyKeyOf),
          (i) => at(`${path}.proxies.${i}`),
          "proxy (scheme, host, port and username)",
        ),
      );
    });
  });
  return issues;
}
