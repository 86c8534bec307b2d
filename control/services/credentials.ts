/**
 * Credentials: what a connector logs in with, per project. Only the `static` provider exists so
 * far (an optional default username and password for a static list's proxies); the vendor and
 * cloud providers bring their own config fields later. Secret fields never leave the api in
 * clear: answers carry a mask, and a mask sent back means "unchanged".
 */
import { and, asc, eq, sql } from "drizzle-orm";
import { connectors, credentials } from "../../db/schema.ts";
import { ConflictError, NotFoundError } from "../../shared/errors.ts";
import { ChangeKind } from "../../shared/roles.ts";
import { changedFields } from "./diff.ts";
import { missingIn, requireProject } from "./scope.ts";
import { read, type ServiceDeps, write } from "./store.ts";

export type CredentialRow = typeof credentials.$inferSelect;
export type CredentialConfig = Record<string, unknown>;

/** Providers a credential may name today. */
export const CREDENTIAL_PROVIDERS = ["static"] as const;

/** Config fields that hold secrets, per provider. */
const SECRET_FIELDS: Readonly<Record<string, readonly string[]>> = { static: ["password"] };

/** What an answer shows in place of a secret; sent back in an edit, it keeps the secret. */
export const SECRET_MASK = "********";

export function secretFields(provider: string): readonly string[] {
  return SECRET_FIELDS[provider] ?? [];
}

/** The config as answers show it, and which secrets are set. */
export function maskConfig(
  provider: string,
  config: CredentialConfig,
): { config: CredentialConfig; secretsSet: Record<string, boolean> } {
  const masked: CredentialConfig = { ...config };
  const secretsSet: Record<string, boolean> = {};
  for (const field of secretFields(provider)) {
    const set = typeof config[field] === "string" && config[field] !== "";
    secretsSet[field] = set;
    if (set) masked[field] = SECRET_MASK;
  }
  return { config: masked, secretsSet };
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

export function createCredential(
  deps: ServiceDeps,
  projectId: string,
  input: NewCredential,
): Promise<CredentialRow> {
  return write(deps, async (tx) => {
    await requireProject(tx, projectId, { lock: true });
    const [row] = await tx.insert(credentials).values({
      projectId,
      name: input.name,
      provider: input.provider,
      config: withoutNulls(input.config),
    }).returning();
    return { result: row, change: credentialChange(row.id) };
  });
}

export function updateCredential(
  deps: ServiceDeps,
  projectId: string,
  id: string,
  patch: CredentialPatch,
): Promise<CredentialRow> {
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(credentials)
      .where(and(eq(credentials.projectId, projectId), eq(credentials.id, id))).for("update");
    if (!current) return missingIn(tx, projectId, "Credential");
    let config: CredentialConfig | undefined;
    if (patch.config !== undefined) {
      const merged: CredentialConfig = { ...current.config };
      for (const [key, value] of Object.entries(patch.config)) {
        const keepSecret = value === SECRET_MASK && secretFields(current.provider).includes(key);
        if (!keepSecret) merged[key] = value;
      }
      config = withoutNulls(merged);
    }
    const changes = changedFields(current, { name: patch.name, config });
    if (!changes) return { result: current, change: null };
    const [row] = await tx.update(credentials).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(credentials.id, id)).returning();
    return { result: row, change: credentialChange(id) };
  });
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
