/**
 * What applying a document to the stored configuration would do: every create, update (with the
 * fields it changes) and, with `prune`, delete, as operations the apply runs and as the changes
 * a diff shows. The document is the desired state: a field it leaves out takes its default,
 * except secrets, which keep the stored value (a new project's password is generated).
 */
import type { FieldIssue } from "../../shared/errors.ts";
import type { ConnectorKind, Strategy } from "../../shared/roles.ts";
import { renameFields } from "../model/common.ts";
import { CONNECTOR_FIELD_NAMES } from "../model/connectors.ts";
import { PROJECT_FIELD_NAMES } from "../model/projects.ts";
import { CONNECTOR_DEFAULTS, type ConnectorFields } from "../services/connectors.ts";
import { secretFields } from "../services/credentials.ts";
import { changedFields, sameValue } from "../services/diff.ts";
import { generatePassword } from "../services/passwords.ts";
import { changesDecision } from "../traffic/rules.ts";
import {
  projectDefaults,
  type ProjectFields,
  projectIssues,
  settleProject,
} from "../services/projects.ts";
import type { ProxyAddress } from "../model/proxy-url.ts";
import {
  type ConfigDocument,
  type ConnectorEntry,
  type ProjectEntry,
  proxyKey,
  proxyLabel,
} from "./document.ts";
import type { ConfigState, ConnectorState, ProjectState } from "./state.ts";

export type ChangeAction = "create" | "update" | "delete";
export type ChangeSubject = "project" | "credential" | "connector" | "proxy";

/** One line of a diff. `fields` (body names) for an update. */
export interface ConfigChange {
  action: ChangeAction;
  kind: ChangeSubject;
  /** `shop`, `shop/credentials/login`, `shop/connectors/main/proxies/http://203.0.113.7:3128`. */
  path: string;
  fields?: string[];
}

export interface ProxyWrite {
  address: ProxyAddress;
  country: string | null;
}

export interface ConnectorPlan {
  /** Undefined for a connector to create. */
  id?: string;
  name: string;
  /** The fields to write (all of them for a create), the credential as a name. */
  fields?: Omit<ConnectorFields, "credentialId">;
  credential: string | null;
  createProxies: ProxyWrite[];
  updateProxies: { id: string; password: string | null; country: string | null }[];
  deleteProxies: string[];
  /** The traffic limit changed what decides a block: a decision is asked for after the commit. */
  trafficChanged: boolean;
  /** The rate limits of a stored connector changed: its quarantines are lifted after the commit. */
  rateLimitChanged: boolean;
}

export interface ProjectPlan {
  id?: string;
  name: string;
  fields?: ProjectFields;
  trafficChanged: boolean;
  createCredentials: { name: string; provider: string; config: Record<string, unknown> }[];
  updateCredentials: { id: string; name: string; config: Record<string, unknown> }[];
  deleteCredentials: string[];
  connectors: ConnectorPlan[];
  deleteConnectors: string[];
}

export interface ConfigPlan {
  projects: ProjectPlan[];
  deleteProjects: string[];
  changes: ConfigChange[];
  /** Entries of the document that need no write. */
  unchanged: number;
  /** Rules broken by the document against what is stored (paths after `config.`). */
  issues: FieldIssue[];
}

export interface PlanOptions {
  prune: boolean;
  defaultStrategy: Strategy;
}

const lower = (name: string) => name.toLowerCase();

/** Body names of the service fields a change touches. */
function bodyNames(fields: object, names: Readonly<Record<string, string>>): string[] {
  const byField = new Map(Object.entries(names).map(([body, field]) => [field, body]));
  return Object.keys(fields).map((field) => byField.get(field) ?? field);
}

function projectFieldsOf(
  entry: ProjectEntry,
  current: ProjectState | undefined,
  strategy: Strategy,
) {
  const { credentials: _c, connectors: _k, ...body } = entry;
  // The one rule of a project's interception fields, as the api's writes keep it.
  return settleProject({
    ...projectDefaults(strategy),
    // The stored password is kept when the file leaves it out; a new project gets one.
    password: current?.row.password ?? generatePassword(),
    ...renameFields(body, PROJECT_FIELD_NAMES),
  } as ProjectFields);
}

function connectorFieldsOf(entry: ConnectorEntry): Omit<ConnectorFields, "credentialId"> {
  const { proxies: _p, credential: _c, ...body } = entry;
  const { credentialId: _id, ...defaults } = CONNECTOR_DEFAULTS;
  return {
    ...defaults,
    ...renameFields(body, CONNECTOR_FIELD_NAMES),
  } as Omit<ConnectorFields, "credentialId">;
}

