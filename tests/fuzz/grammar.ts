/**
 * Arbitraries of the valid pieces the parsers' grammars share (hosts, ports, HTTP tokens and
 * field values), for the property tests of tests/fuzz/.
 */
import fc from "fast-check";
import { formatIPv4, formatIPv6 } from "../../shared/proxy-protocol/address.ts";

export const port: fc.Arbitrary<number> = fc.integer({ min: 1, max: 65535 });

const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?$/);

/** A DNS name of letters, digits and hyphens, at least one letter so it is no IPv4 literal. */
export const hostName: fc.Arbitrary<string> = fc.array(label, { minLength: 1, maxLength: 4 })
  .map((labels) => labels.join("."))
  .filter((name) => /[a-z]/.test(name));

export const ipv4: fc.Arbitrary<string> = fc.uint8Array({ minLength: 4, maxLength: 4 }).map(
  formatIPv4,
);

/** An IPv6 literal without brackets, as formatIPv6 writes it (RFC 5952). */
export const ipv6: fc.Arbitrary<string> = fc.oneof(
  fc.uint8Array({ minLength: 16, maxLength: 16 }),
  // Mostly zeros, so the :: forms come up.
  fc.array(fc.constantFrom(0, 0, 0, 1, 0xff), { minLength: 16, maxLength: 16 }).map((bytes) =>
    Uint8Array.from(bytes)
  ),
).map(formatIPv6);

export type HostKindName = "name" | "ipv4" | "ipv6";

export const host: fc.Arbitrary<{ kind: HostKindName; host: string }> = fc.oneof(
  hostName.map((host) => ({ kind: "name" as const, host })),
  ipv4.map((host) => ({ kind: "ipv4" as const, host })),
  ipv6.map((host) => ({ kind: "ipv6" as const, host })),
);

/** `host:port` as a URL or CONNECT writes it (an IPv6 host in brackets). */
export function authorityOf(host: string, port: number | undefined): string {
  const written = host.includes(":") ? `[${host}]` : host;
  return port === undefined ? written : `${written}:${port}`;
}

/** An RFC 9110 token. */
export const token: fc.Arbitrary<string> = fc.stringMatching(
  /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,16}$/,
);

/**
 * A field value as a parser hands it back: no CR, LF or NUL, nothing JavaScript's trim takes at
 * either end, Latin-1 beyond ASCII included.
 */
export const fieldValue: fc.Arbitrary<string> = fc.stringMatching(
  // Control characters other than CR, LF and NUL are what this is after.
  // deno-lint-ignore no-control-regex
  /^([\x21-\x7e\xa1-\xff]([\x01-\x08\t\x0b\x0c\x0e-\x7e\xa1-\xff]{0,24}[\x21-\x7e\xa1-\xff])?)?$/,
);

/**
 * A field value of a request the gateway takes (RFC 9110 field-value): visible characters, with
 * spaces and tabs inside; the gateway refuses every other control character in a request.
 */
export const requestFieldValue: fc.Arbitrary<string> = fc.stringMatching(
  /^([\x21-\x7e\xa1-\xff]([\t\x20-\x7e\xa1-\xff]{0,24}[\x21-\x7e\xa1-\xff])?)?$/,
);

/** A line ending a lenient reader takes: CRLF mostly, a bare LF now and then. */
export const lineEnd: fc.Arbitrary<string> = fc.constantFrom("\r\n", "\r\n", "\r\n", "\n");
