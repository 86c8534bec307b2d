/**
 * One driver per upstream scheme, so each runtime's I/O loop only moves bytes: send `start()`
 * once connected (after TLS for https proxies), then `push` what the proxy sends and write
 * what each step asks, until a step is `done`.
 */
import { EMPTY_BYTES, PendingBytes } from "./bytes.ts";
import { HandshakeFailure, HandshakeProtocol, UpstreamHandshakeError } from "./errors.ts";
import { encodeConnectRequest, type HeaderEntry } from "./http-request.ts";
import { MAX_HEAD_BYTES, ResponseHeadParser } from "./http-head.ts";
import { encodeSocks4Connect, parseSocks4Reply } from "./socks4.ts";
import {
  encodeSocks5Connect,
  encodeSocks5Greeting,
  encodeSocks5UserPassAuth,
  parseSocks5AuthReply,
  parseSocks5MethodSelection,
  parseSocks5Reply,
  Socks5Method,
} from "./socks5.ts";
import {
  type ProxyCredentials,
  proxyCredentials,
  type TunnelTarget,
  type UpstreamProxy,
  UpstreamScheme,
} from "./types.ts";

export interface HandshakeStep {
  /** Bytes to send the proxy now, if any. */
  readonly write: Uint8Array | undefined;
  /** The tunnel is up: what follows is the target's. */
  readonly done: boolean;
  /**
   * Once done: bytes that came after the proxy's last reply (the target's first bytes). A view
   * of the chunk pushed last; copy it before reusing that buffer.
   */
  readonly leftover: Uint8Array;
}

export interface ClientHandshake {
  readonly protocol: HandshakeProtocol;
  /** The first bytes to send. */
  start(): Uint8Array;
  /** Feeds bytes from the proxy. Throws UpstreamHandshakeError on refusal or a bad reply. */
  push(chunk: Uint8Array): HandshakeStep;
}

export interface HandshakeOptions {
  /** Bound on an HTTP proxy's answer head (default 16 KiB). */
  maxHeadBytes?: number;
  /** Extra CONNECT header lines (HTTP proxies only). */
  headers?: readonly HeaderEntry[];
}

// Shared, immutable: "nothing to do yet" allocates nothing per chunk.
const WAIT: HandshakeStep = Object.freeze({ write: undefined, done: false, leftover: EMPTY_BYTES });

function sendNext(bytes: Uint8Array): HandshakeStep {
  return { write: bytes, done: false, leftover: EMPTY_BYTES };
}

function finished(leftover: Uint8Array): HandshakeStep {
  return { write: undefined, done: true, leftover };
}

function alreadyDone(protocol: HandshakeProtocol): UpstreamHandshakeError {
  return new UpstreamHandshakeError(
    protocol,
    HandshakeFailure.badReply,
    "Handshake already finished",
  );
}

class HttpConnectHandshake implements ClientHandshake {
  readonly protocol = HandshakeProtocol.http;
  readonly #target: TunnelTarget;
  readonly #credentials: ProxyCredentials | undefined;
  readonly #headers: readonly HeaderEntry[] | undefined;
  readonly #parser: ResponseHeadParser;
  #done = false;

  constructor(proxy: UpstreamProxy, target: TunnelTarget, options: HandshakeOptions) {
    this.#target = target;
    this.#credentials = proxyCredentials(proxy);
    this.#headers = options.headers;
    this.#parser = new ResponseHeadParser(options.maxHeadBytes ?? MAX_HEAD_BYTES);
  }

  start(): Uint8Array {
    return encodeConnectRequest(this.#target, {
      credentials: this.#credentials,
      headers: this.#headers,
    });
  }

  push(chunk: Uint8Array): HandshakeStep {
    if (this.#done) throw alreadyDone(this.protocol);
    let offset = 0;
    for (;;) {
      const parsed = this.#parser.push(offset === 0 ? chunk : chunk.subarray(offset));
      if (!parsed) return WAIT;
      offset += parsed.consumed;
      const { status, reason } = parsed.head;
      // Interim answers (100 Continue and the like) precede the real one.
      if (status >= 100 && status < 200 && status !== 101) continue;
      if (status >= 200 && status < 300) {
        this.#done = true;
        return finished(chunk.subarray(offset));
      }
      const text = reason.length > 80 ? `${reason.slice(0, 80)}...` : reason;
      throw new UpstreamHandshakeError(
        HandshakeProtocol.http,
        status === 407 ? HandshakeFailure.authRequired : HandshakeFailure.status,
        `Proxy answered CONNECT with ${status}${text ? ` ${text}` : ""}`,
        { status },
      );
    }
  }
}

const Socks5Stage = { method: 0, auth: 1, reply: 2, done: 3 } as const;
type Socks5Stage = (typeof Socks5Stage)[keyof typeof Socks5Stage];

