/**
 * The configuration as Postgres holds it: every project with its credentials, connectors and
 * proxies, read in one transaction, and what is made of it: the document `export` writes
 * (secrets left out, defaults left out) and the fingerprint a diff hands to its apply.
 *
 * The fingerprint is an HMAC (keyed by the internal secret) of the whole configuration, secrets
 * included, so any change to it, a password's too, changes the fingerprint, and the fingerprint
 * tells nothing of the secrets.
 */
import { createHmac } from "node:crypto";
import { asc, eq } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { connectors, credentials, projects, proxies } from "../../db/schema.ts";
import type { Strategy } from "../../shared/roles.ts";
import { CONNECTOR_FIELD_NAMES } from "../model/connectors.ts";
import { PROJECT_FIELD_NAMES } from "../model/projects.ts";
import { CONNECTOR_DEFAULTS, type ConnectorRow } from "../services/connectors.ts";
import { sameValue } from "../services/diff.ts";
import { type CredentialRow, secretFields } from "../services/credentials.ts";
import { projectDefaults, type ProjectRow } from "../services/projects.ts";
import { formatProxyUrl, type ProxyAddress, proxyIdentity } from "../model/proxy-url.ts";
import { CONFIG_VERSION, type ConfigInput } from "./document.ts";

export type ProxyState = Pick<
  typeof proxies.$inferSelect,
  "id" | "scheme" | "host" | "port" | "username" | "password" | "country"
>;

export interface ConnectorState {
  row: ConnectorRow;
  /** By identity (scheme, host, port, username), in creation order. */
  proxies: Map<string, ProxyState>;
}

export interface ProjectState {
  row: ProjectRow;
  /** By lower-cased name, in creation order. */
  credentials: Map<string, CredentialRow>;
  connectors: Map<string, ConnectorState>;
}

/** Every project by lower-cased name, in creation order. */
export type ConfigState = Map<string, ProjectState>;

/**
 * Reads the whole configuration inside `tx` (one snapshot of it under repeatable read). A file
 * holds static credentials and connectors only: vendor ones are the api's, so they are not read
 * here, never exported, compared or pruned (their rows go only with their project).
 */
export async function readConfigState(tx: Tx): Promise<ConfigState> {
  const [projectRows, credentialRows, connectorRows, proxyRows] = [
    await tx.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.id)),
    await tx.select().from(credentials).where(eq(credentials.provider, "static"))
      .orderBy(asc(credentials.createdAt), asc(credentials.id)),
    await tx.select().from(connectors).where(eq(connectors.kind, "static"))
      .orderBy(asc(connectors.createdAt), asc(connectors.id)),
    await tx.select({
      id: proxies.id,
      connectorId: proxies.connectorId,
      scheme: proxies.scheme,
      host: proxies.host,
      port: proxies.port,
      username: proxies.username,
      password: proxies.password,
      country: proxies.country,
    }).from(proxies).orderBy(asc(proxies.createdAt), asc(proxies.id)),
  ];
  const state: ConfigState = new Map();
  const byId = new Map<string, ProjectState>();
  for (const row of projectRows) {
    const project = { row, credentials: new Map(), connectors: new Map() };
    state.set(row.name.toLowerCase(), project);
    byId.set(row.id, project);
  }
  for (const row of credentialRows) {
    byId.get(row.projectId)?.credentials.set(row.name.toLowerCase(), row);
  }
  const connectorsById = new Map<string, ConnectorState>();
  for (const row of connectorRows) {
    const connector = { row, proxies: new Map() };
    byId.get(row.projectId)?.connectors.set(row.name.toLowerCase(), connector);
    connectorsById.set(row.id, connector);
  }
  for (const { connectorId, ...proxy } of proxyRows) {
    connectorsById.get(connectorId)?.proxies.set(proxyIdentity(proxy), proxy);
  }
  return state;
}

/** A row's fields under their body names, those equal to their default left out. */
function bodyFields(
  row: Readonly<Record<string, unknown>>,
  names: Readonly<Record<string, string>>,
  defaults: Readonly<Record<string, unknown>>,
  always: readonly string[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [body, field] of Object.entries(names)) {
    const value = row[field];
    if (always.includes(body) || !(field in defaults) || !sameValue(value, defaults[field])) {
      out[body] = value;
    }
  }
  return out;
}

export interface ExportOptions {
  defaultStrategy: Strategy;
  /** Secrets in clear: only for the fingerprint's input, never for a file. */
  secrets?: boolean;
}

/** The configuration as a document; without `secrets`, what `export` writes. */
export function exportConfig(state: ConfigState, options: ExportOptions): ConfigInput {
  const secrets = options.secrets === true;
  const projectDefaultsNow = projectDefaults(options.defaultStrategy) as Record<string, unknown>;
  const documentProjects = [...state.values()].map((project) => {
    const { password: _password, ...projectNames } = PROJECT_FIELD_NAMES;
    const fields = bodyFields(project.row, projectNames, projectDefaultsNow, ["name", "username"]);
    const credentialNames = new Map(
      [...project.credentials.values()].map((row) => [row.id, row.name]),
    );
    return {
      ...fields,
      ...(secrets ? { password: project.row.password } : {}),
      credentials: [...project.credentials.values()].map((row) => {
        const hidden = new Set(secrets ? [] : secretFields(row.provider));
        const config = Object.fromEntries(
          Object.entries(row.config).filter(([key]) => !hidden.has(key)),
        );
        return { name: row.name, provider: row.provider, config };
      }),
      connectors: [...project.connectors.values()].map(({ row, proxies }) => {
        const { credential_id: _credential, ...connectorNames } = CONNECTOR_FIELD_NAMES;
        const connector = bodyFields(
          row,
          connectorNames,
          CONNECTOR_DEFAULTS as Record<string, unknown>,
          ["name", "kind"],
        );
        return {
          ...connector,
          ...(row.credentialId === null
            ? {}
            : { credential: credentialNames.get(row.credentialId) }),
          proxies: [...proxies.values()].map((proxy) => {
            const url = formatProxyUrl(proxy as Omit<ProxyAddress, "password">);
            const withSecret = secrets && proxy.password !== null
              ? `${url}\u0000${proxy.password}`
              : url;
            return proxy.country === null
              ? withSecret
              : { url: withSecret, country: proxy.country };
          }),
        };
      }),
    };
  });
  return { version: CONFIG_VERSION, projects: documentProjects } as unknown as ConfigInput;
}

/** The configuration's fingerprint: HMAC-SHA256 of all of it, secrets included, as hex. */
export function configFingerprint(state: ConfigState, options: ExportOptions & { key: string }) {
  const whole = exportConfig(state, { ...options, secrets: true });
  return createHmac("sha256", options.key).update(JSON.stringify(whole)).digest("hex");
}
