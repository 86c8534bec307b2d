/**
 * Rows that live inside a project are always reached through it: a missing project answers 404
 * for the project, before anything asks about its credentials, connectors or proxies.
 */
import { eq } from "drizzle-orm";
import type { Db, Tx } from "../../db/client.ts";
import { projects } from "../../db/schema.ts";
import { NotFoundError } from "../../shared/errors.ts";

/**
 * Fails with NotFoundError unless the project exists. With `lock`, holds a share lock on its row
 * for the transaction, so a concurrent delete of the project waits for the write inside it.
 */
export async function requireProject(
  db: Db | Tx,
  projectId: string,
  options: { lock?: boolean } = {},
): Promise<void> {
  const query = db.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId));
  const [row] = options.lock ? await query.for("key share") : await query;
  if (!row) throw new NotFoundError("Project");
}

/**
 * The NotFoundError for a row missing inside a project: the project's when the project itself
 * is missing, so a caller learns which id was wrong.
 */
export async function missingIn(db: Db | Tx, projectId: string, entity: string): Promise<never> {
  await requireProject(db, projectId);
  throw new NotFoundError(entity);
}
