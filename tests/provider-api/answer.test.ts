/**
 * A provider API's fetch answer read as proxies: every format and every way an entry writes its
 * address, country and expiry; the safety margin and entries over on arrival; uniqueness by
 * scheme, host, port and username (first kept); section 8.1's classification against the keys
 * already owned; the byte and item caps.
 */
import { describe, expect, it } from "vitest";
import {
  type AnswerSpec,
  answerSpecIssues,
  classifyFetch,
  FetchKind,
  MAX_INVALID_SHOWN,
  parseAnswer,
  type ParsedAnswer,
} from "../../control/provider-api/answer.ts";
import { proxyIdentity } from "../../control/model/proxy-url.ts";
import { ProviderAnswerError, VendorCallError } from "../../shared/errors.ts";

const NOW = Date.parse("2030-01-01T00:00:00Z");
const TEXT: AnswerSpec = {
  format: "text",
  defaultScheme: "http",
  defaultTtlSeconds: 60,
  safetyMarginMs: 5_000,
};
const JSON_SPEC: AnswerSpec = { format: "json", defaultScheme: "http", safetyMarginMs: 0 };
const CSV: AnswerSpec = { format: "csv", defaultScheme: "http", safetyMarginMs: 0 };

/** The answer's proxies as `scheme://user:pass@host:port`, to compare at a glance. */
function shown(answer: ParsedAnswer): string[] {
  return answer.proxies.map((p) => {
    const host = p.host.includes(":") ? `[${p.host}]` : p.host;
    const user = p.username === null ? "" : `${p.username}:${p.password ?? ""}@`;
    return `${p.scheme}://${user}${host}:${p.port}`;
  });
}

/** The ProviderAnswerError `run` throws. */
function answerError(run: () => unknown): ProviderAnswerError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderAnswerError);
    return error as ProviderAnswerError;
  }
  throw new Error("expected a ProviderAnswerError");
}

describe("text answers", () => {
  it("reads the four line forms, skipping blank lines and comments", () => {
    const answer = parseAnswer(
      [
        "# proxies for you",
        "198.51.100.1:8080",
        "",
        "  198.51.100.2:8081:alice:s3cret  ",
        "bob:pw@proxy.example.com:3128",
        "socks5://carol:pw@198.51.100.4:1080",
        "HTTPS://Dave:pw@Proxy-Two.Example.com:443",
        "[2001:db8::1]:8080:erin:pw",
        "   # an indented comment",
      ].join("\r\n"),
      TEXT,
      NOW,
    );
    expect(shown(answer)).toEqual([
      "http://198.51.100.1:8080",
      "http://alice:s3cret@198.51.100.2:8081",
      "http://bob:pw@proxy.example.com:3128",
      "socks5://carol:pw@198.51.100.4:1080",
      "https://Dave:pw@proxy-two.example.com:443",
      "http://erin:pw@[2001:db8::1]:8080",
    ]);
    expect(answer.counts).toEqual({ entries: 6, parsed: 6, invalid: 0, expired: 0, repeated: 0 });
    expect(answer.proxies.every((p) => p.country === null)).toBe(true);
  });

  it("takes host:port:user:pass credentials as written: colons, @ and % are the password's", () => {
    const answer = parseAnswer(
      "198.51.100.1:8080:alice:pa:ss\n198.51.100.2:8080:bob:p@ss\n198.51.100.3:8080:carol:100%41\n",
      TEXT,
      NOW,
    );
    expect(answer.proxies.map((p) => [p.username, p.password])).toEqual([
      ["alice", "pa:ss"],
      ["bob", "p@ss"],
      ["carol", "100%41"],
    ]);
  });

  it("reads user:pass@host:port in the URL's encoding, as the upload does", () => {
    const answer = parseAnswer("alice:p%40ss@198.51.100.1:8080\n", TEXT, NOW);
    expect(answer.proxies[0].password).toBe("p@ss");
  });

  it("uses the connector's default scheme for lines that name none", () => {
    const answer = parseAnswer("198.51.100.1:1080\n", { ...TEXT, defaultScheme: "socks5" }, NOW);
    expect(answer.proxies[0].scheme).toBe("socks5");
  });

  it("counts invalid lines with their line and reason, never repeating the line", () => {
    const answer = parseAnswer(
      [
        "198.51.100.1:8080",
        "no-port-here",
        "198.51.100.2:8080:user-without-password",
        "hunter2secret://198.51.100.3:8080",
        "198.51.100.4:99999",
        "alice:pw-secret@198.51.100.5",
        "999.1.1.1:8080",
      ].join("\n"),
      TEXT,
      NOW,
    );
    expect(answer.counts).toMatchObject({ entries: 7, parsed: 1, invalid: 6 });
    expect(answer.invalid.map((entry) => entry.position)).toEqual([2, 3, 4, 5, 6, 7]);
    expect(answer.invalid[0].reason).toBe("the port is missing (host:port)");
    expect(answer.invalid[2].reason).toMatch(/^unsupported scheme; use one of http/);
    expect(answer.invalid[3].reason).toBe("the port must be from 1 to 65535");
    const reasons = JSON.stringify(answer.invalid);
    for (const secret of ["hunter2secret", "user-without-password", "pw-secret"]) {
      expect(reasons).not.toContain(secret);
    }
  });

  it("describes the first invalid entries only, and counts them all", () => {
    const lines = Array.from({ length: MAX_INVALID_SHOWN + 5 }, () => "nonsense");
    const answer = parseAnswer([...lines, "198.51.100.1:8080"].join("\n"), TEXT, NOW);
    expect(answer.counts.invalid).toBe(MAX_INVALID_SHOWN + 5);
    expect(answer.invalid).toHaveLength(MAX_INVALID_SHOWN);
  });
});

