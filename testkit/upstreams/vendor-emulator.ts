/**
 * A proxy vendor for the end-to-end tests: its gateway and its API.
 *
 * `startVendorProxy` is a real proxy on 127.0.0.1 (HTTP absolute-form and CONNECT, and SOCKS5
 * with username/password on the same port when `socks5`) that reads the client's credentials
 * with a vendor's grammar (vendor-grammars.ts), refuses a wrong password or an unparsable
 * username (407, or SOCKS5's auth failure), and connects to the target from a loopback address
 * chosen by `exitFor`: one per (country, session), a fresh one for each request without a
 * session. A test behind an echo origin (origin.ts, echo.ts) so sees which country and session
 * the gateway asked for; `requests` records every request the grammar parsed. `moveSession`
 * makes one session leave from another country's exits from then on, whatever it asks: a
 * vendor whose residential exit drifted, for the tests of preflight.
 *
 * `startVendorApi` is the HTTPS API a sync calls (test certificate, certs.ts): a token
 * endpoint, a paginated proxy list, an exit list for port pools and a credential check, whose
 * data the test changes at any time.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { COUNTRY_CODES } from "../../shared/countries.ts";
import {
  encodeSocks5AuthStatus,
  encodeSocks5MethodSelection,
  encodeSocks5Reply,
  offersUserPass,
  parseSocks5Greeting,
  parseSocks5Request,
  parseSocks5UserPass,
  Socks5ServerError,
} from "../../shared/proxy-protocol/socks5-server.ts";
import { Socks5Command, Socks5Method, Socks5Reply } from "../../shared/proxy-protocol/socks5.ts";
import { testCertificate } from "../certs.ts";
import { parseBasicAuth } from "../../shared/routing/basic-auth.ts";
import type { VendorGrammar, VendorRequest } from "./vendor-grammars.ts";

export * from "./vendor-grammars.ts";

// ---------------------------------------------------------------------------------------------
// Exits.

/** The second octet of an exit without a country (country codes take 1 to 249). */
const NO_COUNTRY = 250;

/** FNV-1a: a stable spread of session ids over exits. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    h ^= text.charCodeAt(index);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The loopback address a request leaves from: `127.<country>.<x>.<y>`, never .0 or .255. With
 * a session (and a lifetime other than 0) it depends on the country and the session only, with
 * x from 1 to 127; without one, `fresh` (a counter) picks x from 128 to 254, so each request
 * gets an exit no session has.
 */
export function exitFor(
  request: Pick<VendorRequest, "country" | "session" | "sessionMinutes">,
  fresh = 0,
): string {
  const index = request.country === undefined ? -1 : COUNTRY_CODES.indexOf(request.country);
  const country = index === -1 ? NO_COUNTRY : index + 1;
  if (request.session !== undefined && request.sessionMinutes !== 0) {
    const h = hash(request.session);
    return `127.${country}.${1 + (h % 127)}.${1 + ((h >>> 8) % 254)}`;
  }
  return `127.${country}.${128 + (Math.floor(fresh / 254) % 127)}.${1 + (fresh % 254)}`;
}

// ---------------------------------------------------------------------------------------------
// The proxy.

export interface VendorProxyOptions {
  grammar: VendorGrammar;
  /** Passwords by account (`VendorRequest.account`). */
  accounts: Readonly<Record<string, string>>;
  /** Also speak SOCKS5 (username/password) on the same port. */
  socks5?: boolean;
}

export interface VendorProxy {
  readonly host: string;
  readonly port: number;
  /** `http://127.0.0.1:<port>`, without credentials. */
  readonly url: string;
  /** Every request the grammar parsed, wrong passwords included, oldest first. */
  readonly requests: readonly VendorRequest[];
  /** Requests refused with 407 (or SOCKS5's auth failure). */
  readonly refused: number;
  /**
   * From now on the session leaves from `country`'s exits (`exitFor` with that country), as if
   * the vendor had handed it an exit elsewhere; its own asked country is ignored.
   */
  moveSession(sessionId: string, country: string): void;
  close(): Promise<void>;
}

/** The target's socket, leaving from `exit` (IPv6 targets from the system's choice). */
function dial(host: string, port: number, exit: string): Promise<net.Socket | undefined> {
  return new Promise((resolve) => {
    const v6 = net.isIPv6(host.replace(/^\[|\]$/g, ""));
    const socket = net.connect(
      v6
        ? { host: host.replace(/^\[|\]$/g, ""), port }
        : { host, port, localAddress: exit, family: 4 },
    );
    socket.once("connect", () => {
      socket.removeAllListeners("error");
      resolve(socket);
    });
    socket.once("error", () => {
      socket.destroy();
      resolve(undefined);
    });
  });
}

