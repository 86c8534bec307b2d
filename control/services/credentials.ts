/**
 * Credentials: what a connector logs in with, per project. The `static` provider takes an
 * optional default username and password for a static list's proxies; `provider_api` takes a
 * flat object of secrets its connectors' fetch templates read (`{credential.<key>}`); a
 * descriptor provider takes its descriptor's credential fields, checked against it, and is
 * checked with the vendor (when the descriptor says how) before the write's transaction opens,
 * on create and when an edit changes a field; a cloud credential (aws, gcp, azure) is checked
 * with its cloud the same way, and on an edit each connector using it besides. Secret fields never leave the api in clear:
 * answers carry a mask, and a mask sent back means "unchanged".
 */
import { and, asc, eq, sql } from "drizzle-orm";
import * as v from "valibot";
import type { Tx } from "../../db/client.ts";
import { connectors, credentials } from "../../db/schema.ts";
import {
  ConflictError,
  type FieldIssue,
  NotFoundError,
  ValidationError,
} from "../../shared/errors.ts";
import { checkCredentialConfig } from "../../shared/vendors/fields.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { ChangeKind, ConnectorKind } from "../../shared/roles.ts";
import {
  ProviderApiCredentialConfig,
  STATIC_PROVIDER,
  StaticConfig,
} from "../model/credentials.ts";
import { isMasked, maskSecrets } from "../model/secrets.ts";
import { credentialKeysRead, PROVIDER_API, readProviderApiConfig } from "../provider-api/config.ts";
import { refreshCustom } from "../vendors/catalogue.ts";
import {
  CLOUD_CREDENTIAL_SCHEMAS,
  CLOUD_CREDENTIAL_SECRETS,
  isCloudProvider,
} from "../model/cloud.ts";
import { verifyCloudConnector, verifyCloudCredential } from "../cloud/verify.ts";
import { verifyCredential } from "../vendors/verify.ts";
import { changedFields, sameValue } from "./diff.ts";
import { missingIn, requireProject } from "./scope.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";

export type CredentialRow = typeof credentials.$inferSelect;
export type CredentialConfig = Record<string, unknown>;

/** The shipped descriptors only: for readers without a process registry (the config file). */
const SHIPPED = new ProviderRegistry();

/**
 * Config fields that hold secrets: the static provider's password, every key of a provider_api
 * credential, a descriptor's secret fields. A provider no descriptor has any more keeps every
 * field of `config` hidden.
 */
export function secretFields(
  provider: string,
  config: CredentialConfig = {},
  registry: ProviderRegistry = SHIPPED,
): readonly string[] {
  if (provider === STATIC_PROVIDER) return ["password"];
  if (provider === PROVIDER_API) return Object.keys(config);
  if (isCloudProvider(provider)) return CLOUD_CREDENTIAL_SECRETS[provider];
  const entry = registry.get(provider);
  if (entry === undefined) return Object.keys(config);
  return entry.descriptor.credential_fields.filter((f) => f.secret).map((f) => f.key);
}

/** The config as answers show it, and which secrets are set. */
export function maskConfig(
  provider: string,
  config: CredentialConfig,
  registry?: ProviderRegistry,
): { config: CredentialConfig; secretsSet: Record<string, boolean> } {
  return maskSecrets(config, secretFields(provider, config, registry));
}

export interface NewCredential {
  name: string;
  provider: string;
  config: CredentialConfig;
}

export interface CredentialPatch {
  name?: string;
  /** Merged key by key into the stored config; null removes a key, the mask keeps a secret. */
  config?: Record<string, unknown>;
}

const credentialChange = (id: string) => ({ kind: ChangeKind.credential, ref: id });

function withoutNulls(config: CredentialConfig): CredentialConfig {
  return Object.fromEntries(Object.entries(config).filter(([, value]) => value !== null));
}

