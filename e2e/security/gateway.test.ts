/**
 * The security corpus against a real gateway (gateway/main.ts under Deno) on a hand-made feed,
 * started WITHOUT an allow list, so its destination guard forbids loopback as a real install's
 * does. Its one upstream is a working proxy of ours on this machine (it would reach loopback if
 * asked to), and a sink listens on 127.0.0.1 where every forbidden spelling points:
 *
 * - every spelling of a forbidden address (decimal, octal, hex and short IPv4, IPv4-mapped,
 *   compatible, NAT64 and 6to4 IPv6, the unspecified address, names that resolve to loopback,
 *   trailing dots, mixed case, link-local and cloud metadata) is refused over HTTP (403),
 *   CONNECT (403) and SOCKS5 (reply 2, not allowed by ruleset), and neither the upstream nor
 *   the sink ever sees it;
 * - request smuggling shapes (Content-Length with Transfer-Encoding, two lengths, an encoding
 *   other than a lone `chunked`, obsolete line folding, a bare LF beside a CRLF, a lone CR, a
 *   control character in a value) are 400 and closed, and nothing reaches the upstream; bare LF
 *   line ends alone are read as line ends (the head is written anew with CRLF);
 * - CR, LF and control characters in usernames, passwords and option headers never reach an
 *   answer's header nor split a log line.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { startSink } from "../../testkit/upstreams/sink.ts";
import type { Sink } from "../../testkit/upstreams/sink.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  publishFeed,
  startFeedGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import { ipv6Bytes, SocksAtyp, socksOpen, socksRequest } from "../../testkit/clients/socks.ts";
import { basicAuth, RawConnection, type RawResponse } from "../../testkit/clients/raw-http.ts";

const USERNAME = "guarded";
const PASSWORD = "guarded-pass-1234";
const LOGIN = `${USERNAME}:${PASSWORD}`;
const AUTH = `Proxy-Authorization: ${basicAuth(LOGIN)}\r\n`;
/** The destination of the smuggling cases (a name the guard lets through to the upstream). */
const SMUGGLE_HOST = "smuggle.test";

let bed: FeedBed;
let upstream: FaultProxy;
/** Where every forbidden spelling points: it must never see a connection. */
let sink: Sink;
/** The sink's connections and the upstream's requests before the corpus ran. */
let sinkBaseline = 0;
let upstreamBaseline = 0;
let gateway: FeedGateway;
let proxyPort: number;
let socksPort: number;

beforeAll(async () => {
  [bed, upstream, sink] = await Promise.all([
    feedBed(),
    // Requests for the smuggling cases' host are answered at once, without dialling anything.
    startFaultProxy({ hostModes: { [SMUGGLE_HOST]: FaultMode.status502 } }),
    startSink(),
  ]);
  await bed.lead();
  // No OCTOPROX_DESTINATION_ALLOW_CIDRS: loopback is forbidden, as in a real install.
  gateway = await startFeedGateway(bed, { OCTOPROX_CONNECT_TIMEOUT: "3" });
  await publishFeed(bed, {
    projects: [{ id: "guarded", username: USERNAME, password: PASSWORD }],
    connectors: [{
      id: "c-guarded",
      projectId: "guarded",
      proxies: [{ id: "up", scheme: "http", host: upstream.host, port: upstream.port }],
    }],
  });
  proxyPort = await gateway.proxyPort();
  socksPort = await gateway.socksPort();
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([upstream?.close(), sink?.close()]);
  await bed?.close();
});

/**
 * Sends `bytes` on a connection of its own; answers the response and, when `untilClosed`,
 * whether the gateway closed the connection after it (within 5 s).
 */
async function exchange(
  bytes: string | Buffer,
  untilClosed = false,
): Promise<{ response: RawResponse; closed: boolean }> {
  const connection = await RawConnection.open(proxyPort);
  try {
    connection.write(bytes);
    const response = await connection.readResponse();
    const closed = untilClosed &&
      await connection.waitUntil(() => connection.ended, 5_000).then(() => true, () => false);
    return { response, closed };
  } finally {
    connection.destroy();
  }
}

/** The upstream's requests for the sink's port since the corpus began (a leak if any). */
const toSinkSince = () =>
  upstream.requests.slice(upstreamBaseline).filter((request) => request.port === sink.port)
    .map((request) => `${request.protocol} ${request.host}`);

/**
 * Host spellings of forbidden addresses, as a client writes them in a URL or a CONNECT target
 * (IPv6 in brackets). Each means loopback, the unspecified address, link-local or metadata.
 */