describe("JSON answers", () => {
  const spec: AnswerSpec = {
    ...JSON_SPEC,
    items: "data.list",
    fields: {
      host: "addr.ip",
      port: "addr.port",
      scheme: "type",
      username: "auth.user",
      password: "auth.pass",
      country: "geo.cc",
      expires_at: "expire",
      ttl_seconds: "ttl",
    },
  };
  const entry = (extra: Record<string, unknown> = {}) => ({
    addr: { ip: "198.51.100.1", port: 8080 },
    auth: { user: "alice", pass: "s3cret" },
    geo: { cc: "de" },
    ttl: 120,
    ...extra,
  });
  const answerOf = (list: unknown, overrides: Partial<AnswerSpec> = {}) =>
    parseAnswer(JSON.stringify({ code: 0, data: { list } }), { ...spec, ...overrides }, NOW);

  it("reads each entry's fields at their JMESPath expressions", () => {
    const answer = answerOf([entry(), entry({ addr: { ip: "2001:DB8::2", port: "3128" } })]);
    expect(answer.proxies).toEqual([
      {
        scheme: "http",
        host: "198.51.100.1",
        port: 8080,
        username: "alice",
        password: "s3cret",
        key: proxyIdentity({ scheme: "http", host: "198.51.100.1", port: 8080, username: "alice" }),
        country: "DE",
        expiresAtMs: NOW + 120_000,
        usableUntilMs: NOW + 120_000,
      },
      expect.objectContaining({ host: "2001:db8::2", port: 3128 }),
    ]);
  });

  it("reads fields at their own names when the spec names no expression", () => {
    const answer = parseAnswer(
      JSON.stringify([{ host: "198.51.100.1", port: 1080, scheme: "SOCKS5", ttl_seconds: 30 }]),
      JSON_SPEC,
      NOW,
    );
    expect(answer.proxies).toEqual([
      expect.objectContaining({
        scheme: "socks5",
        host: "198.51.100.1",
        port: 1080,
        username: null,
        password: null,
        expiresAtMs: NOW + 30_000,
      }),
    ]);
  });

  it("reads an entry that is a string as a text line, and a lone object as one entry", () => {
    const lines = parseAnswer(
      JSON.stringify({ proxies: ["198.51.100.1:8080:alice:pw", "socks5://198.51.100.2:1080"] }),
      { ...JSON_SPEC, items: "proxies", defaultTtlSeconds: 60 },
      NOW,
    );
    expect(shown(lines)).toEqual([
      "http://alice:pw@198.51.100.1:8080",
      "socks5://198.51.100.2:1080",
    ]);
    const lone = parseAnswer(
      JSON.stringify({ host: "198.51.100.9", port: 80, ttl_seconds: 5 }),
      JSON_SPEC,
      NOW,
    );
    expect(shown(lone)).toEqual(["http://198.51.100.9:80"]);
  });

  it("reads countries as ISO codes, and anything else as none", () => {
    const answer = answerOf([
      entry({ geo: { cc: "us" } }),
      entry({ addr: { ip: "198.51.100.2", port: 1 }, geo: { cc: "uk" } }),
      entry({ addr: { ip: "198.51.100.3", port: 1 }, geo: { cc: "Mars" } }),
      entry({ addr: { ip: "198.51.100.4", port: 1 }, geo: null }),
    ]);
    expect(answer.proxies.map((p) => p.country)).toEqual(["US", "GB", null, null]);
    expect(answer.counts.invalid).toBe(0);
  });

  it("reads expires_at as epoch seconds, epoch milliseconds or ISO 8601 with its zone", () => {
    const at = NOW + 600_000;
    const forms: [unknown, number][] = [
      [at / 1000, at],
      [String(at / 1000), at],
      [at, at],
      [String(at), at],
      [new Date(at).toISOString(), at],
      ["2030-01-01T00:10:00Z", at],
      ["2030-01-01 00:10:00z", at],
      ["2030-01-01T01:10:00+01:00", at],
      ["2030-01-01T01:10:00+0100", at],
      ["2030-01-01T01:10+01", at],
      ["2030-01-01T00:10:00.250Z", at + 250],
    ];
    const answer = answerOf(
      forms.map(([expire], index) =>
        entry({ addr: { ip: `198.51.100.${index + 1}`, port: 1 }, expire, ttl: 1 })
      ),
    );
    expect(answer.counts.invalid).toBe(0);
    expect(answer.proxies.map((p) => p.expiresAtMs)).toEqual(forms.map(([, ms]) => ms));
  });

  it("refuses an expiry it would have to guess, and an entry with no expiry at all", () => {
    const answer = answerOf([
      entry({ expire: "2030-01-01T00:10:00" }),
      entry({ expire: "next tuesday" }),
      entry({ expire: -5 }),
      entry({ ttl: "soon" }),
      entry({ ttl: -1 }),
      entry({ ttl: undefined }),
    ]);
    expect(answer.counts).toMatchObject({ entries: 6, parsed: 0, invalid: 6 });
    expect(answer.invalid.map((e) => e.reason)).toEqual([
      ...Array(3).fill(
        "expires_at is not epoch seconds, epoch milliseconds or an ISO 8601 time with its zone",
      ),
      "ttl_seconds is not a number of seconds",
      "ttl_seconds is not a number of seconds",
      "no expiry: the entry has no expires_at or ttl_seconds and no default TTL is set",
    ]);
  });

  it("takes expires_at over ttl_seconds, and ttl_seconds over the default TTL", () => {
    const answer = answerOf([
      entry({ expire: (NOW + 50_000) / 1000, ttl: 10 }),
      entry({ addr: { ip: "198.51.100.2", port: 1 }, ttl: 10 }),
      entry({ addr: { ip: "198.51.100.3", port: 1 }, ttl: undefined }),
    ], { defaultTtlSeconds: 900 });
    expect(answer.proxies.map((p) => p.expiresAtMs - NOW)).toEqual([50_000, 10_000, 900_000]);
  });

  it("counts entries of the wrong shape as invalid", () => {
    const answer = answerOf([
      entry(),
      42,
      [1, 2],
      null,
      entry({ addr: { ip: ["198.51.100.2"], port: 1 } }),
      entry({ addr: { port: 1 } }),
      entry({ addr: { ip: "198.51.100.3" } }),
      entry({ type: "ftp" }),
      entry({ auth: { pass: "orphan-password" } }),
    ]);
    expect(answer.counts).toMatchObject({ entries: 9, parsed: 1, invalid: 8 });
    expect(answer.invalid.map((e) => e.reason)).toEqual([
      "the entry is neither an object nor a proxy line",
      "the entry is neither an object nor a proxy line",
      "the entry is neither an object nor a proxy line",
      "host is not a string or a number",
      "the host is missing",
      "the port is missing",
      "unsupported scheme; use one of http, https, socks4, socks5",
      "a password needs a username",
    ]);
    expect(JSON.stringify(answer.invalid)).not.toContain("orphan-password");
  });

  it("reads a null selection as no entries", () => {
    const answer = answerOf(null);
    expect(answer.proxies).toEqual([]);
    expect(answer.counts.entries).toBe(0);
  });

  it("refuses an answer that is not JSON, or whose selection is not a list, without quoting it", () => {
    const notJson = answerError(() =>
      parseAnswer("alice:hunter2@198.51.100.1:8080", JSON_SPEC, NOW)
    );
    expect(notJson.reason).toBe("malformed");
    expect(notJson.message).toBe("the answer is not JSON");
    expect(notJson.cause).toBeUndefined();
    const notList = answerError(() => answerOf("hunter2"));
    expect(notList).toMatchObject({
      reason: "malformed",
      message: 'the items expression "data.list" found no list in the answer',
    });
    const scalar = answerError(() => parseAnswer('"hunter2"', JSON_SPEC, NOW));
    expect(scalar.message).toBe("the answer is neither a list nor an object");
  });
});