export function listCredentials(deps: ServiceDeps, projectId: string): Promise<CredentialRow[]> {
  return read(deps, async (db) => {
    await requireProject(db, projectId);
    return db.select().from(credentials).where(eq(credentials.projectId, projectId))
      .orderBy(asc(credentials.createdAt), asc(credentials.id));
  });
}

export function getCredential(
  deps: ServiceDeps,
  projectId: string,
  id: string,
): Promise<CredentialRow> {
  return read(deps, async (db) => {
    await requireProject(db, projectId);
    const [row] = await db.select().from(credentials)
      .where(and(eq(credentials.projectId, projectId), eq(credentials.id, id)));
    if (!row) throw new NotFoundError("Credential");
    return row;
  });
}

/**
 * A config checked against its provider (the static schema, or the descriptor's fields with
 * their defaults): the config to store, or a ValidationError naming `body.config.<key>`.
 */
async function checkedConfig(
  deps: ServiceDeps,
  provider: string,
  config: CredentialConfig,
): Promise<CredentialConfig> {
  if (provider === STATIC_PROVIDER || provider === PROVIDER_API || isCloudProvider(provider)) {
    const parsed = provider === STATIC_PROVIDER
      ? v.safeParse(StaticConfig, config)
      : isCloudProvider(provider)
      ? v.safeParse(CLOUD_CREDENTIAL_SCHEMAS[provider], withoutNulls(config))
      : v.safeParse(ProviderApiCredentialConfig, withoutNulls(config));
    if (!parsed.success) {
      throw new ValidationError(parsed.issues.map((issue): FieldIssue => {
        const path = v.getDotPath(issue);
        return { field: path ? `body.config.${path}` : "body.config", message: issue.message };
      }));
    }
    return withoutNulls(parsed.output);
  }
  await read(deps, (db) => refreshCustom(db, deps.providers));
  const entry = deps.providers.get(provider);
  if (entry === undefined) {
    throw new ValidationError([{
      field: "body.provider",
      message: `no provider ${provider}: use static or a provider of GET /api/v1/providers`,
    }]);
  }
  const checked = checkCredentialConfig(entry.descriptor, withoutNulls(config));
  if (checked.issues.length > 0) {
    throw new ValidationError(
      checked.issues.map((issue) => ({
        field: `body.config.${issue.key}`,
        message: issue.message,
      })),
    );
  }
  return checked.config;
}

/**
 * The one decision of what a credential is checked with beyond its schema: a cloud credential
 * with its cloud, a descriptor credential with its vendor, the static and provider_api ones with
 * nothing. An outbound call, so outside any transaction.
 */
async function verified(deps: ServiceDeps, provider: string, config: CredentialConfig) {
  if (isCloudProvider(provider)) {
    await verifyCloudCredential(deps.settings, provider, config);
    return;
  }
  if (provider === STATIC_PROVIDER || provider === PROVIDER_API) return;
  const entry = deps.providers.get(provider);
  if (entry !== undefined) await verifyCredential(deps, entry.descriptor, config);
}

export async function createCredential(
  deps: ServiceDeps,
  projectId: string,
  input: NewCredential,
): Promise<CredentialRow> {
  const config = await checkedConfig(deps, input.provider, input.config);
  await read(deps, (db) => requireProject(db, projectId));
  await verified(deps, input.provider, config);
  return write(deps, async (tx) => {
    await requireProject(tx, projectId, { lock: true });
    const [row] = await tx.insert(credentials).values({
      projectId,
      name: input.name,
      provider: input.provider,
      config,
    }).returning();
    return { result: row, change: credentialChange(row.id) };
  });
}