const SPELLINGS = [
  "127.0.0.1",
  "2130706433", // decimal
  "0177.0.0.1", // octal
  "0x7f.0.0.1", // hex
  "0x7f000001",
  "0X7F.0X0.0X0.0X1",
  "017700000001",
  "127.1", // short forms
  "127.0.1",
  "127.000.000.001",
  "127.0.0.1.", // trailing dot
  "0.0.0.0",
  "0",
  "0x0",
  "169.254.169.254", // cloud metadata
  "2852039166",
  "0xa9fea9fe",
  "169.254.1.1", // link-local
  "[::1]",
  "[0:0:0:0:0:0:0:1]",
  "[::]",
  "[::ffff:127.0.0.1]", // IPv4-mapped
  "[::ffff:7f00:1]",
  "[::FFFF:7F00:0001]",
  "[::127.0.0.1]", // IPv4-compatible
  "[64:ff9b::7f00:1]", // NAT64
  "[64:ff9b::127.0.0.1]",
  "[2002:7f00:1::]", // 6to4
  "[::ffff:169.254.169.254]",
  "[fe80::1]",
  "[fd00:ec2::254]",
  "localhost", // names: RFC 6761 and /etc/hosts
  "localhost.",
  "LocalHost",
  "LOCALHOST.",
  "app.localhost",
  "vm",
  "VM.",
];

describe("the destination guard, without an allow list", () => {
  test("the sink and the upstream are reachable: a refusal below is the guard's", async () => {
    const { response } = await exchange(
      `GET http://127.0.0.1:${sink.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${sink.port}\r\n` +
        `Proxy-Authorization: ${basicAuth(LOGIN)}\r\nConnection: close\r\n\r\n`,
    );
    expect(response.status).toBe(403);
    // The upstream itself connects to the sink when asked directly (it is on this machine).
    const direct = await RawConnection.open(upstream.port);
    direct.write(`CONNECT 127.0.0.1:${sink.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await direct.waitUntil(() => direct.buffered.includes("\r\n\r\n"));
    expect(direct.buffered.toString("latin1")).toMatch(/^HTTP\/1\.1 200/);
    direct.write("ping");
    await direct.waitUntil(() => sink.connections > 0);
    direct.destroy();
    upstreamBaseline = upstream.requests.length;
    sinkBaseline = sink.connections;
  });

  test.each(SPELLINGS)("HTTP to %s is 403, never dialled", async (host) => {
    const { response } = await exchange(
      `GET http://${host}:${sink.port}/latest/meta-data/ HTTP/1.1\r\nHost: ${host}:${sink.port}\r\n` +
        `Proxy-Authorization: ${basicAuth(LOGIN)}\r\nConnection: close\r\n\r\n`,
    );
    expect(response.status, response.body.toString()).toBe(403);
    expect(response.body.toString()).toMatch(/^Destination not allowed: /);
    expect(response.headers.get("proxy-status")?.[0]).toMatch(/destination_ip_prohibited/);
    expect(toSinkSince()).toEqual([]);
  });

  test.each(SPELLINGS)("CONNECT to %s is 403, never dialled", async (host) => {
    const { response } = await exchange(
      `CONNECT ${host}:${sink.port} HTTP/1.1\r\nHost: ${host}:${sink.port}\r\n` +
        `Proxy-Authorization: ${basicAuth(LOGIN)}\r\n\r\n`,
    );
    expect(response.status, response.body.toString()).toBe(403);
    expect(response.headers.get("proxy-status")?.[0]).toMatch(/destination_ip_prohibited/);
    expect(toSinkSince()).toEqual([]);
  });

  test.each(SPELLINGS)("SOCKS5 to %s (a name) is refused by the ruleset, never dialled", async (
    host,
  ) => {
    const name = host.replace(/^\[|\]$/g, "");
    const opened = await socksOpen(
      socksPort,
      { username: USERNAME, password: PASSWORD },
      socksRequest(1, SocksAtyp.domain, Buffer.from(name), sink.port),
    );
    opened.connection.destroy();
    expect(opened.authStatus).toBe(0);
    expect(opened.reply).toBe(2);
    expect(toSinkSince()).toEqual([]);
  });

  test.each(
    [
      ["IPv4 127.0.0.1", SocksAtyp.ipv4, Buffer.from([127, 0, 0, 1])],
      ["IPv4 0.0.0.0", SocksAtyp.ipv4, Buffer.from([0, 0, 0, 0])],
      ["IPv4 169.254.169.254", SocksAtyp.ipv4, Buffer.from([169, 254, 169, 254])],
      ["IPv6 ::1", SocksAtyp.ipv6, ipv6Bytes("::1")],
      ["IPv6 ::", SocksAtyp.ipv6, ipv6Bytes("::")],
      ["IPv6 ::ffff:7f00:1", SocksAtyp.ipv6, ipv6Bytes("::ffff:7f00:1")],
      ["IPv6 ::7f00:1", SocksAtyp.ipv6, ipv6Bytes("::7f00:1")],
      ["IPv6 64:ff9b::7f00:1", SocksAtyp.ipv6, ipv6Bytes("64:ff9b::7f00:1")],
      ["IPv6 fe80::1", SocksAtyp.ipv6, ipv6Bytes("fe80::1")],
    ] as const,
  )("SOCKS5 to the address %s is refused by the ruleset", async (_, atyp, bytes) => {
    const opened = await socksOpen(
      socksPort,
      { username: USERNAME, password: PASSWORD },
      socksRequest(1, atyp, bytes, sink.port),
    );
    opened.connection.destroy();
    expect(opened.reply).toBe(2);
    expect(toSinkSince()).toEqual([]);
  });

  test("nothing reached the sink", () => {
    expect(sink.connections).toBe(sinkBaseline);
  });
});