describe("CSV answers", () => {
  it("reads columns named by the fields, ignoring others, in any case and order", () => {
    const answer = parseAnswer(
      [
        "Port,HOST,note,username,password,country,ttl_seconds,scheme",
        "8080,198.51.100.1,fast,alice,s3cret,fr,60,",
        "1080,198.51.100.2,,,,,30,socks5",
      ].join("\r\n") + "\r\n",
      CSV,
      NOW,
    );
    expect(answer.proxies).toEqual([
      expect.objectContaining({
        scheme: "http",
        host: "198.51.100.1",
        port: 8080,
        username: "alice",
        password: "s3cret",
        country: "FR",
        expiresAtMs: NOW + 60_000,
      }),
      expect.objectContaining({
        scheme: "socks5",
        host: "198.51.100.2",
        username: null,
        password: null,
        country: null,
        expiresAtMs: NOW + 30_000,
      }),
    ]);
  });

  it("reads quoted fields per RFC 4180: commas, doubled quotes, line breaks", () => {
    const answer = parseAnswer(
      [
        "host,port,username,password,expires_at,note",
        '198.51.100.1,8080,alice,"a,b""c",2030-01-01T00:05:00Z,plain',
        '"198.51.100.2","8081","bob","p w",1893456300,"two\r\nlines, ""quoted"""',
        "198.51.100.3,8082,carol, spaced ,1893456300000,",
      ].join("\r\n"),
      CSV,
      NOW,
    );
    expect(answer.proxies.map((p) => [p.host, p.password, p.expiresAtMs])).toEqual([
      ["198.51.100.1", 'a,b"c', NOW + 300_000],
      ["198.51.100.2", "p w", NOW + 300_000],
      ["198.51.100.3", " spaced ", NOW + 300_000],
    ]);
  });

  it("refuses a line break inside a credential (it would end up in a header)", () => {
    const answer = parseAnswer(
      'host,port,username,password,ttl_seconds\n198.51.100.1,8080,bob,"line\nbreak",60\n',
      CSV,
      NOW,
    );
    expect(answer.invalid).toEqual([{
      position: 2,
      reason: "the password holds control characters",
    }]);
  });

  it("counts rows whose field count differs from the header's, at their line", () => {
    const answer = parseAnswer(
      [
        "host,port,ttl_seconds",
        '198.51.100.1,8080,"60',
        '"',
        "198.51.100.2,8081",
        "",
        "198.51.100.3,8082,60,extra",
        "198.51.100.4,8083,60",
      ].join("\n"),
      CSV,
      NOW,
    );
    // The first row spans lines 2 and 3 (its TTL is "60\n", read as 60): later rows keep their
    // own line numbers.
    expect(answer.counts).toMatchObject({ entries: 4, parsed: 2, invalid: 2 });
    expect(answer.invalid).toEqual([
      { position: 4, reason: "the row has 2 fields where the header has 3" },
      { position: 6, reason: "the row has 4 fields where the header has 3" },
    ]);
  });

  it("reads a header alone as no entries", () => {
    const answer = parseAnswer("host,port,ttl_seconds\r\n", CSV, NOW);
    expect(answer.counts.entries).toBe(0);
  });

  it("refuses a header without host or port, a repeated column, and broken quoting", () => {
    expect(answerError(() => parseAnswer("ip,port\n1.2.3.4,80\n", CSV, NOW)).message).toBe(
      "the header names no host column",
    );
    expect(answerError(() => parseAnswer("host,port,PORT\n", CSV, NOW)).message).toBe(
      "the header names the port column twice",
    );
    expect(
      answerError(() => parseAnswer('host,port\n"198.51.100.1,80\n', CSV, NOW)).message,
    ).toBe("the quoted field on line 2 is never closed");
    const stray = answerError(() => parseAnswer('host,port\n"198.51.100.1"x,80\n', CSV, NOW));
    expect(stray).toMatchObject({
      reason: "malformed",
      message: "text follows a quoted field's closing quote on line 2",
    });
  });
});

