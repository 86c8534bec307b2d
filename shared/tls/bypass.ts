/**
 * A project's interception bypass list: the hosts whose tunnels stay raw (pinned apps, banks),
 * however the project intercepts. One reading of an entry for every side: the api and the
 * configuration file store what `readBypassEntry` makes of what an operator typed, and the gateway
 * matches a tunnel's host against the stored list with `isBypassed`.
 *
 * An entry is a host name (`example.com`: that name only), a suffix (`.example.com`: every name
 * under it, not the bare name) or an IP address (that address only). Stored lower case, in IDNA
 * ASCII (`bücher.example` is `xn--bcher-kva.example`), without a root dot, an IPv6 address in its
 * RFC 5952 form without brackets. No port, no wildcard but the leading dot.
 *
 * Runs unchanged on Node and Deno.
 */
import { normaliseHost } from "../net/host.ts";
import { formatIPv4, parseIPv4, parseIPv6 } from "../net/ip.ts";
import { formatIPv6 } from "../proxy-protocol/address.ts";

/** The most entries a list holds, and the longest name an entry may be (a DNS name's bound). */
export const BYPASS_MAX_ENTRIES = 1000;
export const BYPASS_MAX_NAME_CHARS = 253;
const MAX_LABEL_CHARS = 63;

export type BypassEntryResult = { ok: true; entry: string } | { ok: false; message: string };

/** What an operator reads when an entry is refused: each says how to write it. */
export const BypassMessage = {
  empty: "must not be empty",
  wildcard: "must not hold a wildcard: write .example.com for every name under example.com",
  port: "must not hold a port: write the host alone, such as example.com",
  suffixOfAddress: "an IP address matches itself only: write it without the leading dot",
  length: `must be at most ${BYPASS_MAX_NAME_CHARS} characters`,
  label: `must have labels of 1-${MAX_LABEL_CHARS} characters between its dots`,
  shape: "must be a host name (letters, digits, - and _ between dots), a .suffix or an IP address",
} as const;

const fail = (message: string): BypassEntryResult => ({ ok: false, message });

/** IDNA ASCII of a name holding other characters, through the URL parser of either runtime. */
function idnaAscii(name: string): string | undefined {
  // Characters the URL parser would read as the end of the host, or drop.
  if (/[\s/?#@\\%:[\]]/.test(name)) return undefined;
  try {
    return new URL(`http://${name}/`).hostname;
  } catch {
    return undefined;
  }
}

/** Whether the last label is all digits, or a hex number: the URL standard reads it as IPv4. */
function endsInNumber(name: string): boolean {
  const last = name.slice(name.lastIndexOf(".") + 1);
  return /^(\d+|0x[0-9a-f]*)$/.test(last);
}

/** An IPv6 literal (brackets taken) in RFC 5952 form; undefined when it is not one. */
function canonicalIPv6(text: string): string | undefined {
  if (text.includes("%")) return undefined;
  const words = parseIPv6(text);
  if (words === undefined) return undefined;
  const bytes = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    bytes[i * 2] = words[i] >> 8;
    bytes[i * 2 + 1] = words[i] & 0xff;
  }
  return formatIPv6(bytes);
}

/** Reads one entry as an operator typed it: the stored form, or why it is refused. */
export function readBypassEntry(raw: string): BypassEntryResult {
  let text = raw.trim().toLowerCase();
  if (text === "" || text === ".") return fail(BypassMessage.empty);
  if (text.includes("*")) return fail(BypassMessage.wildcard);
  // An IPv6 address, bracketed or not (a port after brackets is a port).
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close !== -1 && close < text.length - 1) return fail(BypassMessage.port);
  }
  if (text.includes(":")) {
    const v6 = canonicalIPv6(text);
    if (v6 !== undefined) return { ok: true, entry: v6 };
    if (text.startsWith(".") && canonicalIPv6(text.slice(1)) !== undefined) {
      return fail(BypassMessage.suffixOfAddress);
    }
    if (/^[^:]+:\d*$/.test(text)) return fail(BypassMessage.port);
    return fail(BypassMessage.shape);
  }
  const suffix = text.startsWith(".");
  if (suffix) text = text.slice(1);
  if (text.endsWith(".")) text = text.slice(0, -1);
  if (text === "" || text.startsWith(".")) return fail(BypassMessage.label);
  // The URL standard's reading: a name whose last label is a number is an IPv4 address.
  if (endsInNumber(text)) {
    const v4 = parseIPv4(text);
    if (v4 === undefined) return fail(BypassMessage.shape);
    return suffix ? fail(BypassMessage.suffixOfAddress) : { ok: true, entry: formatIPv4(v4) };
  }
  // deno-lint-ignore no-control-regex
  if (/[^\x00-\x7f]/.test(text)) {
    const ascii = idnaAscii(text);
    if (ascii === undefined) return fail(BypassMessage.shape);
    text = ascii;
  }
  if (text.length > BYPASS_MAX_NAME_CHARS) return fail(BypassMessage.length);
  for (const label of text.split(".")) {
    if (label.length === 0 || label.length > MAX_LABEL_CHARS) return fail(BypassMessage.label);
    if (!/^[a-z0-9_-]+$/.test(label)) return fail(BypassMessage.shape);
  }
  return { ok: true, entry: suffix ? `.${text}` : text };
}