/** A credential's config as the file wants it: secret fields it leaves out keep their value. */
function credentialConfigOf(
  provider: string,
  config: Record<string, unknown>,
  stored: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(config)) if (value !== null) out[key] = value;
  for (const field of secretFields(provider)) {
    if (config[field] === undefined && stored?.[field] !== undefined) out[field] = stored[field];
  }
  return out;
}

class Planner {
  readonly plan: ConfigPlan = {
    projects: [],
    deleteProjects: [],
    changes: [],
    unchanged: 0,
    issues: [],
  };
  readonly #options: PlanOptions;

  constructor(options: PlanOptions) {
    this.#options = options;
  }

  change(action: ChangeAction, kind: ChangeSubject, path: string, fields?: string[]) {
    this.plan.changes.push(fields ? { action, kind, path, fields } : { action, kind, path });
  }

  project(entry: ProjectEntry, index: number, current: ProjectState | undefined): ProjectPlan {
    const fields = projectFieldsOf(entry, current, this.#options.defaultStrategy);
    for (const issue of projectIssues(fields)) {
      this.plan.issues.push({
        field: issue.field.replace(/^body\./, `config.projects.${index}.`),
        message: issue.message,
      });
    }
    const plan: ProjectPlan = {
      id: current?.row.id,
      name: entry.name,
      trafficChanged: false,
      createCredentials: [],
      updateCredentials: [],
      deleteCredentials: [],
      connectors: [],
      deleteConnectors: [],
    };
    if (!current) {
      plan.fields = fields;
      plan.trafficChanged = fields.trafficQuota !== null;
      this.change("create", "project", entry.name);
    } else {
      const changed = changedFields(current.row as unknown as ProjectFields, fields);
      if (changed) {
        plan.fields = fields;
        plan.trafficChanged = changesDecision(current.row.trafficQuota, fields.trafficQuota);
        this.change("update", "project", entry.name, bodyNames(changed, PROJECT_FIELD_NAMES));
      } else {
        this.plan.unchanged += 1;
      }
    }
    this.#credentials(entry, index, current, plan);
    entry.connectors.forEach((connector, c) => {
      plan.connectors.push(this.#connector(entry, index, c, connector, current));
    });
    if (current && this.#options.prune) {
      const named = new Set(entry.connectors.map((c) => lower(c.name)));
      for (const [key, connector] of current.connectors) {
        if (named.has(key)) continue;
        plan.deleteConnectors.push(connector.row.id);
        this.change("delete", "connector", `${entry.name}/connectors/${connector.row.name}`);
      }
      const credentials = new Set(entry.credentials.map((c) => lower(c.name)));
      for (const [key, credential] of current.credentials) {
        if (credentials.has(key)) continue;
        plan.deleteCredentials.push(credential.id);
        this.change("delete", "credential", `${entry.name}/credentials/${credential.name}`);
      }
    }
    return plan;
  }

  #credentials(
    entry: ProjectEntry,
    index: number,
    current: ProjectState | undefined,
    plan: ProjectPlan,
  ) {
    entry.credentials.forEach((credential, c) => {
      const stored = current?.credentials.get(lower(credential.name));
      const path = `${entry.name}/credentials/${credential.name}`;
      const config = credentialConfigOf(credential.provider, credential.config, stored?.config);
      if (!stored) {
        plan.createCredentials.push({
          name: credential.name,
          provider: credential.provider,
          config,
        });
        this.change("create", "credential", path);
        return;
      }
      if (stored.provider !== credential.provider) {
        this.plan.issues.push({
          field: `config.projects.${index}.credentials.${c}.provider`,
          message: "cannot be changed; name another credential",
        });
        return;
      }
      const fields = [
        ...(stored.name !== credential.name ? ["name"] : []),
        ...(sameValue(stored.config, config) ? [] : ["config"]),
      ];
      if (fields.length === 0) {
        this.plan.unchanged += 1;
        return;
      }
      plan.updateCredentials.push({ id: stored.id, name: credential.name, config });
      this.change("update", "credential", path, fields);
    });
  }

  #connector(
    project: ProjectEntry,
    p: number,
    c: number,
    entry: ConnectorEntry,
    currentProject: ProjectState | undefined,
  ): ConnectorPlan {
    const current = currentProject?.connectors.get(lower(entry.name));
    const path = `${project.name}/connectors/${entry.name}`;
    const fields = connectorFieldsOf(entry);
    const credential = entry.credential ?? null;
    const plan: ConnectorPlan = {
      id: current?.row.id,
      name: entry.name,
      credential,
      createProxies: [],
      updateProxies: [],
      deleteProxies: [],
      trafficChanged: false,
      rateLimitChanged: false,
    };
    if (!current) {
      plan.fields = fields;
      plan.trafficChanged = fields.trafficConfig !== null;
      this.change("create", "connector", path);
    } else if (current.row.kind !== fields.kind) {
      this.plan.issues.push({
        field: `config.projects.${p}.connectors.${c}.kind`,
        message: `cannot be changed (the stored connector is ${current.row.kind}); name another ` +
          "connector",
      });
    } else {
      const { kind: _kind, ...editable } = fields;
      const changed = changedFields(current.row as unknown as ConnectorFields, editable) ?? {};
      const names = bodyNames(changed, CONNECTOR_FIELD_NAMES);
      const storedCredential = current.row.credentialId === null ? null : [
        ...(currentProject?.credentials.values() ?? []),
      ].find((row) => row.id === current.row.credentialId)?.name ?? null;
      const credentialMoved = lower(storedCredential ?? "") !== lower(credential ?? "");
      if (credentialMoved) names.push("credential");
      if (names.length > 0) {
        plan.fields = { ...fields, kind: current.row.kind as ConnectorKind };
        plan.trafficChanged = changesDecision(current.row.trafficConfig, fields.trafficConfig);
        plan.rateLimitChanged = "rateLimitConfig" in changed;
        this.change("update", "connector", path, names);
      } else {
        this.plan.unchanged += 1;
      }
    }
    this.#proxies(entry, current, plan, path);
    return plan;
  }