describe("expiry and uniqueness", () => {
  it("drops and counts entries already past their usable time (expiry less the margin)", () => {
    const answer = parseAnswer(
      JSON.stringify([
        { host: "198.51.100.1", port: 1, ttl_seconds: 10 },
        { host: "198.51.100.2", port: 1, ttl_seconds: 5 },
        { host: "198.51.100.3", port: 1, ttl_seconds: 0 },
        { host: "198.51.100.4", port: 1, expires_at: (NOW - 1000) / 1000 },
        { host: "198.51.100.5", port: 1, ttl_seconds: 5.001 },
      ]),
      { ...JSON_SPEC, safetyMarginMs: 5_000 },
      NOW,
    );
    expect(answer.proxies.map((p) => [p.host, p.expiresAtMs - NOW, p.usableUntilMs - NOW]))
      .toEqual([
        ["198.51.100.1", 10_000, 5_000],
        ["198.51.100.5", 5_001, 1],
      ]);
    expect(answer.counts).toMatchObject({ parsed: 5, expired: 3, repeated: 0 });
  });

  it("keys a proxy by scheme, host in any case, port and username; never the password", () => {
    const answer = parseAnswer(
      [
        "http://alice:first@Proxy.Example.com:8080",
        "http://alice:second@proxy.example.COM:8080",
        "proxy.example.com:8080:alice:third",
        "proxy.example.com:8080:bob:first",
        "socks5://alice:first@proxy.example.com:8080",
        "proxy.example.com:8081:alice:first",
        "proxy.example.com:8080",
      ].join("\n"),
      TEXT,
      NOW,
    );
    expect(shown(answer)).toEqual([
      "http://alice:first@proxy.example.com:8080",
      "http://bob:first@proxy.example.com:8080",
      "socks5://alice:first@proxy.example.com:8080",
      "http://alice:first@proxy.example.com:8081",
      "http://proxy.example.com:8080",
    ]);
    expect(answer.counts).toMatchObject({ entries: 7, parsed: 7, repeated: 2 });
  });

  it("keeps the first of repeats with its own expiry; an expired first holds no key", () => {
    const answer = parseAnswer(
      JSON.stringify([
        { host: "198.51.100.1", port: 1, ttl_seconds: 0 },
        { host: "198.51.100.1", port: 1, ttl_seconds: 100 },
        { host: "198.51.100.1", port: 1, ttl_seconds: 900 },
      ]),
      JSON_SPEC,
      NOW,
    );
    expect(answer.proxies.map((p) => p.expiresAtMs - NOW)).toEqual([100_000]);
    expect(answer.counts).toMatchObject({ parsed: 3, expired: 1, repeated: 1 });
  });
});

