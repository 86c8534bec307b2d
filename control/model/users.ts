/** User bodies: the admin's create and edit, and a user's edit of its own account. */
import * as v from "valibot";
import { USER_ROLES } from "../../shared/roles.ts";
import { booleanField, readOnly } from "./common.ts";

export const USER_PASSWORD_MIN_CHARS = 8;
export const USER_PASSWORD_MAX_CHARS = 256;

const username = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.regex(
    /^[A-Za-z0-9_.@-]{1,64}$/,
    "must be 1-64 characters of letters, digits and _ . @ -",
  ),
);

const password = v.pipe(
  v.string("must be text"),
  v.minLength(USER_PASSWORD_MIN_CHARS, `must be at least ${USER_PASSWORD_MIN_CHARS} characters`),
  v.maxLength(USER_PASSWORD_MAX_CHARS, `must be at most ${USER_PASSWORD_MAX_CHARS} characters`),
);

const role = v.picklist(USER_ROLES, `must be one of ${USER_ROLES.join(", ")}`);

/** An email, or "" / null for none. */
const email = v.nullable(
  v.pipe(
    v.string("must be text"),
    v.trim(),
    // The longest address SMTP carries (RFC 5321).
    v.maxLength(254, "must be at most 254 characters"),
    v.union(
      [v.literal(""), v.pipe(v.string(), v.email("must be an email address"))],
      "must be an email address",
    ),
    v.transform((value) => value === "" ? null : value),
  ),
);

export const CreateUserBody = v.strictObject({
  username,
  password,
  role,
  email: v.optional(email),
  is_active: v.optional(booleanField),
});

/** An invitation: the user without a password; the link sets it. */
export const InviteUserBody = v.strictObject({
  username,
  role,
  email: v.optional(email),
});

/** The set-password screen's body: the link's token and the new password. */
export const SetPasswordBody = v.strictObject({
  token: v.pipe(
    v.string("must be text"),
    v.minLength(1, "is required"),
    v.maxLength(256, "must be at most 256 characters"),
  ),
  password,
});

export const UpdateUserBody = v.strictObject({
  username: v.optional(username),
  password: v.optional(password),
  role: v.optional(role),
  email: v.optional(email),
  is_active: v.optional(booleanField),
  id: readOnly(),
});

export const UpdateMeBody = v.strictObject({
  email: v.optional(email),
  password: v.optional(password),
  current_password: v.optional(
    v.pipe(
      v.string("must be text"),
      v.maxLength(USER_PASSWORD_MAX_CHARS, `must be at most ${USER_PASSWORD_MAX_CHARS} characters`),
    ),
  ),
  role: readOnly("is changed by an admin"),
  username: readOnly("is changed by an admin"),
});
