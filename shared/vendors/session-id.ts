/**
 * Vendor session ids. A slot's id is drawn once, at random; a dynamic-session row's id comes from
 * the client's `-sessid-` hashed with the project's id, the same on every gateway and every
 * process, so two gateways send one client session to one vendor session and two projects using
 * the same `-sessid-` never share a vendor session.
 *
 * The hash must be synchronous (it runs on the request path, where `crypto.subtle` would cost a
 * promise per request) and stable across releases: 64 bits from two FNV-1a passes, spread over
 * the id's alphabet by a small generator. It is not a secret: the project id already separates
 * clients, and a vendor session is worth nothing without the account's password.
 *
 * Runs unchanged on Node and Deno.
 */

export interface SessionIdSpec {
  length: number;
  alphabet: string;
  prefix: string;
}

export const DEFAULT_SESSION_ID: SessionIdSpec = {
  length: 10,
  alphabet: "abcdefghijklmnopqrstuvwxyz0123456789",
  prefix: "",
};

function fnv1a(text: string, seed: number): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The vendor session id of a client session of one project. */
export function sessionIdFor(
  projectId: string,
  clientSession: string,
  spec: SessionIdSpec,
): string {
  const key = `${projectId}\u0000${clientSession}`;
  let a = fnv1a(key, 0x811c9dc5);
  let b = fnv1a(key, 0x9747b28c);
  const alphabet = spec.alphabet;
  let out = spec.prefix;
  for (let i = 0; i < spec.length; i++) {
    // xorshift over the 64-bit state; each character takes the state's top bits.
    const t = a ^ (a << 11);
    a = b;
    b = (b ^ (b >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    out += alphabet[b % alphabet.length];
  }
  return out;
}

/** A fresh vendor session id (a slot's, or a request that named no session). */
export function randomSessionId(spec: SessionIdSpec): string {
  const bytes = new Uint32Array(spec.length);
  crypto.getRandomValues(bytes);
  let out = spec.prefix;
  for (let i = 0; i < spec.length; i++) out += spec.alphabet[bytes[i] % spec.alphabet.length];
  return out;
}
