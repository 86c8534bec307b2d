/**
 * Distribution keys: the credentials of the extraction API (control/provider-api/extraction/), one project
 * each and nothing else. A key is `oxd_` and 43 random base62 characters (about 256 bits),
 * shown once at creation; the table keeps its SHA-256 and its first characters, as API tokens
 * do, so a stolen table opens nothing and an operator can still tell keys apart.
 *
 * No change entry is written: nothing compiled from Postgres reads these rows. The api processes
 * read a key again within seconds of its last check (control/provider-api/extraction/keys.ts), which is how
 * a revoke, a delete or an edit of a key's addresses takes effect.
 */
import { createHash, randomBytes } from "node:crypto";
import { and, asc, eq, sql } from "drizzle-orm";
import { distributionKeys, projects } from "../../../db/schema.ts";
import { NotFoundError } from "../../../shared/errors.ts";
import type { Tx } from "../../../db/client.ts";
import { read, type ServiceDeps, write } from "../../core/store.ts";

export type DistributionKeyRow = typeof distributionKeys.$inferSelect;

export const DISTRIBUTION_KEY_PREFIX = "oxd_";
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** 43 base62 characters carry 256 bits. */
const RANDOM_CHARS = 43;
/** How much of a key the table keeps in clear, prefix included. */
const SHOWN_CHARS = 12;

export function hashDistributionKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** Whether a presented secret has the form of a distribution key (not whether it is one). */
export function isDistributionKey(text: string): boolean {
  return text.startsWith(DISTRIBUTION_KEY_PREFIX);
}

/** A fresh key: each character drawn without bias (bytes past 247 are drawn again). */
export function generateDistributionKey(): string {
  let out = DISTRIBUTION_KEY_PREFIX;
  while (out.length < DISTRIBUTION_KEY_PREFIX.length + RANDOM_CHARS) {
    for (const byte of randomBytes(64)) {
      if (byte >= 248) continue; // 248 = 4 * 62: what lies above would favour the first digits
      out += BASE62[byte % 62];
      if (out.length === DISTRIBUTION_KEY_PREFIX.length + RANDOM_CHARS) break;
    }
  }
  return out;
}

export interface NewDistributionKey {
  name: string;
  /** Client addresses the key is taken from; empty or absent: from anywhere. */
  allowedCidrs?: string[];
  /** Absent or null: the key lives until revoked. */
  expiresAt?: Date | null;
}

async function lockProject(tx: Tx, projectId: string): Promise<void> {
  const [project] = await tx.select({ id: projects.id }).from(projects)
    .where(eq(projects.id, projectId)).for("share");
  if (!project) throw new NotFoundError("Project");
}

export async function createDistributionKey(
  deps: ServiceDeps,
  projectId: string,
  input: NewDistributionKey,
): Promise<{ row: DistributionKeyRow; key: string }> {
  const key = generateDistributionKey();
  const row = await write(deps, async (tx) => {
    await lockProject(tx, projectId);
    const [inserted] = await tx.insert(distributionKeys).values({
      projectId,
      name: input.name,
      keyHash: hashDistributionKey(key),
      keyPrefix: key.slice(0, SHOWN_CHARS),
      allowedCidrs: input.allowedCidrs ?? [],
      expiresAt: input.expiresAt ?? null,
    }).returning();
    return { result: inserted, change: null };
  });
  return { row, key };
}

/** A project's keys, oldest first (revoked and expired ones included). */
export async function listDistributionKeys(
  deps: ServiceDeps,
  projectId: string,
): Promise<DistributionKeyRow[]> {
  return await read(deps, async (db) => {
    const [project] = await db.select({ id: projects.id }).from(projects)
      .where(eq(projects.id, projectId));
    if (!project) throw new NotFoundError("Project");
    return await db.select().from(distributionKeys)
      .where(eq(distributionKeys.projectId, projectId))
      .orderBy(asc(distributionKeys.createdAt), asc(distributionKeys.id));
  });
}

const ofProject = (projectId: string, keyId: string) =>
  and(eq(distributionKeys.id, keyId), eq(distributionKeys.projectId, projectId));

/** Revokes a key of the project; revoking twice changes nothing. */
export function revokeDistributionKey(
  deps: ServiceDeps,
  projectId: string,
  keyId: string,
): Promise<DistributionKeyRow> {
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(distributionKeys)
      .where(ofProject(projectId, keyId)).for("update");
    if (!current) throw new NotFoundError("Distribution key");
    if (current.revokedAt !== null) return { result: current, change: null };
    const [row] = await tx.update(distributionKeys).set({ revokedAt: sql`now()` })
      .where(eq(distributionKeys.id, keyId)).returning();
    return { result: row, change: null };
  });
}

/** Removes a key of the project altogether (it stops working as a revoked one does). */
export function deleteDistributionKey(
  deps: ServiceDeps,
  projectId: string,
  keyId: string,
): Promise<void> {
  return write(deps, async (tx) => {
    const deleted = await tx.delete(distributionKeys).where(ofProject(projectId, keyId))
      .returning({ id: distributionKeys.id });
    if (deleted.length === 0) throw new NotFoundError("Distribution key");
    return { result: undefined, change: null };
  });
}

/** The row a presented key digests to, revoked or not; undefined when there is none. */
export async function findDistributionKey(
  deps: ServiceDeps,
  keyHash: string,
): Promise<DistributionKeyRow | undefined> {
  const [row] = await read(
    deps,
    (db) => db.select().from(distributionKeys).where(eq(distributionKeys.keyHash, keyHash)),
  );
  return row;
}

/** Notes a key's use (bookkeeping: callers write it at most once a minute per key). */
export async function touchDistributionKey(
  deps: ServiceDeps,
  keyId: string,
): Promise<void> {
  await read(
    deps,
    (db) =>
      db.update(distributionKeys).set({ lastUsedAt: sql`now()` })
        .where(eq(distributionKeys.id, keyId)),
  );
}
