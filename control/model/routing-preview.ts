/**
 * The routing preview's body. The username's options are read by the gateway's own grammar in
 * the service (shared/username.ts), not here, so a bad option is refused with the very sentence
 * a client would get from the gateway.
 */
import * as v from "valibot";
import { parseHostPort } from "./proxy-url.ts";

/** Longer than any username a client could send in a Basic header a gateway accepts. */
export const MAX_PREVIEW_USERNAME_CHARS = 1024;

/** `host:port`, an IPv6 host in brackets, read by the same host rules as a proxy's address. */
const target = v.pipe(
  v.string("must be text, such as example.com:443"),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const parsed = parseHostPort(dataset.value);
    if (parsed.ok) return parsed.value;
    addIssue({ message: `${parsed.reason}, such as example.com:443` });
    return NEVER;
  }),
);

export const RoutingPreviewBody = v.strictObject({
  username: v.pipe(
    v.string("must be text"),
    v.minLength(1, "must not be empty"),
    v.maxLength(
      MAX_PREVIEW_USERNAME_CHARS,
      `must be at most ${MAX_PREVIEW_USERNAME_CHARS} characters`,
    ),
  ),
  target: v.optional(target),
});
