/**
 * Properties of the one reading of a proxy address and of an upload's lines
 * (control/model/proxy-url.ts, control/services/proxies.ts): any text reads as an address or
 * a reason, never a throw; an address written from its parts (credentials percent-encoded) reads
 * back as those parts; formatProxyUrl's text reads back as the address it was made from; and an
 * upload's report accounts for every line.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  formatProxyUrl,
  parseHostPort,
  parseProxyLine,
  parseProxyUrl,
  type ProxyAddress,
} from "../../control/model/proxy-url.ts";
import { readUpload } from "../../control/services/proxies.ts";
import { PROXY_SCHEMES } from "../../shared/roles.ts";
import { authorityOf, host, port } from "./grammar.ts";
import { check, mutatedText } from "./runs.ts";

/** Credentials without control characters (those are refused), any other Unicode. */
const credential = fc.string({ unit: "grapheme", minLength: 1, maxLength: 30 }).filter((text) =>
  // deno-lint-ignore no-control-regex
  !/[\u0000-\u001f\u007f]/.test(text)
);

const address: fc.Arbitrary<ProxyAddress> = fc.record({
  scheme: fc.constantFrom(...PROXY_SCHEMES),
  host: host.map((h) => h.host),
  port,
  username: fc.option(credential, { nil: null }),
  password: fc.option(credential, { nil: null }),
}).map((a) => (a.username === null ? { ...a, password: null } : a));

function writeUrl(a: ProxyAddress, schemeCase: boolean, encodeAll: boolean): string {
  const scheme = schemeCase ? a.scheme.toUpperCase() : a.scheme;
  const encode = (text: string) =>
    // Passwords in proxy lists often carry an unencoded @: only the last @ ends them.
    encodeAll ? encodeURIComponent(text) : encodeURIComponent(text).replaceAll("%40", "@");
  let userinfo = "";
  if (a.username !== null) {
    userinfo = encodeURIComponent(a.username);
    if (a.password !== null) userinfo += `:${encode(a.password)}`;
    userinfo += "@";
  }
  return `${scheme}://${userinfo}${authorityOf(a.host, a.port)}`;
}

const validUrl = fc.tuple(address, fc.boolean(), fc.boolean()).map(([a, upper, all]) =>
  writeUrl(a, upper, all)
);

const validLine = fc.tuple(
  validUrl,
  fc.constantFrom("", " us", "\tGB", " uk", "  de  ", " xx"),
  fc.constantFrom("", "  ", "\t"),
).map(([url, country, indent]) => `${indent}${url}${country}`);

describe("proxy addresses (property)", () => {
  it("any text: an address, or a reason that says what is wrong; never a throw", () => {
    check(
      fc.property(mutatedText(validUrl), (text) => {
        for (const read of [parseProxyUrl, parseHostPort]) {
          const result = read(text);
          if (!result.ok) expect(result.reason.length).toBeGreaterThan(8);
        }
        const url = parseProxyUrl(text);
        if (url.ok) {
          expect(PROXY_SCHEMES).toContain(url.value.scheme);
          expect(url.value.port >= 1 && url.value.port <= 65535).toBe(true);
          expect(url.value.host).toBe(url.value.host.toLowerCase());
        }
      }),
      4,
    );
  });

  it("an address written from its parts reads back as those parts", () => {
    check(
      fc.property(address, fc.boolean(), fc.boolean(), (a, upper, all) => {
        expect(parseProxyUrl(writeUrl(a, upper, all))).toEqual({ ok: true, value: a });
      }),
      2,
    );
  });

  it("formatProxyUrl's text reads back as the address, less its password", () => {
    check(
      fc.property(address, (a) => {
        expect(parseProxyUrl(formatProxyUrl(a))).toEqual({
          ok: true,
          value: { ...a, password: null },
        });
      }),
    );
  });
});

describe("upload lines (property)", () => {
  it("any line: skipped, an address, or a reason; an upload's report counts every line", () => {
    check(
      fc.property(
        fc.array(mutatedText(validLine), { maxLength: 12 }),
        fc.boolean(),
        (lines, crlf) => {
          for (const line of lines) {
            const read = parseProxyLine(line);
            if (read !== undefined && !read.ok) expect(read.reason.length).toBeGreaterThan(8);
          }
          const text = lines.join(crlf ? "\r\n" : "\n");
          const upload = readUpload(text);
          const counted = upload.good.length + upload.errors.length + upload.repeated.length;
          expect(counted).toBeLessThanOrEqual(upload.totalLines);
          for (const { line } of upload.errors) {
            expect(line >= 1 && line <= upload.totalLines).toBe(true);
          }
        },
      ),
    );
  });

  it("a line of an address and a country reads back as both", () => {
    check(
      fc.property(address, fc.constantFrom(["us", "US"], ["uk", "GB"], ["De", "DE"]), (a, [
        written,
        country,
      ]) => {
        expect(parseProxyLine(`  ${writeUrl(a, false, true)}\t${written} `)).toEqual({
          ok: true,
          value: { address: a, country },
        });
      }),
    );
  });
});
