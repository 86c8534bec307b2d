/**
 * What a project's proxy username and password may be. The gateway reads a client's username as
 * `<project username>[-cc-<country>][-sessid-<id>]…`, each option opened by a reserved delimiter
 * at its first occurrence, so a project username must hold none of them, nor end in one without
 * its last hyphen (`shop-st` + `-cc-us` would read as `shop` with a state). The password travels
 * in Basic auth, where a colon would end the username.
 *
 * Runs unchanged on Node and Deno.
 */

/** The reserved delimiters of the username grammar. */
export const USERNAME_DELIMITERS: readonly string[] = [
  "-cc-",
  "-st-",
  "-city-",
  "-sessid-",
  "-sesstime-",
  "-mitm-",
];

export const PROJECT_USERNAME_MAX_CHARS = 64;
export const PROJECT_PASSWORD_MIN_CHARS = 8;
export const PROJECT_PASSWORD_MAX_CHARS = 128;

/** Letters, digits, `_` and `.`, joined by single hyphens. */
const USERNAME_SHAPE = /^[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*$/;

/** What is wrong with a project username, or undefined when it is fine. */
export function projectUsernameProblem(username: string): string | undefined {
  if (username.length < 1 || username.length > PROJECT_USERNAME_MAX_CHARS) {
    return `must be 1-${PROJECT_USERNAME_MAX_CHARS} characters`;
  }
  if (!USERNAME_SHAPE.test(username)) {
    return "may hold letters, digits, _ and . joined by single hyphens";
  }
  const lower = username.toLowerCase();
  for (const delimiter of USERNAME_DELIMITERS) {
    if (lower.includes(delimiter) || lower.endsWith(delimiter.slice(0, -1))) {
      return `must not contain ${delimiter} (reserved for client options such as -cc-us)`;
    }
  }
  return undefined;
}

/** What is wrong with a project password, or undefined when it is fine. */
export function projectPasswordProblem(password: string): string | undefined {
  if (
    password.length < PROJECT_PASSWORD_MIN_CHARS || password.length > PROJECT_PASSWORD_MAX_CHARS
  ) {
    return `must be ${PROJECT_PASSWORD_MIN_CHARS}-${PROJECT_PASSWORD_MAX_CHARS} characters`;
  }
  if (!/^[\x21-\x7e]+$/.test(password)) {
    return "may hold printable ASCII characters only, without spaces";
  }
  if (password.includes(":")) return "must not contain ':' (it ends the username in Basic auth)";
  return undefined;
}
