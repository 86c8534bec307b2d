/**
 * Users of the admin API: the one way their rows change, the login check, and the first admin's
 * seed. Password hashes never leave this module's callers as anything but a boolean.
 */
import { and, asc, eq, sql } from "drizzle-orm";
import { users } from "../../db/schema.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../shared/errors.ts";
import { ChangeKind, UserRole } from "../../shared/roles.ts";
import { decoyHash, generatePassword, hashPassword, verifyPassword } from "./passwords.ts";
import { changedFields } from "./diff.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";

export type UserRow = typeof users.$inferSelect;

export interface NewUser {
  username: string;
  password: string;
  role: UserRole;
  email?: string | null;
  isActive?: boolean;
}

export interface UserPatch {
  username?: string;
  password?: string;
  role?: UserRole;
  email?: string | null;
  isActive?: boolean;
}

const userChange = (id: string) => ({ kind: ChangeKind.user, ref: id });

export function listUsers(deps: ServiceDeps): Promise<UserRow[]> {
  return read(deps, (db) => db.select().from(users).orderBy(asc(users.createdAt), asc(users.id)));
}

export async function getUser(deps: ServiceDeps, id: string): Promise<UserRow> {
  const [row] = await read(deps, (db) => db.select().from(users).where(eq(users.id, id)));
  if (!row) throw new NotFoundError("User");
  return row;
}

export async function createUser(deps: ServiceDeps, input: NewUser): Promise<UserRow> {
  const passwordHash = await hashPassword(input.password);
  return write(deps, async (tx) => {
    const [row] = await tx.insert(users).values({
      username: input.username,
      passwordHash,
      role: input.role,
      email: input.email ?? null,
      isActive: input.isActive ?? true,
    }).returning();
    return { result: row, change: userChange(row.id) };
  });
}

/**
 * Edits a user. `actorId` is who asks: an admin may not demote or deactivate itself, which would
 * lock the last admin out with one click.
 */
export async function updateUser(
  deps: ServiceDeps,
  actorId: string,
  id: string,
  patch: UserPatch,
): Promise<UserRow> {
  const passwordHash = patch.password === undefined
    ? undefined
    : await hashPassword(patch.password);
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(users).where(eq(users.id, id)).for("update");
    if (!current) throw new NotFoundError("User");
    if (id === actorId) {
      if (patch.role !== undefined && patch.role !== current.role) {
        throw new ConflictError("You cannot change your own role; ask another admin");
      }
      if (patch.isActive === false) throw new ConflictError("You cannot deactivate yourself");
    }
    // A new password always counts as a change: its hash is salted, so it never compares equal.
    const changes = changedFields(current, {
      username: patch.username,
      role: patch.role,
      email: patch.email,
      isActive: patch.isActive,
      passwordHash,
    });
    if (!changes) return { result: current, change: null };
    const [row] = await tx.update(users).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(users.id, id)).returning();
    return { result: row, change: userChange(id) };
  });
}

/** A user's edit of its own account: email, and a new password given with the current one. */
export async function updateOwnAccount(
  deps: ServiceDeps,
  id: string,
  patch: { email?: string | null; password?: string; currentPassword?: string },
): Promise<UserRow> {
  if (patch.password !== undefined) {
    const current = await getUser(deps, id);
    const given = patch.currentPassword;
    if (given === undefined) {
      throw new ValidationError([{
        field: "body.current_password",
        message: "is required to change your password",
      }]);
    }
    if (!(await verifyPassword(given, current.passwordHash))) {
      throw new ValidationError([{
        field: "body.current_password",
        message: "is not your current password",
      }]);
    }
  }
  return updateUser(deps, id, id, { email: patch.email, password: patch.password });
}

export async function deleteUser(deps: ServiceDeps, actorId: string, id: string): Promise<void> {
  if (id === actorId) throw new ConflictError("You cannot delete your own account");
  await write(deps, async (tx) => {
    const deleted = await tx.delete(users).where(eq(users.id, id)).returning({ id: users.id });
    if (deleted.length === 0) throw new NotFoundError("User");
    return { result: undefined, change: userChange(id) };
  });
}

/**
 * The login check: the active user with this username (case-insensitive) and password, its
 * last_login_at recorded, or undefined. An unknown name costs a hash like a known one.
 */
export async function verifyLogin(
  deps: ServiceDeps,
  username: string,
  password: string,
): Promise<UserRow | undefined> {
  const [row] = await read(
    deps,
    (db) => db.select().from(users).where(sql`lower(${users.username}) = lower(${username})`),
  );
  if (!row) {
    await verifyPassword(password, await decoyHash());
    return undefined;
  }
  if (!(await verifyPassword(password, row.passwordHash)) || !row.isActive) return undefined;
  // Bookkeeping, not a definition: no change entry.
  await read(
    deps,
    (db) => db.update(users).set({ lastLoginAt: sql`now()` }).where(eq(users.id, row.id)),
  );
  return row;
}

/** The active user a token names, or undefined. */
export async function activeUser(deps: ServiceDeps, id: string): Promise<UserRow | undefined> {
  const [row] = await read(
    deps,
    (db) => db.select().from(users).where(and(eq(users.id, id), eq(users.isActive, true))),
  );
  return row;
}

export interface SeedResult {
  created: boolean;
  username: string;
  /** Set when the password was generated: print it once, it is stored only hashed. */
  generatedPassword?: string;
}

/**
 * Creates the first admin when there is no user at all, from settings.adminUsername and
 * settings.adminPassword (or a generated password). Two processes seeding at once: the insert
 * that commits first wins, the other inserts nothing (its insert skips on the unique index) and
 * announces nothing.
 */
export async function seedFirstAdmin(deps: ServiceDeps): Promise<SeedResult> {
  const username = deps.settings.adminUsername;
  const [existing] = await read(deps, (db) => db.select({ id: users.id }).from(users).limit(1));
  if (existing) return { created: false, username };
  const generated = deps.settings.adminPassword === undefined ? generatePassword() : undefined;
  const passwordHash = await hashPassword(deps.settings.adminPassword ?? generated ?? "");
  const inserted = await write(deps, async (tx) => {
    const rows = await tx.execute<{ id: string }>(sql`
      insert into ${users} (username, password_hash, role)
      select ${username}, ${passwordHash}, ${UserRole.admin}
      where not exists (select 1 from ${users})
      on conflict do nothing
      returning id`);
    const id = rows[0]?.id;
    return { result: id, change: id === undefined ? null : userChange(id) };
  });
  if (inserted === undefined) return { created: false, username };
  return { created: true, username, generatedPassword: generated };
}