/** The upstream's requests for the smuggling cases' host. */
const smuggled = () => upstream.requests.filter((request) => request.host.endsWith(SMUGGLE_HOST));

const POST = `POST http://${SMUGGLE_HOST}/upload HTTP/1.1\r\nHost: ${SMUGGLE_HOST}\r\n${AUTH}`;
/** What a smuggler hopes the upstream reads as a second request. */
const INNER =
  `GET http://inner.${SMUGGLE_HOST}/admin HTTP/1.1\r\nHost: inner.${SMUGGLE_HOST}\r\n\r\n`;

const SMUGGLING: readonly [string, string][] = [
  [
    "Content-Length and Transfer-Encoding",
    `${POST}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${INNER}`,
  ],
  [
    "Transfer-Encoding before Content-Length",
    `${POST}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n${INNER}`,
  ],
  [
    "two different Content-Lengths",
    `${POST}Content-Length: 5\r\nContent-Length: 77\r\n\r\nhello${INNER}`,
  ],
  ["a Content-Length list", `${POST}Content-Length: 5, 77\r\n\r\nhello${INNER}`],
  ["a signed Content-Length", `${POST}Content-Length: +5\r\n\r\nhello`],
  ["a hex Content-Length", `${POST}Content-Length: 0x5\r\n\r\nhello`],
  [
    "Transfer-Encoding: chunked, identity",
    `${POST}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n`,
  ],
  [
    "Transfer-Encoding: identity, chunked",
    `${POST}Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n`,
  ],
  ["Transfer-Encoding: xchunked", `${POST}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n${INNER}`],
  [
    "Transfer-Encoding: chunked twice",
    `${POST}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  ],
  [
    "a second Transfer-Encoding line",
    `${POST}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n`,
  ],
  ["a space before the colon", `${POST}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n${INNER}`],
  [
    "a vertical tab before the value",
    `${POST}Transfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n${INNER}`,
  ],
  [
    "Transfer-Encoding in HTTP/1.0",
    `${POST.replace("HTTP/1.1", "HTTP/1.0")}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  ],
  ["a line folded with a space", `${POST}X-Note: a\r\n folded\r\nContent-Length: 0\r\n\r\n`],
  ["a line folded with a tab", `${POST}X-Note: a\r\n\tfolded\r\nContent-Length: 0\r\n\r\n`],
  [
    "Transfer-Encoding folded onto the next line",
    `${POST}Transfer-Encoding:\r\n chunked\r\nContent-Length: 5\r\n\r\nhello${INNER}`,
  ],
  [
    "a bare LF inside the head",
    `${POST}X-Note: a\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n`,
  ],
  ["a CR without LF", `${POST}X-Note: a\rTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n`],
  ["a NUL in a header value", `${POST}X-Note: a\0b\r\nContent-Length: 0\r\n\r\n`],
];

