/**
 * Invitations: an admin makes a user without a password it knows, and hands it a one-time link
 * that ends after INVITE_TTL_DAYS; whoever opens it sets the user's password once. Only the
 * token's SHA-256 is stored, so a database read gives no working link. A reinvite replaces the
 * user's links; setting the password deletes them. A link used already, never issued or past its
 * end is refused and changes nothing.
 */
import { createHash, randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { userInvites, users } from "../../db/schema.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import { ChangeKind, type UserRole } from "../../shared/roles.ts";
import { write } from "../core/store.ts";
import type { ServiceDeps } from "../core/store.ts";
import type { Actor } from "../../db/actor.ts";
import { nameTransactionWriter } from "../../db/client.ts";
import { hashPassword } from "./passwords.ts";
import { createUser, type UserRow } from "./users.ts";

export const INVITE_TTL_DAYS = 7;

export const INVITE_UNKNOWN = "was used already, or was never issued: ask an admin for a new " +
  "invitation";

export interface Invitation {
  /** The token the link carries (shown once; only its digest is kept). */
  token: string;
  expiresAt: Date;
}

const digestOf = (token: string) => createHash("sha256").update(token).digest("hex");

/** A new link for the user, replacing any it had (in the caller's transaction). */
async function issue(
  tx: Parameters<Parameters<ServiceDeps["database"]["transaction"]>[0]>[0],
  userId: string,
): Promise<Invitation> {
  const token = randomBytes(32).toString("base64url");
  const expiresAt = new Date(Date.now() + INVITE_TTL_DAYS * 86_400_000);
  await tx.delete(userInvites).where(eq(userInvites.userId, userId));
  await tx.insert(userInvites).values({ userId, tokenHash: digestOf(token), expiresAt });
  return { token, expiresAt };
}

/** A user made with a password nobody knows, and its invitation. */
export async function inviteUser(
  deps: ServiceDeps,
  input: { username: string; role: UserRole; email?: string | null },
): Promise<{ user: UserRow; invitation: Invitation }> {
  const user = await createUser(deps, {
    username: input.username,
    password: randomBytes(32).toString("base64url"),
    role: input.role,
    email: input.email,
  });
  const invitation = await write(deps, async (tx) => ({
    result: await issue(tx, user.id),
    change: null,
  }));
  return { user, invitation };
}

/** A new link for an existing user (its earlier links stop working). */
export async function reinviteUser(deps: ServiceDeps, userId: string): Promise<Invitation> {
  return await write(deps, async (tx) => {
    const [user] = await tx.select({ id: users.id }).from(users).where(eq(users.id, userId))
      .for("update");
    if (!user) throw new NotFoundError("User");
    return { result: await issue(tx, userId), change: null };
  });
}

/** Sets the user's password through its link, once; the user it set it for. */
export async function acceptInvitation(
  deps: ServiceDeps,
  token: string,
  password: string,
  /** Who the link's user is as a writer (the audit log's): the request knows how it came. */
  writer?: (user: { userId: string; username: string }) => Actor,
): Promise<{ userId: string; username: string }> {
  const passwordHash = await hashPassword(password);
  return await write(deps, async (tx) => {
    const [found] = await tx.select({ invite: userInvites, username: users.username })
      .from(userInvites).innerJoin(users, eq(users.id, userInvites.userId))
      .where(eq(userInvites.tokenHash, digestOf(token))).for("update");
    const invite = found?.invite;
    if (!invite) throw new ValidationError([{ field: "body.token", message: INVITE_UNKNOWN }]);
    if (invite.expiresAt.getTime() <= Date.now()) {
      throw new ValidationError([{
        field: "body.token",
        message: `expired at ${invite.expiresAt.toISOString()}: ask an admin for a new invitation`,
      }]);
    }
    if (writer !== undefined) {
      await nameTransactionWriter(tx, writer({ userId: invite.userId, username: found.username }));
    }
    const [user] = await tx.update(users).set({ passwordHash, updatedAt: sql`now()` })
      .where(eq(users.id, invite.userId)).returning({ id: users.id, username: users.username });
    await tx.delete(userInvites).where(eq(userInvites.userId, invite.userId));
    return {
      result: { userId: user.id, username: user.username },
      change: { kind: ChangeKind.user, ref: user.id },
    };
  });
}
