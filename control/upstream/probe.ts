/**
 * A health probe: GET one URL through one proxy, within one deadline. An http:// URL through an
 * HTTP(S) proxy goes as an absolute-form request; everything else through a tunnel (CONNECT or
 * SOCKS), with TLS and SNI inside it for https:// URLs. The connection is never reused.
 */
import { isIP } from "node:net";
import tls from "node:tls";
import { countryCode, type GeoLocation } from "../../shared/geo/contract.ts";
import { utf8Encode } from "../../shared/proxy-protocol/bytes.ts";
import {
  HandshakeFailure,
  HandshakeProtocol,
  UpstreamHandshakeError,
} from "../../shared/proxy-protocol/errors.ts";
import { ResponseBodyReader } from "../../shared/proxy-protocol/http-body.ts";
import { type ResponseHead, ResponseHeadParser } from "../../shared/proxy-protocol/http-head.ts";
import { encodeForwardRequestHead } from "../../shared/proxy-protocol/http-request.ts";
import {
  proxyCredentials,
  type TunnelTarget,
  UpstreamScheme,
} from "../../shared/proxy-protocol/types.ts";
import { type RunOptions, RunPhase, UpstreamRun } from "./run.ts";
import { serverName, type UpstreamTlsOptions } from "./socket.ts";

/** The most of a body a probe keeps; the rest is not read. */
export const MAX_PROBE_BODY_BYTES = 64 * 1024;

const USER_AGENT = "octoprox-health/1";

export interface ProbeOptions extends RunOptions {
  /** An http:// or https:// URL. Pass a URL object when probing many proxies with one URL. */
  url: string | URL;
  /** TLS to an https:// target (default: verify against the system's CAs). */
  targetTls?: UpstreamTlsOptions;
  /** Default 64 KiB. */
  maxBodyBytes?: number;
}

export interface ProbeResult {
  /** HTTP 2xx. */
  ok: boolean;
  status: number;
  /** From the start of the probe to the whole (kept) body. */
  latencyMs: number;
  /** From the start of the probe to the answer's first byte. */
  firstByteMs: number;
  head: ResponseHead;
  /** At most `maxBodyBytes`; `bodyTruncated` when the answer had more. */
  body: Uint8Array;
  bodyTruncated: boolean;
  /** The exit address the answer named: our /echo's `ip` or httpbin's `origin`. */
  exitIp?: string;
  /**
   * Where the answer placed that address, when it says (our /echo's `country`, `region`, `city`
   * and `asn`; `country_code` as other echoes name it): attribution's `endpoint` source.
   */
  exitPlace?: GeoLocation;
}

/** The address a JSON body names as the client's: `{"ip": ...}` or `{"origin": ...}`. */
export function parseExitIp(body: Uint8Array): string | undefined {
  return parseExit(body)?.ip;
}

/** The address a JSON body names as the client's, and where the body places it. */
export function parseExit(body: Uint8Array): { ip: string; place?: GeoLocation } | undefined {
  let start = 0;
  while (
    start < body.length &&
    (body[start] === 0x20 || body[start] === 0x0a || body[start] === 0x0d || body[start] === 0x09)
  ) {
    start++;
  }
  if (body[start] !== 0x7b) return undefined; // not a JSON object: skip the parse
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.length).toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const record = value as Record<string, unknown>;
  const raw = typeof record.ip === "string"
    ? record.ip
    : typeof record.origin === "string"
    ? record.origin.split(",")[0]
    : undefined;
  if (raw === undefined) return undefined;
  let ip = raw.trim();
  if (ip.startsWith("::ffff:") && isIP(ip.slice(7)) === 4) ip = ip.slice(7);
  if (!isIP(ip)) return undefined;
  const country = countryCode(record.country) ?? countryCode(record.country_code);
  if (country === null) return { ip };
  const text = (field: unknown) => typeof field === "string" && field !== "" ? field : null;
  const asn = typeof record.asn === "number" && Number.isInteger(record.asn) ? record.asn : null;
  return { ip, place: { country, region: text(record.region), city: text(record.city), asn } };
}

function exitFields(body: Uint8Array): Pick<ProbeResult, "exitIp" | "exitPlace"> {
  const exit = parseExit(body);
  if (exit === undefined) return {};
  return exit.place === undefined
    ? { exitIp: exit.ip }
    : { exitIp: exit.ip, exitPlace: exit.place };
}

// The request through a tunnel depends only on the URL: made once per URL, not per probe.
const tunnelRequests = new Map<string, Uint8Array>();
const MAX_CACHED_REQUESTS = 256;