describe("request smuggling shapes", () => {
  test("a well formed request with a body reaches the upstream (the check can fail)", async () => {
    const { response } = await exchange(
      `${POST}Content-Length: 5\r\nConnection: close\r\n\r\nhello`,
    );
    expect(response.status).toBe(502);
    expect(smuggled().map((request) => request.host)).toEqual([SMUGGLE_HOST]);
  });

  test("bare LF line ends are read as line ends: one request upstream, none smuggled", async () => {
    // RFC 9112 section 2.2 lets a recipient take LF alone; the head sent on is written anew
    // with CRLF, so the upstream cannot read it otherwise.
    const before = smuggled().length;
    const { response } = await exchange(
      `POST http://${SMUGGLE_HOST}/ HTTP/1.1\nHost: ${SMUGGLE_HOST}\n${AUTH.trimEnd()}\n` +
        `Content-Length: ${INNER.length}\nConnection: close\n\n${INNER}`,
    );
    expect(response.status).toBe(502);
    expect(smuggled().slice(before).map((request) => request.host)).toEqual([SMUGGLE_HOST]);
  });

  test.each(SMUGGLING)("%s: 400 and closed, nothing forwarded", async (_, bytes) => {
    const before = smuggled().length;
    const { response, closed } = await exchange(bytes, true);
    expect(response.status, response.body.toString()).toBe(400);
    expect(closed).toBe(true);
    expect(smuggled().length).toBe(before);
  });
});

/** The control characters (C0 and DEL) of `text` other than those `allowed`, by code. */
function controlCharacters(text: string, allowed: string): number[] {
  return [...text].map((char) => char.charCodeAt(0)).filter((code) =>
    (code < 0x20 || code === 0x7f) && !allowed.includes(String.fromCharCode(code))
  );
}

/** Basic credentials of any bytes (a base64 credential may carry CR, LF and the like). */
const basicOf = (login: string) => `Basic ${Buffer.from(login, "latin1").toString("base64")}`;

const INJECTED = "\r\nX-Injected: 1\r\nSet-Cookie: stolen=1";

describe("control characters in credentials and options", () => {
  const get = (headers: string) =>
    `GET http://${SMUGGLE_HOST}/ HTTP/1.1\r\nHost: ${SMUGGLE_HOST}\r\n${headers}Connection: close\r\n\r\n`;

  test.each([
    ["a username with CR LF", `guarded${INJECTED}:${PASSWORD}`],
    ["a password with CR LF", `${USERNAME}:pass${INJECTED}`],
    ["username options with CR LF", `${USERNAME}-cc-de${INJECTED}:${PASSWORD}`],
    ["a username with an escape sequence", `guarded\x1b[31mINJECTED\x1b[0m\x00\x07:${PASSWORD}`],
    ["a session id with CR LF", `${USERNAME}-sessid-a${INJECTED}:${PASSWORD}`],
    [
      "a session id with control characters",
      `${USERNAME}-sessid-a\x01\x7f\x1bINJECTED:${PASSWORD}`,
    ],
  ])("%s: refused, nothing of it in a header", async (what, login) => {
    const { response } = await exchange(get(`Proxy-Authorization: ${basicOf(login)}\r\n`));
    // A wrong login is 407; options written wrong are 400 (the option's own message).
    expect(response.status).toBe(/options|session/.test(what) ? 400 : 407);
    expect(response.headers.has("x-injected")).toBe(false);
    expect(response.headers.has("set-cookie")).toBe(false);
    expect(controlCharacters(response.head, "\r\n")).toEqual([]);
    expect(response.head).not.toContain("INJECTED");
  });

  test.each([
    ["X-Octoprox-Country", "de\x1b[31m"],
    ["X-Octoprox-Session", "abc\x01\x7f"],
    ["X-Octoprox-Session-Time", "10\x1b"],
    ["X-Octoprox-City", "berlin\x07"],
    ["X-Octoprox-State", "by\x0b"],
  ])(
    "%s with control characters: 400 naming it, the value never echoed raw",
    async (name, value) => {
      const { response } = await exchange(get(`${AUTH}${name}: ${value}\r\n`));
      expect(response.status).toBe(400);
      const answer = Buffer.concat([Buffer.from(response.head, "latin1"), response.body]).toString(
        "latin1",
      );
      expect(controlCharacters(answer, "\r\n")).toEqual([]);
    },
  );

  test("a SOCKS5 username with CR LF fails its sub-negotiation", async () => {
    const opened = await socksOpen(
      socksPort,
      { username: `guarded${INJECTED}`, password: PASSWORD },
      socksRequest(1, SocksAtyp.domain, Buffer.from(SMUGGLE_HOST), 80),
    );
    opened.connection.destroy();
    expect(opened.authStatus).not.toBe(0);
  });

  test("every line the gateway wrote is one JSON object, control characters escaped", () => {
    const output = gateway.output();
    expect(controlCharacters(output, "\n")).toEqual([]);
    for (const line of output.split("\n").filter((text) => text !== "")) {
      expect(() => JSON.parse(line), line).not.toThrow();
    }
    expect(output).not.toMatch(/\nX-Injected|\nSet-Cookie/);
    expect(output).toContain("Proxy listener bound");
  });
});