/** Bytes of a socket for a parser that answers undefined until its message is whole. */
class MessageReader {
  readonly #socket: net.Socket;
  #buffer: Buffer;
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(socket: net.Socket, first: Buffer) {
    this.#socket = socket;
    this.#buffer = first;
    socket.on("data", this.#onData);
    socket.once("close", this.#onEnd);
    socket.resume();
  }

  async read<T extends { consumed: number }>(parse: (bytes: Uint8Array) => T | undefined) {
    for (;;) {
      const message = parse(this.#buffer);
      if (message !== undefined) {
        this.#buffer = this.#buffer.subarray(message.consumed);
        return message;
      }
      if (this.#ended) throw new Error("client closed");
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  /** Stops reading; answers what came after the last message. */
  release(): Buffer {
    this.#socket.pause();
    this.#socket.off("data", this.#onData);
    this.#socket.off("close", this.#onEnd);
    return this.#buffer;
  }

  readonly #onData = (chunk: Buffer) => {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    this.#wake?.();
  };

  readonly #onEnd = () => {
    this.#ended = true;
    this.#wake?.();
  };
}

function pipeBoth(client: net.Socket, upstream: net.Socket, rest: Buffer): void {
  const cut = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on("error", cut);
  upstream.on("error", cut);
  client.once("close", cut);
  upstream.once("close", cut);
  if (rest.length > 0) upstream.write(rest);
  client.pipe(upstream);
  upstream.pipe(client);
  client.resume();
}

const HOP_HEADERS = new Set([
  "proxy-authorization",
  "proxy-connection",
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

export async function startVendorProxy(options: VendorProxyOptions): Promise<VendorProxy> {
  const { grammar, accounts } = options;
  const requests: VendorRequest[] = [];
  const sockets = new Set<net.Socket>();
  let refused = 0;
  let fresh = 0;
  /** Sessions moved to another country's exits, by session id. */
  const moved = new Map<string, string>();

  /** The request the credentials ask for, recorded; undefined when refused. */
  const authorize = (username: string, password: string): VendorRequest | undefined => {
    const parsed = grammar.parse(username, password);
    if (parsed === undefined) {
      refused++;
      return undefined;
    }
    requests.push(parsed);
    const own = grammar.accountPassword ? grammar.accountPassword(password) : password;
    if (!Object.hasOwn(accounts, parsed.account) || accounts[parsed.account] !== own) {
      refused++;
      return undefined;
    }
    return parsed;
  };
  const exit = (request: VendorRequest) => {
    const elsewhere = request.session === undefined ? undefined : moved.get(request.session);
    return exitFor(elsewhere === undefined ? request : { ...request, country: elsewhere }, fresh++);
  };
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
  };

  const realm = 'Basic realm="vendor"';
  const server = http.createServer((incoming, response) => {
    const credentials = parseBasicAuth(incoming.headers["proxy-authorization"] ?? null);
    const asked = credentials && authorize(credentials.username, credentials.password);
    if (!asked) {
      response.writeHead(407, { "proxy-authenticate": realm });
      return void response.end();
    }
    let target: URL;
    try {
      target = new URL(incoming.url ?? "");
      if (target.protocol !== "http:") throw new Error("not http");
    } catch {
      response.writeHead(400);
      return void response.end();
    }
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (!HOP_HEADERS.has(name) && value !== undefined) headers[name] = value;
    }
    const host = target.hostname.replace(/^\[|\]$/g, "");
    const upstream = http.request({
      host,
      port: Number(target.port || 80),
      method: incoming.method,
      path: `${target.pathname}${target.search}`,
      headers,
      // Names resolve to IPv4, so the request can leave from its 127/8 exit.
      ...(net.isIPv6(host) ? {} : { localAddress: exit(asked), family: 4 }),
      agent: false,
    }, (answer) => {
      const kept: http.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(answer.headers)) {
        if (!HOP_HEADERS.has(name) && value !== undefined) kept[name] = value;
      }
      response.writeHead(answer.statusCode ?? 502, kept);
      answer.pipe(response);
    });
    upstream.once("error", () => {
      if (!response.headersSent) response.writeHead(502);
      response.end();
    });
    incoming.pipe(upstream);
  });
  server.on("connect", async (incoming: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    track(client);
    const credentials = parseBasicAuth(incoming.headers["proxy-authorization"] ?? null);
    const asked = credentials && authorize(credentials.username, credentials.password);
    if (!asked) {
      return void client.end(
        "HTTP/1.1 407 Proxy Authentication Required\r\n" +
          `Proxy-Authenticate: ${realm}\r\nContent-Length: 0\r\n\r\n`,
      );
    }
    const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(incoming.url ?? "");
    if (match === null) return void client.end("HTTP/1.1 400 Bad Request\r\n\r\n");
    const upstream = await dial(match[1] ?? match[2], Number(match[3]), exit(asked));
    if (upstream === undefined) return void client.end("HTTP/1.1 502 Bad Gateway\r\n\r\n");
    track(upstream);
    client.write("HTTP/1.1 200 Connection established\r\n\r\n");
    pipeBoth(client, upstream, head);
  });

  const serveSocks5 = async (client: net.Socket, first: Buffer) => {
    const reader = new MessageReader(client, first);
    const greeting = await reader.read(parseSocks5Greeting);
    if (!offersUserPass(greeting)) {
      return void client.end(encodeSocks5MethodSelection(Socks5Method.noAcceptable));
    }
    client.write(encodeSocks5MethodSelection(Socks5Method.userPass));
    const sent = await reader.read(parseSocks5UserPass);
    const asked = authorize(
      Buffer.from(sent.usernameBytes).toString("utf8"),
      Buffer.from(sent.passwordBytes).toString("utf8"),
    );
    if (!asked) return void client.end(encodeSocks5AuthStatus(false));
    client.write(encodeSocks5AuthStatus(true));
    let wanted;
    try {
      wanted = await reader.read(parseSocks5Request);
    } catch (error) {
      const reply = error instanceof Socks5ServerError ? error.reply : undefined;
      return void client.end(encodeSocks5Reply(reply ?? Socks5Reply.generalFailure));
    }
    if (wanted.command !== Socks5Command.connect) {
      return void client.end(encodeSocks5Reply(Socks5Reply.commandNotSupported));
    }
    const upstream = await dial(wanted.target.host, wanted.target.port, exit(asked));
    if (upstream === undefined) {
      return void client.end(encodeSocks5Reply(Socks5Reply.connectionRefused));
    }
    track(upstream);
    client.write(
      encodeSocks5Reply(Socks5Reply.succeeded, {
        host: upstream.localAddress ?? "0.0.0.0",
        port: upstream.localPort ?? 0,
      }),
    );
    pipeBoth(client, upstream, reader.release());
  };

  // One port for every protocol: the first byte tells SOCKS5 (5) from HTTP.
  const front = net.createServer((socket) => {
    track(socket);
    if (!options.socks5) return void server.emit("connection", socket);
    socket.once("data", (first: Buffer) => {
      socket.pause();
      if (first[0] === 0x05) {
        serveSocks5(socket, first).catch(() => socket.destroy());
        return;
      }
      socket.unshift(first);
      server.emit("connection", socket);
      socket.resume();
    });
  });
  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(0, "127.0.0.1", () => {
      front.off("error", reject);
      resolve();
    });
  });
  const port = (front.address() as net.AddressInfo).port;

  let closing: Promise<void> | undefined;
  return {
    host: "127.0.0.1",
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    get refused() {
      return refused;
    },
    moveSession(sessionId, country) {
      moved.set(sessionId, country.toUpperCase());
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        front.close(() => resolve());
        server.closeAllConnections();
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The API.

export interface VendorApiProxy {
  proxy_address: string;
  port: number;
  username: string;
  password: string;
  country_code: string;
}

export interface VendorExit {
  ip: string;
  port: number;
  country: string;
}

export const VENDOR_API_ROUTES = ["token", "proxies", "exits", "me"] as const;
export type VendorApiRoute = (typeof VENDOR_API_ROUTES)[number];

export interface VendorApiOptions {
  /** The account's API key: the token endpoint's and the credential check's. */
  apiKey: string;
  proxies?: readonly VendorApiProxy[];
  exits?: readonly VendorExit[];
  /** Proxies per page of `GET /proxies` (2 unless told, so small lists have pages). */
  pageSize?: number;
  /** Where `next` links point (this API unless told): another host, for the guard's tests. */
  nextBase?: string;
}

export interface VendorApi {
  /** `https://127.0.0.1:<port>`. */
  readonly url: string;
  /** The PEM to trust. */
  readonly ca: string;
  /** Requests served, by route. */
  readonly counts: Readonly<Record<VendorApiRoute, number>>;
  setProxies(proxies: readonly VendorApiProxy[]): void;
  setExits(exits: readonly VendorExit[]): void;
  /** Whether `GET /me` says the account is active (its answer's `active`). */
  setActive(active: boolean): void;
  /** Ends every token issued so far: their next use is a 401. */
  revokeTokens(): void;
  close(): Promise<void>;
}

/**
 * Routes (JSON answers):
 *   POST /auth/token  {"api_key"} → {"token"}; another key: 401
 *   GET /proxies?page=N  Bearer token → {"results": [...], "next": <absolute URL or null>}
 *   GET /exits        Bearer token or X-Api-Key → [{"ip", "port", "country"}]
 *   GET /me           X-Api-Key header or ?api_key= → 200 {"active"}; another key: 401
 */
export async function startVendorApi(options: VendorApiOptions): Promise<VendorApi> {
  const certificate = await testCertificate();
  const pageSize = options.pageSize ?? 2;
  let proxies = [...(options.proxies ?? [])];
  let exits = [...(options.exits ?? [])];
  let active = true;
  const tokens = new Set<string>();
  const counts: Record<VendorApiRoute, number> = { token: 0, proxies: 0, exits: 0, me: 0 };
  let base = "";

  const json = (response: http.ServerResponse, status: number, value: unknown) => {
    const body = JSON.stringify(value);
    response.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
    response.end(body);
  };
  const bearer = (request: http.IncomingMessage) => {
    const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? "");
    return match !== null && tokens.has(match[1]);
  };
  const keyed = (request: http.IncomingMessage, url: URL) =>
    (request.headers["x-api-key"] ?? url.searchParams.get("api_key")) === options.apiKey;

  const server = https.createServer(
    { cert: certificate.cert, key: certificate.key },
    (request, response) => {
      const url = new URL(request.url ?? "/", "https://vendor");
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.once("end", () => {
        const route = `${request.method} ${url.pathname}`;
        if (route === "POST /auth/token") {
          counts.token++;
          let key: unknown;
          try {
            key = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { api_key?: unknown })
              .api_key;
          } catch {
            return json(response, 400, { error: "the body is not JSON" });
          }
          if (key !== options.apiKey) return json(response, 401, { error: "bad api key" });
          const token = `tok_${randomBytes(12).toString("hex")}`;
          tokens.add(token);
          return json(response, 200, { token, expires_in: 3600 });
        }
        if (route === "GET /proxies") {
          counts.proxies++;
          if (!bearer(request)) return json(response, 401, { error: "token required" });
          const page = Math.max(1, Number(url.searchParams.get("page") ?? 1) || 1);
          const results = proxies.slice((page - 1) * pageSize, page * pageSize);
          const more = page * pageSize < proxies.length;
          const next = more ? `${options.nextBase ?? base}/proxies?page=${page + 1}` : null;
          return json(response, 200, { results, next });
        }
        if (route === "GET /exits") {
          counts.exits++;
          if (!bearer(request) && !keyed(request, url)) {
            return json(response, 401, { error: "token or key required" });
          }
          return json(response, 200, exits);
        }
        if (route === "GET /me") {
          counts.me++;
          if (!keyed(request, url)) return json(response, 401, { error: "bad api key" });
          return json(response, 200, { active });
        }
        return json(response, 404, { error: "not found" });
      });
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  base = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`;

  let closing: Promise<void> | undefined;
  return {
    url: base,
    ca: certificate.ca,
    counts,
    setProxies(next) {
      proxies = [...next];
    },
    setExits(next) {
      exits = [...next];
    },
    setActive(next) {
      active = next;
    },
    revokeTokens() {
      tokens.clear();
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/**
 * The descriptor parts that describe `startVendorApi` as a vendor: its token flow, its
 * credential check (`GET /me` must say active) and a `list` type mirroring `GET /proxies`. A test
 * composes them with the fields it needs.
 */
export function vendorApiDescriptorParts(api: Pick<VendorApi, "url">, vendorName: string) {
  return {
    listType: {
      id: "proxy_list",
      name: "Proxy list",
      mode: "list" as const,
      call: {
        url: `${api.url}/proxies`,
        headers: { Authorization: "Bearer {auth.token}" },
        items: "results",
        next_url: "next",
      },
      item: {
        host: "{item.proxy_address}",
        port: "{item.port}",
        username: "{item.username}",
        password: "{item.password}",
        country: "{item.country_code}",
      },
    },
    auth: {
      call: {
        method: "POST" as const,
        url: `${api.url}/auth/token`,
        body: { api_key: "{credential.api_key}" },
      },
      token_path: "token",
    },
    validation: {
      call: { url: `${api.url}/me`, headers: { "X-Api-Key": "{credential.api_key}" } },
      success: "active",
      error_message: `${vendorName} refused the API key`,
    },
  };
}
