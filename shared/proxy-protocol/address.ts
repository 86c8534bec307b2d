/** Host and port checks, and IP literal parsing, for the bytes a handshake sends. */

/**
 * A dotted-quad IPv4 literal (decimal, no leading zeros) as an unsigned 32-bit number, or
 * undefined when the text is not one. By hand, without allocating: every request's host comes
 * here (and the gateway's guard reads the common form through it too).
 */
export function dottedQuadValue(text: string): number | undefined {
  if (text.length < 7 || text.length > 15) return undefined;
  let result = 0;
  let parts = 0;
  let value = 0;
  let digits = 0;
  for (let index = 0; index <= text.length; index++) {
    const code = index < text.length ? text.charCodeAt(index) : 46; // a final "."
    if (code === 46) {
      if (digits === 0 || parts > 3) return undefined;
      result = result * 256 + value;
      parts++;
      value = 0;
      digits = 0;
    } else if (code >= 48 && code <= 57) {
      if (digits > 0 && value === 0) return undefined; // a leading zero
      value = value * 10 + code - 48;
      if (++digits > 3 || value > 255) return undefined;
    } else {
      return undefined;
    }
  }
  return parts === 4 ? result : undefined;
}

/** Parses a dotted-quad IPv4 literal (decimal, no leading zeros) into 4 bytes. */
export function parseIPv4(text: string): Uint8Array | undefined {
  const value = dottedQuadValue(text);
  if (value === undefined) return undefined;
  return Uint8Array.of(value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff);
}

/** Parses an IPv6 literal, with or without brackets, into 16 bytes. Zone ids are refused. */
export function parseIPv6(text: string): Uint8Array | undefined {
  let literal = text;
  if (literal.startsWith("[") && literal.endsWith("]")) literal = literal.slice(1, -1);
  if (!literal.includes(":") || literal.includes("%")) return undefined;
  const words: number[] = [];
  let tail: number[] = [];
  const halves = literal.split("::");
  if (halves.length > 2) return undefined;
  const parseWords = (part: string, into: number[], allowIPv4: boolean): boolean => {
    if (part === "") return true;
    const groups = part.split(":");
    for (let index = 0; index < groups.length; index++) {
      const group = groups[index];
      if (allowIPv4 && index === groups.length - 1 && group.includes(".")) {
        const v4 = parseIPv4(group);
        if (!v4) return false;
        into.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
        continue;
      }
      if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return false;
      into.push(parseInt(group, 16));
    }
    return true;
  };
  if (halves.length === 1) {
    if (!parseWords(halves[0], words, true) || words.length !== 8) return undefined;
  } else {
    if (!parseWords(halves[0], words, false) || !parseWords(halves[1], tail, true)) {
      return undefined;
    }
    if (words.length + tail.length > 7) return undefined;
    const zeros = new Array<number>(8 - words.length - tail.length).fill(0);
    tail = zeros.concat(tail);
    words.push(...tail);
  }
  const bytes = new Uint8Array(16);
  for (let index = 0; index < 8; index++) {
    bytes[index * 2] = words[index] >> 8;
    bytes[index * 2 + 1] = words[index] & 0xff;
  }
  return bytes;
}

export function formatIPv4(bytes: Uint8Array): string {
  return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
}

/** Formats 16 bytes in the RFC 5952 form (lower case, longest zero run as ::). */
export function formatIPv6(bytes: Uint8Array): string {
  const words: number[] = [];
  for (let index = 0; index < 8; index++) {
    words.push((bytes[index * 2] << 8) | bytes[index * 2 + 1]);
  }
  let bestStart = -1;
  let bestLength = 1;
  for (let index = 0; index < 8;) {
    if (words[index] !== 0) {
      index++;
      continue;
    }
    let end = index;
    while (end < 8 && words[end] === 0) end++;
    if (end - index > bestLength) {
      bestStart = index;
      bestLength = end - index;
    }
    index = end;
  }
  const hex = (from: number, to: number) =>
    words.slice(from, to).map((word) => word.toString(16)).join(":");
  if (bestStart < 0) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLength, 8)}`;
}

// RFC 3986 reg-name characters: no spaces, CR/LF, slashes or '@', so a host cannot smuggle
// header lines or a userinfo into a request line.
const REG_NAME = /^[A-Za-z0-9\-._~!$&'()*+,;=]+$/;

export const HostKind = { ipv4: "ipv4", ipv6: "ipv6", name: "name" } as const;
export type HostKind = (typeof HostKind)[keyof typeof HostKind];

/** What kind of host this is, or undefined when it is not a usable host at all. */
export function hostKind(host: string): HostKind | undefined {
  if (dottedQuadValue(host) !== undefined) return HostKind.ipv4;
  if (host.includes(":")) return parseIPv6(host) ? HostKind.ipv6 : undefined;
  if (host.length === 0 || host.length > 255 || !REG_NAME.test(host)) return undefined;
  return HostKind.name;
}

export function isValidPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

/** `host:port`, with brackets around an IPv6 literal (the CONNECT request-target form). */
export function formatAuthority(host: string, port: number): string {
  if (host.includes(":") && !host.startsWith("[")) return `[${host}]:${port}`;
  return `${host}:${port}`;
}
