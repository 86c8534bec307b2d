/** The login body. */
import * as v from "valibot";

export const LoginBody = v.strictObject({
  username: v.pipe(v.string("must be text"), v.minLength(1, "is required")),
  password: v.pipe(v.string("must be text"), v.minLength(1, "is required")),
});
