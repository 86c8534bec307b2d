/** The login body. */
import * as v from "valibot";

/**
 * Longer than any username or password the API accepts (64 and 256 characters, schemas/users.ts):
 * a login past it cannot match, and is not hashed to find out.
 */
export const MAX_LOGIN_CHARS = 1024;

const credential = v.pipe(
  v.string("must be text"),
  v.minLength(1, "is required"),
  v.maxLength(MAX_LOGIN_CHARS, `must be at most ${MAX_LOGIN_CHARS} characters`),
);

export const LoginBody = v.strictObject({
  username: credential,
  password: credential,
});
