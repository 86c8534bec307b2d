/** Users, API tokens and logins as the API answers them. */
import * as v from "valibot";
import { USER_ROLES } from "../../../shared/roles.ts";
import { count, id, ISSUED_SECRET_FIELDS, nullableTimestamp, timestamp } from "./common.ts";

export const UserAnswer = v.strictObject({
  id,
  username: v.string(),
  role: v.picklist(USER_ROLES),
  email: v.nullable(v.string()),
  is_active: v.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
  last_login_at: nullableTimestamp,
});
export type UserRecord = v.InferOutput<typeof UserAnswer>;

export const UserListAnswer = v.array(UserAnswer);

/** An invitation's link (shown once) and its end. */
export const InvitationAnswer = v.strictObject({
  invite_url: v.string(),
  expires_at: timestamp,
});

export const InvitedUserAnswer = v.strictObject({
  user: UserAnswer,
  invite_url: v.string(),
  expires_at: timestamp,
});

/** GET /auth/me: the user, and how the caller authenticated. */
export const MeAnswer = v.strictObject({
  ...UserAnswer.entries,
  via: v.picklist(["jwt", "api_token"]),
});

/** POST /auth/login. */
export const LoginAnswer = v.strictObject({
  access_token: v.string(),
  token_type: v.literal("bearer"),
  /** Seconds. */
  expires_in: count,
});

const TOKEN_FIELDS = {
  id,
  user_id: id,
  name: v.string(),
  ...ISSUED_SECRET_FIELDS,
};

export const TokenAnswer = v.strictObject(TOKEN_FIELDS);

export const TokenListAnswer = v.array(TokenAnswer);

/** The create answer: the record and the token itself, shown this once. */
export const CreatedTokenAnswer = v.strictObject({ ...TOKEN_FIELDS, token: v.string() });

/** A token as a list or its create answers it: `token` only in the latter. */
export type ApiToken = v.InferOutput<typeof TokenAnswer> & { token?: string };