class Socks5Handshake implements ClientHandshake {
  readonly protocol = HandshakeProtocol.socks5;
  readonly #target: TunnelTarget;
  readonly #credentials: ProxyCredentials | undefined;
  readonly #pending = new PendingBytes();
  #stage: Socks5Stage = Socks5Stage.method;

  constructor(proxy: UpstreamProxy, target: TunnelTarget) {
    this.#target = target;
    this.#credentials = proxyCredentials(proxy);
    // Refuse what cannot be sent before a byte goes out.
    encodeSocks5Connect(target);
    if (this.#credentials) encodeSocks5UserPassAuth(this.#credentials);
  }

  start(): Uint8Array {
    return encodeSocks5Greeting(this.#credentials !== undefined);
  }

  push(chunk: Uint8Array): HandshakeStep {
    const bytes = this.#pending.join(chunk);
    switch (this.#stage) {
      case Socks5Stage.method: {
        const selection = parseSocks5MethodSelection(bytes, this.#credentials !== undefined);
        if (!selection) return this.#wait(bytes);
        this.#nothingAfter(bytes, selection.consumed, "method selection");
        if (selection.method === Socks5Method.userPass) {
          this.#stage = Socks5Stage.auth;
          return sendNext(encodeSocks5UserPassAuth(this.#credentials!));
        }
        this.#stage = Socks5Stage.reply;
        return sendNext(encodeSocks5Connect(this.#target));
      }
      case Socks5Stage.auth: {
        const reply = parseSocks5AuthReply(bytes);
        if (!reply) return this.#wait(bytes);
        this.#nothingAfter(bytes, reply.consumed, "auth reply");
        this.#stage = Socks5Stage.reply;
        return sendNext(encodeSocks5Connect(this.#target));
      }
      case Socks5Stage.reply: {
        const reply = parseSocks5Reply(bytes);
        if (!reply) return this.#wait(bytes);
        this.#stage = Socks5Stage.done;
        return finished(bytes.subarray(reply.consumed));
      }
      default:
        throw alreadyDone(this.protocol);
    }
  }

  #wait(bytes: Uint8Array): HandshakeStep {
    this.#pending.keep(bytes, 0);
    return WAIT;
  }

  /**
   * A proxy answers one message at a time: bytes after an answer came before our next message,
   * so they answer nothing we sent. Kept, they would be read as the next reply (or wait unread).
   */
  #nothingAfter(bytes: Uint8Array, consumed: number, what: string): void {
    if (consumed === bytes.length) return;
    throw new UpstreamHandshakeError(
      HandshakeProtocol.socks5,
      HandshakeFailure.badReply,
      `SOCKS5 proxy sent ${bytes.length - consumed} bytes after its ${what}, before our request`,
    );
  }
}

class Socks4Handshake implements ClientHandshake {
  readonly protocol = HandshakeProtocol.socks4;
  readonly #request: Uint8Array;
  readonly #pending = new PendingBytes();
  #done = false;

  constructor(proxy: UpstreamProxy, target: TunnelTarget) {
    // SOCKS4 has only a user id: the username goes there and a password cannot be sent.
    this.#request = encodeSocks4Connect(target, proxy.username ?? "");
  }

  start(): Uint8Array {
    return this.#request;
  }

  push(chunk: Uint8Array): HandshakeStep {
    if (this.#done) throw alreadyDone(this.protocol);
    const bytes = this.#pending.join(chunk);
    const reply = parseSocks4Reply(bytes);
    if (!reply) {
      this.#pending.keep(bytes, 0);
      return WAIT;
    }
    this.#done = true;
    return finished(bytes.subarray(reply.consumed));
  }
}

/**
 * The handshake that opens a tunnel to `target` through `proxy`. `http` and `https` proxies
 * both take CONNECT (the caller does the TLS to an https proxy). Throws UpstreamHandshakeError
 * (invalid_request) at once for a target the scheme cannot express.
 */
export function createClientHandshake(
  proxy: UpstreamProxy,
  target: TunnelTarget,
  options: HandshakeOptions = {},
): ClientHandshake {
  switch (proxy.scheme) {
    case UpstreamScheme.http:
    case UpstreamScheme.https:
      return new HttpConnectHandshake(proxy, target, options);
    case UpstreamScheme.socks5:
      return new Socks5Handshake(proxy, target);
    case UpstreamScheme.socks4:
      return new Socks4Handshake(proxy, target);
    default:
      throw new UpstreamHandshakeError(
        HandshakeProtocol.http,
        HandshakeFailure.invalidRequest,
        `Unknown proxy scheme ${String((proxy as { scheme: unknown }).scheme)}`,
      );
  }
}

/** The protocol a scheme's handshake speaks (for errors raised outside the driver). */
export function handshakeProtocol(scheme: UpstreamScheme): HandshakeProtocol {
  return scheme === UpstreamScheme.socks5
    ? HandshakeProtocol.socks5
    : scheme === UpstreamScheme.socks4
    ? HandshakeProtocol.socks4
    : HandshakeProtocol.http;
}
