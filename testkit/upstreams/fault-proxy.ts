/**
 * A small proxy of our own for failures. One port speaks every scheme, told apart by the first
 * byte: SOCKS5 (0x05, optional username/password), SOCKS4/4a (0x04), else HTTP (absolute-form
 * forward requests and CONNECT); with `tls`, all of it inside TLS (the `https` scheme). The mode
 * is read when a connection arrives, so `setMode` changes what the next connections get.
 */
import net from "node:net";
import tls from "node:tls";
import type {
  ProxyCredentials,
  UpstreamProxy,
  UpstreamScheme,
} from "../../shared/proxy-protocol/types.ts";
import { testCertificate } from "../certs.ts";
import { freePort } from "../ports.ts";

export const FaultMode = {
  /** A working proxy (outgoing connections from `bindAddress` when set). */
  pass: "pass",
  /** Accepts (and does TLS, if any), then never answers. */
  hang: "hang",
  /** Resets the connection as soon as it is accepted. */
  refuse: "refuse",
  /** Answers 502 (HTTP), general failure (SOCKS5), 91 (SOCKS4). */
  status502: "status502",
  /** Rejects every credential: 407 (HTTP), auth failure (SOCKS5), 93 (SOCKS4). */
  status407: "status407",
  /** Passes the target's bytes a chunk at a time, `slowDelayMs` apart. */
  slow: "slow",
  /** Passes `dropAfterBytes` of the target's answer, then cuts both sides. */
  dropMid: "drop-mid",
  /**
   * Answers HTTP 403 with a reason phrase repeating what it was sent (the request line and the
   * credentials, decoded), as vendors that echo what they refused do; SOCKS as `status502`.
   */
  echo403: "echo403",
} as const;
export type FaultMode = (typeof FaultMode)[keyof typeof FaultMode];

export interface FaultProxyOptions {
  mode?: FaultMode;
  /** Speak TLS to clients (the `https` scheme); clients trust `ca`. */
  tls?: boolean;
  /** Credentials every protocol requires (SOCKS4: the user id must be the username). */
  auth?: ProxyCredentials;
  /** Outgoing address for connections to targets, like tinyproxy's Bind. */
  bindAddress?: string;
  /**
   * Act as a proxy on another machine: its own loopback serves nothing, so a target on
   * 127.0.0.1, ::1 or localhost cannot be reached (a 502, or the protocol's failure); other
   * targets, the rest of 127.0.0.0/8 included, are forwarded.
   */
  remote?: boolean;
  /**
   * Another mode for requests to these destination hosts (HTTP and CONNECT): the proxy behaves
   * by its own mode for every other target (health checks included). `refuse` resets the
   * connection once the request is read, without an answer.
   */
  hostModes?: Readonly<Record<string, FaultMode>>;
  slowDelayMs?: number;
  dropAfterBytes?: number;
  /**
   * Resolves the target names it is sent (an address, or undefined: not found) instead of the
   * system's resolver, as a proxy with a resolver of its own would (the tests' DNS server).
   */
  resolve?: (name: string) => Promise<string | undefined>;
}

export interface FaultRequest {
  protocol: "http" | "connect" | "socks4" | "socks5";
  /** The target as the client named it (a name stays a name). */
  host: string;
  port: number;
  username?: string;
  /** The header names of an HTTP or CONNECT request, lower case, as they reached the proxy. */
  headers?: readonly string[];
}

export interface FaultProxy {
  readonly host: string;
  readonly port: number;
  /** The PEM clients trust when `tls`. */
  readonly ca: string | undefined;
  readonly tls: boolean;
  readonly mode: FaultMode;
  setMode(mode: FaultMode): void;
  /** The proxy in the form the upstream code takes: `https` for a TLS proxy, else `scheme`. */
  proxy(scheme?: UpstreamScheme, credentials?: ProxyCredentials | null): UpstreamProxy;
  url(scheme?: UpstreamScheme, credentials?: ProxyCredentials | null): string;
  /** Client connections accepted so far. */
  readonly connectionsSeen: number;
  /**
   * Resolves once every connection made to it before the call is accepted and counted in
   * `connectionsSeen`: a connection of its own, queued behind them, is accepted (not counted).
   * A process that just stopped may have left one waiting to be accepted.
   */
  acceptedAll(): Promise<void>;
  /** Client connections open now. */
  readonly connectionsOpen: number;
  /** Connections to targets open now. */
  readonly upstreamOpen: number;
  /** The latest requests (at most 1000), oldest first. */
  readonly requests: readonly FaultRequest[];
  close(): Promise<void>;
}