describe("the classification (section 8.1)", () => {
  const json = (entries: unknown[]) =>
    parseAnswer(JSON.stringify(entries), { ...JSON_SPEC, defaultTtlSeconds: 60 }, NOW);
  const at = (n: number, extra: Record<string, unknown> = {}) => ({
    host: `198.51.100.${n}`,
    port: 8080,
    username: `user${n}`,
    password: `secret-${n}`,
    ...extra,
  });
  const keyOf = (n: number) =>
    proxyIdentity({ scheme: "http", host: `198.51.100.${n}`, port: 8080, username: `user${n}` });

  it("is success with at least one new proxy, counting each kind of entry", () => {
    const answer = json([at(1), at(2), at(2), at(3), at(4, { ttl_seconds: 0 }), { port: 1 }]);
    const result = classifyFetch({ answer }, new Set([keyOf(3)]));
    expect(result.kind).toBe(FetchKind.success);
    expect(result.counts).toEqual({
      entries: 6,
      parsed: 5,
      invalid: 1,
      expired: 1,
      repeated: 1,
      owned: 1,
      duplicates: 2,
      new: 2,
    });
    expect(result.fresh.map((p) => p.key)).toEqual([keyOf(1), keyOf(2)]);
    expect(result.invalid).toEqual([{ position: 6, reason: "the host is missing" }]);
    expect(result.error).toBeUndefined();
  });

  it("is duplicate_only when every live proxy is owned, here or by another upstream", () => {
    const answer = json([at(1), at(2, { password: "rotated" }), at(1)]);
    const owned = new Set([keyOf(1), keyOf(2)]);
    const result = classifyFetch({ answer }, owned);
    expect(result.kind).toBe(FetchKind.duplicateOnly);
    expect(result.counts).toMatchObject({
      parsed: 3,
      repeated: 1,
      owned: 2,
      duplicates: 3,
      new: 0,
    });
    expect(result.fresh).toEqual([]);
  });

  it("is empty with no entries, and with entries all over on arrival", () => {
    expect(classifyFetch({ answer: json([]) }, new Set()).kind).toBe(FetchKind.empty);
    const text = parseAnswer("# nothing today\n\n", TEXT, NOW);
    expect(classifyFetch({ answer: text }, new Set()).kind).toBe(FetchKind.empty);
    const over = classifyFetch({ answer: json([at(1, { ttl_seconds: 0 })]) }, new Set());
    expect(over.kind).toBe(FetchKind.empty);
    expect(over.counts).toMatchObject({ parsed: 1, expired: 1, new: 0 });
  });

  it("is error when every entry is invalid: an error page served as 200 is no Empty", () => {
    const answer = parseAnswer("<html>\n<body>Login required</body>\n</html>\n", TEXT, NOW);
    const result = classifyFetch({ answer }, new Set());
    expect(result.kind).toBe(FetchKind.error);
    expect(result.error).toBeInstanceOf(ProviderAnswerError);
    expect(result.error).toMatchObject({
      reason: "no_proxies",
      message: "none of the answer's 3 entries is a proxy",
    });
    expect(result.counts).toMatchObject({ entries: 3, invalid: 3, new: 0 });
    expect(result.invalid).toHaveLength(3);
  });

  it("is error for a failed call, with the provider's status when it answered one", () => {
    const http500 = new VendorCallError("provider.example/proxies answered 500", { status: 500 });
    expect(classifyFetch({ error: http500 }, new Set())).toMatchObject({
      kind: FetchKind.error,
      status: 500,
      error: http500,
      fresh: [],
    });
    const limited = new VendorCallError("provider.example/proxies answered 429", { status: 429 });
    expect(classifyFetch({ error: limited }, new Set()).status).toBe(429);
    const timeout = classifyFetch({ error: new Error("timed out") }, new Set());
    expect(timeout.kind).toBe(FetchKind.error);
    expect(timeout.status).toBeUndefined();
    expect(timeout.counts).toMatchObject({ entries: 0, parsed: 0, new: 0 });
  });

  it("is error for an unreadable answer", () => {
    let error: unknown;
    try {
      parseAnswer("{", JSON_SPEC, NOW);
    } catch (caught) {
      error = caught;
    }
    expect(classifyFetch({ error }, new Set())).toMatchObject({
      kind: FetchKind.error,
      error: expect.objectContaining({ reason: "malformed" }),
    });
  });

  it("never carries a password in its counts or reasons", () => {
    const answer = json([at(1), { host: "198.51.100.2", port: "x", password: "secret-x" }]);
    const result = classifyFetch({ answer }, new Set());
    const told = JSON.stringify({ counts: result.counts, invalid: result.invalid });
    expect(told).not.toMatch(/secret-/);
  });
});