function originFormRequest(url: URL): Uint8Array {
  const key = url.href;
  let bytes = tunnelRequests.get(key);
  if (!bytes) {
    bytes = utf8Encode(
      `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
        `User-Agent: ${USER_AGENT}\r\nAccept: */*\r\nConnection: close\r\n\r\n`,
    );
    if (tunnelRequests.size >= MAX_CACHED_REQUESTS) tunnelRequests.clear();
    tunnelRequests.set(key, bytes);
  }
  return bytes;
}

const FORWARD_HEADERS = [
  ["User-Agent", USER_AGENT],
  ["Accept", "*/*"],
  ["Connection", "close"],
] as const;

class ProbeRun extends UpstreamRun<ProbeResult> {
  readonly #url: URL;
  readonly #target: TunnelTarget;
  readonly #https: boolean;
  readonly #targetTls: UpstreamTlsOptions | undefined;
  readonly #maxBodyBytes: number;
  readonly #startedAt = performance.now();
  #firstByteMs = 0;
  #forwardRequest: Uint8Array | undefined;
  #tlsSocket: tls.TLSSocket | undefined;
  #headParser: ResponseHeadParser | undefined;
  #head: ResponseHead | undefined;
  #body: ResponseBodyReader | undefined;

  constructor(options: ProbeOptions, url: URL) {
    super(options);
    this.#url = url;
    this.#https = url.protocol === "https:";
    this.#target = {
      host: url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port ? Number(url.port) : this.#https ? 443 : 80,
    };
    this.#targetTls = options.targetTls;
    this.#maxBodyBytes = options.maxBodyBytes ?? MAX_PROBE_BODY_BYTES;
    this.forward = !this.#https &&
      (options.proxy.scheme === UpstreamScheme.http ||
        options.proxy.scheme === UpstreamScheme.https);
  }

  protected prepare(): void {
    if (!this.forward) {
      this.prepareHandshake(this.#target);
      return;
    }
    this.#forwardRequest = encodeForwardRequestHead({
      method: "GET",
      url: this.#url,
      credentials: proxyCredentials(this.proxy),
      headers: FORWARD_HEADERS,
    });
  }

  protected connected(): void {
    if (!this.forward) {
      this.beginHandshake();
      return;
    }
    this.phase = RunPhase.firstByte;
    this.socket!.on("data", this.#onData);
    this.socket!.write(this.#forwardRequest!);
  }

  protected tunnelReady(leftover: Uint8Array): void {
    const socket = this.socket!;
    if (!this.#https) {
      this.phase = RunPhase.firstByte;
      socket.on("data", this.#onData);
      socket.write(originFormRequest(this.#url));
      if (leftover.length > 0) this.#onData(leftover);
      return;
    }
    if (leftover.length > 0) {
      // A TLS server speaks only after our ClientHello.
      this.fail(
        new UpstreamHandshakeError(
          HandshakeProtocol.http,
          HandshakeFailure.badReply,
          "Bytes from the target before the TLS handshake",
        ),
      );
      return;
    }
    this.phase = RunPhase.targetTls;
    const tlsSocket = tls.connect({
      socket,
      servername: serverName(this.#target.host),
      ca: this.#targetTls?.ca,
      rejectUnauthorized: this.#targetTls?.rejectUnauthorized ?? true,
    });
    this.#tlsSocket = tlsSocket;
    this.layer(tlsSocket);
    tlsSocket.once("secureConnect", () => {
      if (this.settled) return;
      this.phase = RunPhase.firstByte;
      tlsSocket.on("data", this.#onData);
      tlsSocket.write(originFormRequest(this.#url));
    });
  }

  protected override closed(): void {
    if (this.phase === RunPhase.response && this.#body?.end()) {
      this.#done();
      return;
    }
    super.closed();
  }

  protected override destroySockets(): void {
    this.#tlsSocket?.destroy();
    this.socket?.destroy();
  }

  readonly #onData = (chunk: Uint8Array): void => {
    if (this.settled) return;
    if (this.phase === RunPhase.firstByte) {
      this.phase = RunPhase.response;
      this.#firstByteMs = performance.now() - this.#startedAt;
    }
    try {
      if (this.#body) {
        if (this.#body.push(chunk)) this.#done();
        return;
      }
      this.#headParser ??= new ResponseHeadParser();
      let offset = 0;
      for (;;) {
        const parsed = this.#headParser.push(offset === 0 ? chunk : chunk.subarray(offset));
        if (!parsed) return;
        offset += parsed.consumed;
        const status = parsed.head.status;
        if (status >= 100 && status < 200 && status !== 101) continue;
        this.#head = parsed.head;
        break;
      }
      if (this.forward && this.#head.status === 407) {
        throw new UpstreamHandshakeError(
          HandshakeProtocol.http,
          HandshakeFailure.authRequired,
          "Proxy answered 407 Proxy Authentication Required",
          { status: 407 },
        );
      }
      const body = new ResponseBodyReader(this.#head, { maxBytes: this.#maxBodyBytes });
      this.#body = body;
      if (body.complete || body.push(chunk.subarray(offset))) this.#done();
    } catch (error) {
      this.fail(error);
    }
  };

  #done(): void {
    const head = this.#head!;
    const reader = this.#body!;
    const body = reader.body();
    this.destroySockets();
    this.succeed({
      ok: head.status >= 200 && head.status < 300,
      status: head.status,
      latencyMs: performance.now() - this.#startedAt,
      firstByteMs: this.#firstByteMs,
      head,
      body,
      bodyTruncated: reader.truncated,
      ...exitFields(body),
    });
  }
}

/**
 * GETs `options.url` through `options.proxy` within `timeoutMs`. Resolves with any HTTP answer
 * (`ok` for 2xx); rejects with the catalogue error of the phase that failed
 * (UpstreamRefusedError, UpstreamConnectError, UpstreamHandshakeError, UpstreamFirstByteError,
 * UpstreamIdleError), or the signal's reason when aborted. A proxy's own 407 to a forwarded
 * request rejects as a handshake error. Sockets are destroyed on every path.
 */
export function probe(options: ProbeOptions): Promise<ProbeResult> {
  let url: URL;
  try {
    url = typeof options.url === "string" ? new URL(options.url) : options.url;
  } catch (error) {
    return Promise.reject(new TypeError("Invalid probe URL", { cause: error }));
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return Promise.reject(new TypeError("Probe URLs are http:// or https://"));
  }
  return new ProbeRun(options, url).run();
}