const MAX_HEAD_BYTES = 64 * 1024;
const MAX_REQUESTS_KEPT = 1000;

/** Buffers a socket's bytes for the handshake; hands the rest over when it is done. */
class HandshakeReader {
  readonly #socket: net.Socket;
  #buffer: Buffer = Buffer.alloc(0);
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.on("data", this.#onData);
    socket.once("end", this.#onEnd);
    socket.once("close", this.#onEnd);
  }

  async bytes(count: number): Promise<Buffer> {
    while (this.#buffer.length < count) await this.#more();
    const taken = this.#buffer.subarray(0, count);
    this.#buffer = this.#buffer.subarray(count);
    return taken;
  }

  /** The next byte, left unread. */
  async peek(): Promise<number> {
    while (this.#buffer.length === 0) await this.#more();
    return this.#buffer[0];
  }

  /** Bytes up to and including `delimiter`. */
  async until(delimiter: string, max: number): Promise<Buffer> {
    for (;;) {
      const index = this.#buffer.indexOf(delimiter);
      if (index >= 0) return this.bytes(index + delimiter.length);
      if (this.#buffer.length > max) throw new Error("request head too large");
      await this.#more();
    }
  }

  /** Stops reading; answers what was read past the handshake. */
  release(): Buffer {
    this.#socket.pause();
    this.#socket.off("data", this.#onData);
    this.#socket.off("end", this.#onEnd);
    this.#socket.off("close", this.#onEnd);
    const rest = this.#buffer;
    this.#buffer = Buffer.alloc(0);
    return rest;
  }

  #more(): Promise<void> {
    if (this.#ended) return Promise.reject(new Error("client closed"));
    return new Promise((resolve) => {
      this.#wake = resolve;
    });
  }

  readonly #onData = (chunk: Buffer): void => {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  };

  readonly #onEnd = (): void => {
    this.#ended = true;
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  };
}

/** What a proxy on another machine would reach on itself rather than on our host. */
function ownLoopback(host: string): boolean {
  const name = host.replace(/^\[|\]$/g, "").toLowerCase();
  return name === "127.0.0.1" || name === "::1" || name === "localhost";
}

function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):([0-9]{1,5})$/.exec(authority);
  if (!match) return undefined;
  return { host: match[1] ?? match[2], port: Number(match[3]) };
}

function basicCredentials(header: string | undefined): ProxyCredentials | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(header?.trim() ?? "");
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

export async function startFaultProxy(options: FaultProxyOptions = {}): Promise<FaultProxy> {
  const certificate = options.tls ? await testCertificate() : undefined;
  const secureContext = certificate
    ? tls.createSecureContext({ cert: certificate.cert, key: certificate.key })
    : undefined;
  const slowDelayMs = options.slowDelayMs ?? 50;
  const dropAfterBytes = options.dropAfterBytes ?? 1024;
  const auth = options.auth;
  let mode: FaultMode = options.mode ?? FaultMode.pass;
  let connectionsSeen = 0;
  const clients = new Set<net.Socket>();
  const upstreams = new Set<net.Socket>();
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const requests: FaultRequest[] = [];
  let closed = false;

  const record = (request: FaultRequest) => {
    if (requests.length >= MAX_REQUESTS_KEPT) requests.shift();
    requests.push(request);
  };

  const authorized = (credentials: ProxyCredentials | undefined, connectionMode: FaultMode) => {
    if (connectionMode === FaultMode.status407) return false;
    if (!auth) return true;
    return credentials?.username === auth.username && credentials.password === auth.password;
  };

  /** Connects to the target; resolves with the socket or undefined when it failed. */
  const dial = async (name: string, port: number): Promise<net.Socket | undefined> => {
    const host = options.resolve && net.isIP(name) === 0 ? await options.resolve(name) : name;
    if (host === undefined) return undefined;
    return await dialAddress(host, port);
  };

  const dialAddress = (host: string, port: number): Promise<net.Socket | undefined> =>
    new Promise((resolve) => {
      if (options.remote && ownLoopback(host)) return resolve(undefined);
      const family = options.bindAddress ? net.isIP(options.bindAddress) : 0;
      const upstream = net.connect({
        host,
        port,
        localAddress: options.bindAddress,
        ...(family ? { family } : {}),
      });
      upstreams.add(upstream);
      upstream.once("close", () => upstreams.delete(upstream));
      const onError = () => {
        upstream.destroy();
        resolve(undefined);
      };
      upstream.once("error", onError);
      upstream.once("connect", () => {
        upstream.off("error", onError);
        resolve(upstream);
      });
    });

  /** Relays both ways; the target-to-client direction obeys slow and drop-mid. */
  const relay = (
    client: net.Socket,
    upstream: net.Socket,
    rest: Buffer,
    connectionMode: FaultMode,
  ) => {
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", cut);
    upstream.on("error", cut);
    client.once("close", cut);
    if (rest.length > 0) upstream.write(rest);
    client.pipe(upstream);
    client.resume();
    if (connectionMode === FaultMode.slow) {
      let pending = 0;
      let ended = false;
      upstream.on("data", (chunk: Buffer) => {
        upstream.pause();
        pending++;
        const timer = setTimeout(() => {
          timers.delete(timer);
          pending--;
          if (client.destroyed) return;
          client.write(chunk);
          if (ended && pending === 0) client.end();
          else upstream.resume();
        }, slowDelayMs);
        timers.add(timer);
      });
      upstream.once("end", () => {
        ended = true;
        if (pending === 0) client.end();
      });
    } else if (connectionMode === FaultMode.dropMid) {
      let passed = 0;
      upstream.on("data", (chunk: Buffer) => {
        const room = dropAfterBytes - passed;
        if (chunk.length >= room) {
          upstream.destroy();
          client.write(chunk.subarray(0, room), cut);
          return;
        }
        passed += chunk.length;
        client.write(chunk);
      });
      upstream.once("end", () => client.end());
    } else {
      upstream.pipe(client);
    }
  };

  const handleHttp = async (
    client: net.Socket,
    reader: HandshakeReader,
    connectionMode: FaultMode,
  ) => {
    const head = (await reader.until("\r\n\r\n", MAX_HEAD_BYTES)).toString("latin1");
    const [requestLine, ...headerLines] = head.slice(0, -4).split("\r\n");
    const [method, target] = requestLine.split(" ");
    const headers = new Map<string, string>();
    for (const line of headerLines) {
      const colon = line.indexOf(":");
      if (colon > 0) {
        headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
    }
    const credentials = basicCredentials(headers.get("proxy-authorization"));
    const answer = (status: string, extra = "") =>
      client.end(`HTTP/1.1 ${status}\r\n${extra}Content-Length: 0\r\nConnection: close\r\n\r\n`);
    let destination: { host: string; port: number } | undefined;
    let url: URL | undefined;
    if (method === "CONNECT") {
      destination = parseAuthority(target ?? "");
    } else {
      try {
        url = new URL(target ?? "");
        if (url.protocol === "http:") {
          destination = {
            host: url.hostname.replace(/^\[|\]$/g, ""),
            port: Number(url.port || 80),
          };
        }
      } catch {
        destination = undefined;
      }
    }
    if (!destination) return answer("400 Bad Request");
    record({
      protocol: method === "CONNECT" ? "connect" : "http",
      ...destination,
      ...(credentials ? { username: credentials.username } : {}),
      headers: [...headers.keys()],
    });
    connectionMode = options.hostModes?.[destination.host] ?? connectionMode;
    if (connectionMode === FaultMode.refuse) return client.destroy();
    if (!authorized(credentials, connectionMode)) {
      return answer(
        "407 Proxy Authentication Required",
        'Proxy-Authenticate: Basic realm="fault-proxy"\r\n',
      );
    }
    if (connectionMode === FaultMode.status502) return answer("502 Bad Gateway");
    if (connectionMode === FaultMode.echo403) {
      const who = credentials ? ` for ${credentials.username}:${credentials.password}` : "";
      return answer(`403 Refused ${requestLine}${who}`);
    }
    const upstream = await dial(destination.host, destination.port);
    if (!upstream) return answer("502 Bad Gateway");
    if (client.destroyed) return upstream.destroy();
    let rest = reader.release();
    if (method === "CONNECT") {
      client.write("HTTP/1.1 200 Connection established\r\n\r\n");
    } else {
      // Origin form to the target, our proxy headers dropped, one request per connection.
      const kept = headerLines.filter((line) =>
        !/^(proxy-authorization|proxy-connection|connection|keep-alive)\s*:/i.test(line)
      );
      const forwarded = [
        `${method} ${url!.pathname}${url!.search} HTTP/1.1`,
        ...kept,
        "Connection: close",
        "",
        "",
      ];
      rest = Buffer.concat([Buffer.from(forwarded.join("\r\n"), "latin1"), rest]);
    }
    relay(client, upstream, rest, connectionMode);
  };

  const handleSocks5 = async (
    client: net.Socket,
    reader: HandshakeReader,
    connectionMode: FaultMode,
  ) => {
    const [, methodCount] = await reader.bytes(2);
    const methods = await reader.bytes(methodCount);
    const wantsAuth = auth !== undefined || connectionMode === FaultMode.status407;
    let username: string | undefined;
    if (wantsAuth) {
      if (!methods.includes(0x02)) return client.end(Buffer.from([5, 0xff]));
      client.write(Buffer.from([5, 0x02]));
      const [, userLength] = await reader.bytes(2);
      username = (await reader.bytes(userLength)).toString("utf8");
      const [passwordLength] = await reader.bytes(1);
      const password = (await reader.bytes(passwordLength)).toString("utf8");
      if (!authorized({ username, password }, connectionMode)) {
        return client.end(Buffer.from([1, 1]));
      }
      client.write(Buffer.from([1, 0]));
    } else {
      if (!methods.includes(0x00)) return client.end(Buffer.from([5, 0xff]));
      client.write(Buffer.from([5, 0x00]));
    }
    const [, command, , addressType] = await reader.bytes(4);
    let host: string;
    if (addressType === 1) host = [...(await reader.bytes(4))].join(".");
    else if (addressType === 3) {
      const [length] = await reader.bytes(1);
      host = (await reader.bytes(length)).toString("utf8");
    } else if (addressType === 4) {
      const raw = await reader.bytes(16);
      const words: string[] = [];
      for (let index = 0; index < 16; index += 2) words.push(raw.readUInt16BE(index).toString(16));
      host = words.join(":");
    } else return client.end(Buffer.from([5, 8, 0, 1, 0, 0, 0, 0, 0, 0]));
    const port = (await reader.bytes(2)).readUInt16BE(0);
    record({ protocol: "socks5", host, port, ...(username !== undefined ? { username } : {}) });
    const reply = (code: number) => Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
    if (command !== 1) return client.end(reply(7));
    if (connectionMode === FaultMode.status502 || connectionMode === FaultMode.echo403) {
      return client.end(reply(1));
    }
    const upstream = await dial(host, port);
    if (!upstream) return client.end(reply(5));
    if (client.destroyed) return upstream.destroy();
    const bound = Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    const local = upstream.localAddress ?? "";
    if (net.isIPv4(local)) {
      local.split(".").forEach((part, index) => (bound[4 + index] = Number(part)));
    }
    bound.writeUInt16BE(upstream.localPort ?? 0, 8);
    client.write(bound);
    relay(client, upstream, reader.release(), connectionMode);
  };

  const handleSocks4 = async (
    client: net.Socket,
    reader: HandshakeReader,
    connectionMode: FaultMode,
  ) => {
    const head = await reader.bytes(8);
    const command = head[1];
    const port = head.readUInt16BE(2);
    const userId = (await reader.until("\0", 1024)).subarray(0, -1).toString("utf8");
    let host = [...head.subarray(4, 8)].join(".");
    if (head[4] === 0 && head[5] === 0 && head[6] === 0 && head[7] !== 0) {
      host = (await reader.until("\0", 1024)).subarray(0, -1).toString("utf8");
    }
    record({ protocol: "socks4", host, port, ...(userId ? { username: userId } : {}) });
    const reply = (code: number) => Buffer.from([0, code, 0, 0, 0, 0, 0, 0]);
    if (command !== 1) return client.end(reply(91));
    if (connectionMode === FaultMode.status407 || (auth && userId !== auth.username)) {
      return client.end(reply(93));
    }
    if (connectionMode === FaultMode.status502 || connectionMode === FaultMode.echo403) {
      return client.end(reply(91));
    }
    const upstream = await dial(host, port);
    if (!upstream) return client.end(reply(91));
    if (client.destroyed) return upstream.destroy();
    client.write(reply(90));
    relay(client, upstream, reader.release(), connectionMode);
  };

  const serve = async (client: net.Socket, connectionMode: FaultMode) => {
    if (connectionMode === FaultMode.hang) {
      // Read and drop everything, answer nothing; reading is what notices the client leave.
      client.resume();
      return;
    }
    const reader = new HandshakeReader(client);
    const first = await reader.peek();
    if (first === 0x05) await handleSocks5(client, reader, connectionMode);
    else if (first === 0x04) await handleSocks4(client, reader, connectionMode);
    else await handleHttp(client, reader, connectionMode);
  };

  // acceptedAll's own connections, by their local port.
  const barriers = new Map<number, () => void>();
  const server = net.createServer((raw) => {
    const barrier = raw.remoteAddress === "127.0.0.1"
      ? barriers.get(raw.remotePort ?? 0)
      : undefined;
    if (barrier) {
      barriers.delete(raw.remotePort ?? 0);
      raw.destroy();
      return barrier();
    }
    connectionsSeen++;
    clients.add(raw);
    raw.once("close", () => clients.delete(raw));
    raw.on("error", () => raw.destroy());
    const connectionMode = mode;
    if (closed) return raw.destroy();
    if (connectionMode === FaultMode.refuse) return raw.resetAndDestroy();
    let client: net.Socket = raw;
    if (secureContext) {
      const secure = new tls.TLSSocket(raw, { isServer: true, secureContext });
      secure.on("error", () => raw.destroy());
      secure.once("close", () => raw.destroy());
      client = secure;
    }
    serve(client, connectionMode).catch(() => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  const defaultScheme: UpstreamScheme = options.tls ? "https" : "http";

  const proxy = (scheme: UpstreamScheme = defaultScheme, credentials?: ProxyCredentials | null) => {
    const chosen = credentials === null ? undefined : credentials ?? auth;
    return {
      scheme,
      host: "127.0.0.1",
      port,
      ...(chosen ? { username: chosen.username, password: chosen.password } : {}),
    };
  };

  let closing: Promise<void> | undefined;
  return {
    host: "127.0.0.1",
    port,
    ca: certificate?.ca,
    tls: options.tls ?? false,
    get mode() {
      return mode;
    },
    setMode(next: FaultMode) {
      mode = next;
    },
    proxy,
    url(scheme = defaultScheme, credentials) {
      const chosen = proxy(scheme, credentials);
      const userinfo = chosen.username === undefined
        ? ""
        : `${encodeURIComponent(chosen.username)}:${encodeURIComponent(chosen.password ?? "")}@`;
      return `${scheme}://${userinfo}127.0.0.1:${port}`;
    },
    get connectionsSeen() {
      return connectionsSeen;
    },
    async acceptedAll() {
      const localPort = await freePort();
      const socket = net.connect({ host: "127.0.0.1", port, localAddress: "127.0.0.1", localPort });
      try {
        await new Promise<void>((resolve, reject) => {
          barriers.set(localPort, resolve);
          // Once accepted, the reset that follows is no failure: the promise is settled then.
          socket.once("error", reject);
        });
      } finally {
        barriers.delete(localPort);
        socket.on("error", () => {});
        socket.destroy();
      }
    },
    get connectionsOpen() {
      return clients.size;
    },
    get upstreamOpen() {
      return upstreams.size;
    },
    get requests() {
      return requests;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        closed = true;
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close(() => resolve());
        for (const socket of clients) socket.destroy();
        for (const socket of upstreams) socket.destroy();
      });
      return closing;
    },
  };
}