describe("caps", () => {
  it("refuses an answer over the byte cap, counting bytes rather than characters", () => {
    const line = "198.51.100.1:8080\n";
    expect(parseAnswer(line, { ...TEXT, maxBytes: line.length }, NOW).proxies).toHaveLength(1);
    const error = answerError(() => parseAnswer(line, { ...TEXT, maxBytes: line.length - 1 }, NOW));
    expect(error).toMatchObject({
      reason: "too_large",
      message: `the answer is ${line.length} bytes, more than the ${line.length - 1} a fetch reads`,
    });
    const accented = "# é\n";
    expect(answerError(() => parseAnswer(accented, { ...TEXT, maxBytes: 4 }, NOW)).reason).toBe(
      "too_large",
    );
    const bytes = new TextEncoder().encode(line);
    expect(answerError(() => parseAnswer(bytes, { ...TEXT, maxBytes: 10 }, NOW)).reason).toBe(
      "too_large",
    );
  });

  it("reads bytes as UTF-8, a byte-order mark dropped", () => {
    const bytes = new TextEncoder().encode("\uFEFFhost,port,ttl_seconds\n198.51.100.1,80,9\n");
    expect(parseAnswer(bytes, CSV, NOW).proxies).toHaveLength(1);
    expect(parseAnswer("\uFEFF198.51.100.1:80\n", TEXT, NOW).proxies).toHaveLength(1);
  });

  it("refuses an answer with more entries than the item cap, in every format", () => {
    const lines = ["198.51.100.1:1", "198.51.100.2:1", "198.51.100.3:1"];
    expect(parseAnswer(lines.join("\n"), { ...TEXT, maxItems: 3 }, NOW).proxies).toHaveLength(3);
    const text = answerError(() => parseAnswer(lines.join("\n"), { ...TEXT, maxItems: 2 }, NOW));
    expect(text).toMatchObject({
      reason: "too_many_items",
      message: "the answer holds more than 2 entries, the most a fetch reads",
    });
    const list = JSON.stringify(lines);
    const json = answerError(() =>
      parseAnswer(list, { ...JSON_SPEC, defaultTtlSeconds: 9, maxItems: 2 }, NOW)
    );
    expect(json.message).toBe("the answer holds 3 entries, more than the 2 a fetch reads");
    const csv = `host,port,ttl_seconds\n${lines.map((l) => `${l.replace(":", ",")},9`).join("\n")}`;
    expect(answerError(() => parseAnswer(csv, { ...CSV, maxItems: 2 }, NOW)).reason).toBe(
      "too_many_items",
    );
    // Invalid entries count too: an answer of junk is bounded like any other.
    const junk = "x\n".repeat(5);
    expect(answerError(() => parseAnswer(junk, { ...TEXT, maxItems: 4 }, NOW)).reason).toBe(
      "too_many_items",
    );
  });
});

