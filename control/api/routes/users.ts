/** Users (admins), and every user's own account. */
import { UserRole } from "../../../shared/roles.ts";
import {
  createUser,
  deleteUser,
  getUser,
  listUsers,
  updateOwnAccount,
  updateUser,
} from "../../services/users.ts";
import type { ApiDeps } from "../deps.ts";
import { presentUser } from "../present.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  InvitationAnswer,
  InvitedUserAnswer,
  UserAnswer,
  UserListAnswer,
} from "../answers/users.ts";
import { CreateUserBody, InviteUserBody, UpdateMeBody, UpdateUserBody } from "../../model/users.ts";
import { INVITE_TTL_DAYS, inviteUser, reinviteUser } from "../../services/invites.ts";
import type { Context } from "hono";

const USERS = "/api/v1/users";

/** The dashboard's set-password screen for a token: under OCTOPROX_PUBLIC_URL, else this api. */
function inviteUrl(deps: ApiDeps, c: Context, token: string): string {
  const base = deps.settings.publicUrl ?? new URL(c.req.url).origin;
  return `${base.replace(/\/$/, "")}/set-password?token=${encodeURIComponent(token)}`;
}

const INVITE_NOTE = `The link opens the dashboard's set-password screen and works once, for ` +
  `${INVITE_TTL_DAYS} days; only its digest is stored, so it is shown here alone.`;

export function userRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "post",
      path: `${USERS}/invite`,
      tag: "users",
      summary: "Invite a user",
      description: "Makes the user with no password anyone knows, and answers `invite_url`, " +
        `where its owner sets one. ${INVITE_NOTE}`,
      access: UserRole.admin,
      body: InviteUserBody,
      responses: {
        201: answer("The user and its link", InvitedUserAnswer),
        400: "The username is taken",
      },
      async handler({ c, body }) {
        const { user, invitation } = await inviteUser(deps, {
          username: body.username,
          role: body.role,
          email: body.email,
        });
        return c.json({
          user: presentUser(user),
          invite_url: inviteUrl(deps, c, invitation.token),
          expires_at: invitation.expiresAt,
        }, 201);
      },
    }),
    defineRoute({
      method: "post",
      path: `${USERS}/:id/reinvite`,
      tag: "users",
      summary: "Send a user a new invitation",
      description: `A new \`invite_url\`; the user's earlier links stop working. ${INVITE_NOTE}`,
      access: UserRole.admin,
      responses: { 200: answer("The new link", InvitationAnswer) },
      async handler({ c, params }) {
        const invitation = await reinviteUser(deps, params.id);
        return c.json({
          invite_url: inviteUrl(deps, c, invitation.token),
          expires_at: invitation.expiresAt,
        });
      },
    }),
    // /users/me before /users/:id, which would otherwise take "me" as an id.
    defineRoute({
      method: "get",
      path: `${USERS}/me`,
      tag: "users",
      summary: "Your own account",
      access: UserRole.viewer,
      responses: { 200: answer("Your user", UserAnswer) },
      async handler({ c, principal }) {
        return c.json(presentUser(await getUser(deps, principal.userId)));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${USERS}/me`,
      tag: "users",
      summary: "Change your email or password",
      description: "A new password needs `current_password`.",
      access: UserRole.viewer,
      body: UpdateMeBody,
      responses: { 200: answer("Your user", UserAnswer) },
      async handler({ c, body, principal }) {
        const row = await updateOwnAccount(deps, principal.userId, {
          email: body.email,
          password: body.password,
          currentPassword: body.current_password,
        });
        return c.json(presentUser(row));
      },
    }),
    defineRoute({
      method: "get",
      path: USERS,
      tag: "users",
      summary: "List users",
      access: UserRole.admin,
      responses: { 200: answer("Every user, oldest first", UserListAnswer) },
      async handler({ c }) {
        return c.json((await listUsers(deps)).map(presentUser));
      },
    }),
    defineRoute({
      method: "post",
      path: USERS,
      tag: "users",
      summary: "Create a user",
      description: "Usernames are unique regardless of case (400 naming `body.username`).",
      access: UserRole.admin,
      body: CreateUserBody,
      responses: { 201: answer("The user", UserAnswer), 400: "The username is taken" },
      async handler({ c, body }) {
        const row = await createUser(deps, {
          username: body.username,
          password: body.password,
          role: body.role,
          email: body.email,
          isActive: body.is_active,
        });
        return c.json(presentUser(row), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${USERS}/:id`,
      tag: "users",
      summary: "Read a user",
      access: UserRole.admin,
      responses: { 200: answer("The user", UserAnswer) },
      async handler({ c, params }) {
        return c.json(presentUser(await getUser(deps, params.id)));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${USERS}/:id`,
      tag: "users",
      summary: "Edit a user",
      description: "An admin cannot change its own role or deactivate itself (400).",
      access: UserRole.admin,
      body: UpdateUserBody,
      responses: {
        200: answer("The user", UserAnswer),
        400: "The username is taken, or an edit of yourself",
      },
      async handler({ c, body, params, principal }) {
        const row = await updateUser(deps, principal.userId, params.id, {
          username: body.username,
          password: body.password,
          role: body.role,
          email: body.email,
          isActive: body.is_active,
        });
        return c.json(presentUser(row));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${USERS}/:id`,
      tag: "users",
      summary: "Delete a user",
      description: "An admin cannot delete itself (400). The user's API tokens go with it.",
      access: UserRole.admin,
      responses: { 204: "Deleted", 400: "You cannot delete yourself" },
      async handler({ c, params, principal }) {
        await deleteUser(deps, principal.userId, params.id);
        return c.body(null, 204);
      },
    }),
  ];
}