  #proxies(
    entry: ConnectorEntry,
    current: ConnectorState | undefined,
    plan: ConnectorPlan,
    path: string,
  ) {
    const named = new Set<string>();
    for (const proxy of entry.proxies) {
      const key = proxyKey(proxy);
      named.add(key);
      const stored = current?.proxies.get(key);
      const label = `${path}/proxies/${proxyLabel(proxy)}`;
      const country = proxy.country ?? null;
      if (!stored) {
        plan.createProxies.push({ address: proxy.address, country });
        this.change("create", "proxy", label);
        continue;
      }
      // A password the file leaves out is kept.
      const password = proxy.address.password ?? stored.password;
      const fields = [
        ...(password !== stored.password ? ["password"] : []),
        ...(country !== stored.country ? ["country"] : []),
      ];
      if (fields.length === 0) {
        this.plan.unchanged += 1;
        continue;
      }
      plan.updateProxies.push({ id: stored.id, password, country });
      this.change("update", "proxy", label, fields);
    }
    if (current && this.#options.prune) {
      for (const [key, stored] of current.proxies) {
        if (named.has(key)) continue;
        plan.deleteProxies.push(stored.id);
        this.change(
          "delete",
          "proxy",
          `${path}/proxies/${
            proxyLabel({ address: { ...stored, password: null } as ProxyAddress, country: null })
          }`,
        );
      }
    }
  }
}

/** Plans a document against the stored state. */
export function planConfig(
  state: ConfigState,
  document: ConfigDocument,
  options: PlanOptions,
): ConfigPlan {
  const planner = new Planner(options);
  const named = new Set(document.projects.map((project) => lower(project.name)));
  // A username the file gives must not be a project's the file keeps without naming it.
  const kept = new Map<string, string>();
  for (const [key, project] of state) {
    if (!named.has(key) && !options.prune) kept.set(lower(project.row.username), project.row.name);
  }
  document.projects.forEach((entry, index) => {
    const holder = kept.get(lower(entry.username));
    if (holder !== undefined) {
      planner.plan.issues.push({
        field: `config.projects.${index}.username`,
        message: `is the proxy username of project ${holder}, which this file does not name`,
      });
    }
    planner.plan.projects.push(planner.project(entry, index, state.get(lower(entry.name))));
  });
  if (options.prune) {
    for (const [key, project] of state) {
      if (named.has(key)) continue;
      planner.plan.deleteProjects.push(project.row.id);
      planner.change("delete", "project", project.row.name);
    }
  }
  return planner.plan;
}