describe("the parser's settings", () => {
  it("names what is wrong with a spec", () => {
    expect(answerSpecIssues({ ...JSON_SPEC, items: "data.list", fields: { host: "a.b" } }))
      .toEqual([]);
    const issues = answerSpecIssues({
      format: "csv",
      items: "data",
      fields: { host: "ip" },
      defaultScheme: "ftp" as "http",
      defaultTtlSeconds: 0,
      safetyMarginMs: -1,
      maxBytes: 1.5,
      maxItems: 0,
    });
    expect(issues.map((issue) => issue.field)).toEqual([
      "items",
      "fields.host",
      "defaultScheme",
      "defaultTtlSeconds",
      "safetyMarginMs",
      "maxBytes",
      "maxItems",
    ]);
    const json = answerSpecIssues({
      ...JSON_SPEC,
      items: "data[",
      fields: { host: "ip..x", region: "r" } as AnswerSpec["fields"],
    });
    expect(json.map((issue) => issue.field)).toEqual(["items", "fields.host", "fields.region"]);
    expect(json[0].message).toMatch(/^not a JMESPath expression/);
  });

  it("refuses to read with a spec that does not compile", () => {
    const error = answerError(() => parseAnswer("[]", { ...JSON_SPEC, items: "data[" }, NOW));
    expect(error.reason).toBe("spec");
    expect(error.message).toMatch(/^the connector's answer settings do not compile: items not a/);
  });
});

describe("size", () => {
  const entries = (count: number, distinct: boolean) =>
    JSON.stringify({
      data: {
        list: Array.from({ length: count }, (_, i) => {
          const n = distinct ? i : 0;
          return {
            ip: `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`,
            port: 8000 + (n % 1000),
            user: `user${n}`,
            pass: `pass${n}`,
            cc: "us",
            ttl: 300,
          };
        }),
      },
    });
  const spec: AnswerSpec = {
    ...JSON_SPEC,
    items: "data.list",
    fields: { host: "ip", username: "user", password: "pass", country: "cc", ttl_seconds: "ttl" },
  };
  // How long it takes is the bench's to say (timed figures do not belong in unit tests).
  it("reads 10,000 entries, distinct or all one key", () => {
    const ten = entries(10_000, true);
    const answer = parseAnswer(ten, spec, NOW);
    expect(answer.proxies).toHaveLength(10_000);
    const same = parseAnswer(entries(10_000, false), spec, NOW);
    expect(same.proxies).toHaveLength(1);
    expect(same.counts.repeated).toBe(9_999);
  });
});
