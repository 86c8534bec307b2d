/** The proxy address reader shared by the single-proxy routes and the upload, and countries. */
import { describe, expect, test } from "vitest";
import {
  formatProxyUrl,
  parseProxyLine,
  parseProxyUrl,
  proxyIdentity,
} from "../../control/model/proxy-url.ts";
import { normaliseCountry } from "../../shared/countries.ts";

describe("parseProxyUrl", () => {
  const good: [string, object][] = [
    ["http://h.example:8080", {
      scheme: "http",
      host: "h.example",
      port: 8080,
      username: null,
      password: null,
    }],
    ["HTTPS://User:Pw@H.Example:443/", {
      scheme: "https",
      host: "h.example",
      port: 443,
      username: "User",
      password: "Pw",
    }],
    ["socks5://u:p@ss:w@1.2.3.4:1080", { host: "1.2.3.4", username: "u", password: "p@ss:w" }],
    ["socks4://a%20b:c%2Fd@[::FFFF:1.2.3.4]:1", {
      host: "::ffff:1.2.3.4",
      username: "a b",
      password: "c/d",
    }],
    ["http://u@h:1", { username: "u", password: null }],
    ["http://u:@h:1", { username: "u", password: null }],
    ["http://under_score.example:65535", { host: "under_score.example", port: 65535 }],
  ];
  for (const [input, expected] of good) {
    test(`reads ${input}`, () => {
      const parsed = parseProxyUrl(input);
      expect(parsed.ok).toBe(true);
      if (parsed.ok) expect(parsed.value).toMatchObject(expected);
    });
  }

  const bad: [string, RegExp][] = [
    ["h.example:8080", /scheme/],
    ["socks5h://h:1", /unsupported scheme/],
    ["http://h", /port is missing/],
    ["http://h:0", /1 to 65535/],
    ["http://h:70000", /1 to 65535/],
    ["http://h:80/path", /no path/],
    ["http://h:80?x=1", /no path/],
    ["http://a b:80", /no spaces/],
    ["http://:pw@h:80", /needs a username/],
    ["http://u:%GG@h:80", /percent-encoding/],
    ["http://u:%0A@h:80", /control characters/],
    ["http://999.1.1.1:80", /IPv4/],
    ["http://[::1:80", /closing bracket/],
    ["http://[zz::1]:80", /IPv6/],
    ["http://::1:80", /brackets/],
    ["http://-bad-.example:80", /host name/],
    ["http://:80", /host is missing/],
  ];
  for (const [input, reason] of bad) {
    test(`refuses ${input}`, () => {
      const parsed = parseProxyUrl(input);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) expect(parsed.reason).toMatch(reason);
    });
  }

  test("formats without the password, and identity ignores host case and password", () => {
    const parsed = parseProxyUrl("socks5://us%3Aer:secret@[2001:db8::1]:1080");
    if (!parsed.ok) throw new Error(parsed.reason);
    expect(formatProxyUrl(parsed.value)).toBe("socks5://us%3Aer@[2001:db8::1]:1080");
    const a = parseProxyUrl("http://u:one@Host.Example:1");
    const b = parseProxyUrl("http://u:two@host.example:1");
    if (!a.ok || !b.ok) throw new Error("unexpected");
    expect(proxyIdentity(a.value)).toBe(proxyIdentity(b.value));
  });
});

describe("parseProxyLine", () => {
  test("skips blanks and comments, reads a country, refuses extra text", () => {
    expect(parseProxyLine("   ")).toBeUndefined();
    expect(parseProxyLine(" # note")).toBeUndefined();
    expect(parseProxyLine("http://h:1\tuk")).toMatchObject({ ok: true, value: { country: "GB" } });
    expect(parseProxyLine("http://h:1 zz")).toMatchObject({ ok: false });
    expect(parseProxyLine("http://h:1 us more")).toMatchObject({ ok: false });
  });
});

describe("countries", () => {
  test("normalise to upper case, uk as GB, unknown codes refused", () => {
    expect(normaliseCountry(" us ")).toBe("US");
    expect(normaliseCountry("uk")).toBe("GB");
    expect(normaliseCountry("XX")).toBeUndefined();
    expect(normaliseCountry("USA")).toBeUndefined();
  });
});
