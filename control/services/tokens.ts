/**
 * Long-lived API tokens for scripts and the CLI. A token is `oxp_` and 32 random bytes in
 * base64url, shown once at creation; the table keeps its SHA-256 and its first characters, so
 * a stolen table opens nothing and an operator can still tell tokens apart.
 */
import { createHash, randomBytes } from "node:crypto";
import { and, asc, eq, isNull, sql } from "drizzle-orm";
import { apiTokens, users } from "../../db/schema.ts";
import { NotFoundError } from "../../shared/errors.ts";
import { ChangeKind } from "../../shared/roles.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import type { UserRow } from "./users.ts";

export type TokenRow = typeof apiTokens.$inferSelect;

export const TOKEN_PREFIX = "oxp_";
/** How much of a token the table keeps in clear, prefix included. */
const SHOWN_CHARS = 12;
/** last_used_at is bookkeeping: written at most this often per token, not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export function isApiToken(bearer: string): boolean {
  return bearer.startsWith(TOKEN_PREFIX);
}

export interface NewToken {
  name: string;
  expiresInDays?: number;
}

export async function createToken(
  deps: ServiceDeps,
  userId: string,
  input: NewToken,
): Promise<{ row: TokenRow; token: string }> {
  const token = TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const expiresAt = input.expiresInDays === undefined
    ? null
    : new Date(Date.now() + input.expiresInDays * 86_400_000);
  const row = await write(deps, async (tx) => {
    const [owner] = await tx.select({ id: users.id }).from(users).where(eq(users.id, userId));
    if (!owner) throw new NotFoundError("User");
    const [inserted] = await tx.insert(apiTokens).values({
      userId,
      name: input.name,
      tokenHash: hashToken(token),
      tokenPrefix: token.slice(0, SHOWN_CHARS),
      expiresAt,
    }).returning();
    // Tokens belong to their user: the entry names the user, whose access changed.
    return { result: inserted, change: { kind: ChangeKind.user, ref: userId } };
  });
  return { row, token };
}

export function listTokens(deps: ServiceDeps, userId: string): Promise<TokenRow[]> {
  return read(deps, (db) =>
    db.select().from(apiTokens).where(eq(apiTokens.userId, userId))
      .orderBy(asc(apiTokens.createdAt), asc(apiTokens.id)));
}

/**
 * Revokes a token. `ownerId` limits the revoke to that user's tokens (undefined: an admin, any
 * token); another user's token is answered as missing. Revoking twice changes nothing.
 */
export function revokeToken(
  deps: ServiceDeps,
  id: string,
  ownerId: string | undefined,
): Promise<TokenRow> {
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(apiTokens).where(eq(apiTokens.id, id)).for("update");
    if (!current || (ownerId !== undefined && current.userId !== ownerId)) {
      throw new NotFoundError("Token");
    }
    if (current.revokedAt !== null) return { result: current, change: null };
    const [row] = await tx.update(apiTokens).set({ revokedAt: sql`now()` })
      .where(eq(apiTokens.id, id)).returning();
    return { result: row, change: { kind: ChangeKind.user, ref: current.userId } };
  });
}

/** The active user behind a token that is neither revoked nor expired, or undefined. */
export async function resolveToken(
  deps: ServiceDeps,
  token: string,
): Promise<{ user: UserRow; tokenId: string; tokenName: string } | undefined> {
  const [found] = await read(
    deps,
    (db) =>
      db.select({ token: apiTokens, user: users }).from(apiTokens)
        .innerJoin(users, eq(users.id, apiTokens.userId))
        .where(and(
          eq(apiTokens.tokenHash, hashToken(token)),
          isNull(apiTokens.revokedAt),
          eq(users.isActive, true),
          sql`(${apiTokens.expiresAt} is null or ${apiTokens.expiresAt} > now())`,
        )),
  );
  if (!found) return undefined;
  const lastUsed = found.token.lastUsedAt?.getTime() ?? 0;
  if (Date.now() - lastUsed > LAST_USED_RESOLUTION_MS) {
    await read(
      deps,
      (db) =>
        db.update(apiTokens).set({ lastUsedAt: sql`now()` }).where(
          eq(apiTokens.id, found.token.id),
        ),
    );
  }
  return { user: found.user, tokenId: found.token.id, tokenName: found.token.name };
}