export async function updateCredential(
  deps: ServiceDeps,
  projectId: string,
  id: string,
  patch: CredentialPatch,
): Promise<CredentialRow> {
  // The merged config is checked, and the vendor asked, before the transaction opens; the
  // transaction then refuses to save over a config another write changed meanwhile.
  let config: CredentialConfig | undefined;
  let before: CredentialConfig | undefined;
  if (patch.config !== undefined) {
    const current = await getCredential(deps, projectId, id);
    before = current.config;
    const secrets = secretFields(current.provider, current.config, deps.providers);
    const merged: CredentialConfig = { ...current.config };
    for (const [key, value] of Object.entries(patch.config)) {
      const keepSecret = isMasked(value) && secrets.includes(key);
      if (!keepSecret) merged[key] = value;
    }
    config = await checkedConfig(deps, current.provider, merged);
    if (!sameValue(config, current.config)) {
      // The credential on its own first (a refused login is shown at its field), then, for a
      // cloud credential, each connector using it.
      await verified(deps, current.provider, config);
      if (isCloudProvider(current.provider)) await verifyUsers(deps, id, current.provider, config);
    }
  }
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(credentials)
      .where(and(eq(credentials.projectId, projectId), eq(credentials.id, id))).for("update");
    if (!current) return missingIn(tx, projectId, "Credential");
    if (before !== undefined && !sameValue(before, current.config)) {
      throw new ConflictError("The credential changed meanwhile; read it again and retry");
    }
    if (config !== undefined && current.provider === PROVIDER_API) {
      await keepReadKeys(tx, id, config);
    }
    const changes = changedFields(current, { name: patch.name, config });
    if (!changes) return { result: current, change: null };
    const [row] = await tx.update(credentials).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(credentials.id, id)).returning();
    return { result: row, change: credentialChange(id) };
  });
}

/**
 * A cloud credential changed: each connector using it is checked against the cloud with the new
 * config, so a key that stops working is refused at its field, not found by the next scale run.
 */
async function verifyUsers(
  deps: ServiceDeps,
  id: string,
  provider: string,
  config: CredentialConfig,
): Promise<void> {
  const users = await read(
    deps,
    (db) =>
      db.select({ config: connectors.config, pending: connectors.pendingDeletion })
        .from(connectors).where(eq(connectors.credentialId, id)),
  );
  for (const user of users) {
    if (user.pending) continue;
    await verifyCloudConnector(deps.settings, provider, config, user.config, "body.config");
  }
}

/**
 * A provider_api credential keeps every key its connectors' templates read: an edit that drops
 * one is refused at that key, naming the connector.
 */
async function keepReadKeys(tx: Tx, id: string, config: CredentialConfig): Promise<void> {
  const users = await tx.select({ name: connectors.name, config: connectors.config })
    .from(connectors)
    .where(and(eq(connectors.credentialId, id), eq(connectors.kind, ConnectorKind.providerApi)))
    .for("key share");
  const issues: FieldIssue[] = [];
  const named = new Set<string>();
  for (const user of users) {
    const read = readProviderApiConfig(user.config);
    if (read === undefined) continue;
    for (const key of credentialKeysRead(read)) {
      if (Object.hasOwn(config, key) || named.has(key)) continue;
      named.add(key);
      issues.push({
        field: `body.config.${key}`,
        message: `connector "${user.name}" reads it ({credential.${key}}); keep it`,
      });
    }
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/** Deletes a credential no connector uses; one in use is refused with the connector's name. */
export async function deleteCredential(
  deps: ServiceDeps,
  projectId: string,
  id: string,
): Promise<void> {
  await write(deps, async (tx) => {
    const [current] = await tx.select({ id: credentials.id }).from(credentials)
      .where(and(eq(credentials.projectId, projectId), eq(credentials.id, id))).for("update");
    if (!current) return missingIn(tx, projectId, "Credential");
    const [user] = await tx.select({ name: connectors.name }).from(connectors)
      .where(eq(connectors.credentialId, id)).limit(1);
    if (user) {
      throw new ConflictError(`Connector "${user.name}" uses this credential; change it first`);
    }
    await tx.delete(credentials).where(eq(credentials.id, id));
    return { result: undefined, change: credentialChange(id) };
  });
}