/** A list, indexed: exact names and addresses, and the suffixes (without their dot). */
export interface BypassIndex {
  readonly names: ReadonlySet<string>;
  readonly suffixes: ReadonlySet<string>;
}

/** Each list's index, by the list's identity (a snapshot's lists are built once and kept). */
const indexes = new WeakMap<readonly string[], BypassIndex>();

/**
 * The index of a stored list, built on first ask and kept while the list lives. Entries are
 * taken as stored; one that is not (a feed of another release) is read again, and left out when
 * it does not read.
 */
export function bypassIndex(bypass: readonly string[]): BypassIndex {
  let index = indexes.get(bypass);
  if (index !== undefined) return index;
  const names = new Set<string>();
  const suffixes = new Set<string>();
  for (const stored of bypass) {
    const read = readBypassEntry(stored);
    if (!read.ok) continue;
    if (read.entry.startsWith(".")) suffixes.add(read.entry.slice(1));
    else names.add(read.entry);
  }
  index = { names, suffixes };
  indexes.set(bypass, index);
  return index;
}

/**
 * Whether a tunnel to `host` stays raw under the list: the host is one of its names or
 * addresses, or a name under one of its suffixes. Any case, a root dot and IPv6 brackets are
 * ignored; an address matches an address entry only (`::ffff:1.2.3.4` is not `1.2.3.4`), in any
 * form the gateway's own reading takes (`127.1` is `127.0.0.1`).
 */
export function isBypassed(bypass: readonly string[], host: string): boolean {
  if (bypass.length === 0) return false;
  const index = bypassIndex(bypass);
  let name = normaliseHost(host);
  if (name.includes(":")) {
    const v6 = canonicalIPv6(name);
    return v6 !== undefined && index.names.has(v6);
  }
  if (index.names.has(name)) return true;
  if (endsInNumber(name)) {
    const v4 = parseIPv4(name);
    return v4 !== undefined && index.names.has(formatIPv4(v4));
  }
  // deno-lint-ignore no-control-regex
  if (/[^\x00-\x7f]/.test(name)) {
    const ascii = idnaAscii(name);
    if (ascii === undefined) return false;
    name = ascii;
    if (index.names.has(name)) return true;
  }
  if (index.suffixes.size === 0) return false;
  for (let dot = name.indexOf("."); dot !== -1; dot = name.indexOf(".", dot + 1)) {
    if (index.suffixes.has(name.slice(dot + 1))) return true;
  }
  return false;
}
