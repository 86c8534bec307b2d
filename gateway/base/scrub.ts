/**
 * Scrubbing of what the gateway writes about a failed request (failure examples, the log lines
 * of failed attempts): a proxy's credentials and the queries of quoted URLs never leave it.
 * Failure examples are readable by every role, and a vendor's answer may echo what it was sent
 * (its reason phrase quoting the credentials or the URL), so the text is scrubbed as a whole,
 * whatever put a secret in it.
 *
 * Runs on failure paths only: a request that goes through never pays for it.
 */
import { base64Encode, utf8Encode } from "../../shared/proxy-protocol/bytes.ts";

/** What a removed secret reads as. */
export const REDACTED = "***";

// `scheme://user:pass@host`: the userinfo goes, the scheme and host stay.
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]*@/gi;
// `scheme://host/path?query#fragment`: what follows the path goes, but for the punctuation that
// ends a sentence or a quote around it (`GET http://host/a?b=c: refused`).
const URL_QUERY =
  /\b([a-z][a-z0-9+.-]*:\/\/[^\s?#"'<>]*)[?#][^\s"'<>]*?([.,;:!)\]]*)(?=[\s"'<>]|$)/gi;

/** The forms a credential can take in a message: as is, URL-encoded, and inside a Basic value. */
function secretForms(username: string | null, password: string | null): string[] {
  const forms = new Set<string>();
  for (const secret of [username, password]) {
    if (!secret) continue;
    forms.add(secret);
    forms.add(encodeURIComponent(secret));
  }
  if (username) forms.add(base64Encode(utf8Encode(`${username}:${password ?? ""}`)));
  // Longest first, so a secret inside another is not half replaced.
  return [...forms].sort((a, b) => b.length - a.length);
}

/**
 * The text without URL userinfo, URL queries and fragments, and without any of the given
 * credentials (a proxy's username and password), in any of their forms.
 */
export function scrubText(
  text: string,
  credentials?: { username: string | null; password: string | null },
): string {
  let out = text.replace(URL_USERINFO, "$1").replace(URL_QUERY, "$1$2");
  if (credentials !== undefined) {
    for (const secret of secretForms(credentials.username, credentials.password)) {
      out = out.replaceAll(secret, REDACTED);
    }
  }
  return out;
}
