/**
 * One attempt through an upstream proxy: connect, handshake, then whatever the subclass does
 * (hand the tunnel over, or make a request). One deadline covers the whole attempt and is
 * enforced by destroying the socket; an AbortSignal cuts it the same way. Every failure path
 * destroys every socket the attempt opened.
 */
import type net from "node:net";
import {
  type ClientHandshake,
  createClientHandshake,
  handshakeProtocol,
} from "../../shared/proxy-protocol/handshake.ts";
import {
  HandshakeFailure,
  UpstreamConnectError,
  UpstreamFirstByteError,
  UpstreamHandshakeError,
  UpstreamIdleError,
} from "../../shared/proxy-protocol/errors.ts";
import type { TunnelTarget, UpstreamProxy } from "../../shared/proxy-protocol/types.ts";
import {
  connectErrorFrom,
  connectEvent,
  connectToProxy,
  type UpstreamTlsOptions,
} from "./socket.ts";

export const RunPhase = {
  connect: "connect",
  handshake: "handshake",
  /** The probe's TLS handshake with an https target, inside the tunnel. */
  targetTls: "target_tls",
  firstByte: "first_byte",
  response: "response",
} as const;
export type RunPhase = (typeof RunPhase)[keyof typeof RunPhase];

export interface RunOptions {
  proxy: UpstreamProxy;
  /** The deadline for the whole attempt. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** TLS to the proxy itself (https scheme). */
  tls?: UpstreamTlsOptions;
}

export abstract class UpstreamRun<T> {
  protected readonly proxy: UpstreamProxy;
  protected readonly timeoutMs: number;
  protected phase: RunPhase = RunPhase.connect;
  protected socket: net.Socket | undefined;
  /** Absolute-form requests to an HTTP proxy: no handshake, the proxy answers the request. */
  protected forward = false;
  readonly #signal: AbortSignal | undefined;
  readonly #tls: UpstreamTlsOptions | undefined;
  #resolve: ((value: T) => void) | undefined;
  #reject: ((error: unknown) => void) | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #handshake: ClientHandshake | undefined;
  #settled = false;

  constructor(options: RunOptions) {
    this.proxy = options.proxy;
    this.timeoutMs = options.timeoutMs;
    this.#signal = options.signal;
    this.#tls = options.tls;
  }

  /** Starts the attempt; call once. */
  run(): Promise<T> {
    const promise = new Promise<T>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    const signal = this.#signal;
    if (signal?.aborted) {
      this.fail(signal.reason);
      return promise;
    }
    if (!(this.timeoutMs > 0 && Number.isFinite(this.timeoutMs))) {
      this.fail(new RangeError("timeoutMs must be a positive number"));
      return promise;
    }
    try {
      this.prepare();
    } catch (error) {
      // A request the protocol cannot carry fails before any connection.
      this.fail(error);
      return promise;
    }
    signal?.addEventListener("abort", this.#onAbort, { once: true });
    this.#timer = setTimeout(this.#onTimeout, this.timeoutMs);
    try {
      const socket = connectToProxy(this.proxy, this.#tls);
      this.socket = socket;
      socket.once(connectEvent(this.proxy), this.#onConnect);
      socket.on("error", this.#onError);
      socket.on("close", this.#onClose);
    } catch (error) {
      this.fail(connectErrorFrom(error, this.proxy));
    }
    return promise;
  }

  protected get settled(): boolean {
    return this.#settled;
  }

  /** Builds what the attempt will send; throws for what the protocol cannot carry. */
  protected abstract prepare(): void;

  /** The connection to the proxy is up (TLS included). */
  protected abstract connected(): void;

  /** The handshake succeeded; `leftover` is the target's first bytes, if any came already. */
  protected abstract tunnelReady(leftover: Uint8Array): void;

  /** A socket closed. The default fails the current phase; a close-delimited body overrides. */
  protected closed(): void {
    this.fail(this.phaseError(undefined, false));
  }

  /** Makes the handshake for a tunnel to `target` (from `prepare`). */
  protected prepareHandshake(target: TunnelTarget): void {
    this.#handshake = createClientHandshake(this.proxy, target);
  }

  /** Sends the prepared handshake. */
  protected beginHandshake(): void {
    const socket = this.socket!;
    this.phase = RunPhase.handshake;
    socket.on("data", this.#onHandshakeData);
    socket.write(this.#handshake!.start());
  }

  /** Settles with a value. Sockets are left as they are: the subclass owns them now. */
  protected succeed(value: T): void {
    if (this.#settled) return;
    this.#finish();
    this.#resolve!(value);
  }

  /** Settles with an error and destroys every socket. */
  protected fail(error: unknown): void {
    if (this.#settled) return;
    this.#finish();
    this.destroySockets();
    this.#reject!(error);
  }

  protected destroySockets(): void {
    this.socket?.destroy();
  }

  /** Stops listening to the proxy socket, for a caller that takes it over. */
  protected detach(): void {
    const socket = this.socket!;
    socket.removeListener("error", this.#onError);
    socket.removeListener("close", this.#onClose);
    socket.removeListener("data", this.#onHandshakeData);
  }

  /**
   * Moves close handling to a socket layered on the proxy socket (the target's TLS): that
   * layer's close is the one that comes after its last bytes. Errors of both still count.
   */
  protected layer(socket: net.Socket): void {
    this.socket!.removeListener("close", this.#onClose);
    socket.on("error", this.#onError);
    socket.on("close", this.#onClose);
  }

  /** The catalogue error for a failure in the current phase. */
  protected phaseError(cause: unknown, timedOut: boolean): Error {
    const where = `${this.proxy.host}:${this.proxy.port}`;
    const options = { cause, timedOut };
    switch (this.phase) {
      case RunPhase.connect:
        if (timedOut) {
          return new UpstreamConnectError(
            `Connecting to proxy ${where} timed out after ${this.timeoutMs} ms`,
            options,
          );
        }
        return cause === undefined
          ? new UpstreamConnectError(`Proxy ${where} closed the connection while connecting`)
          : connectErrorFrom(cause, this.proxy);
      case RunPhase.handshake:
        return new UpstreamHandshakeError(
          handshakeProtocol(this.proxy.scheme),
          timedOut ? HandshakeFailure.timeout : HandshakeFailure.closed,
          timedOut
            ? `Proxy ${where} did not complete the handshake within ${this.timeoutMs} ms`
            : `Proxy ${where} closed the connection during the handshake`,
          options,
        );
      case RunPhase.targetTls:
        return timedOut
          ? new UpstreamFirstByteError(
            `Target TLS handshake through ${where} timed out after ${this.timeoutMs} ms`,
            options,
          )
          : new UpstreamConnectError(`TLS to the target through proxy ${where} failed`, options);
      case RunPhase.firstByte:
        if (timedOut) {
          return new UpstreamFirstByteError(
            `No answer through proxy ${where} within ${this.timeoutMs} ms`,
            options,
          );
        }
        // A forwarding proxy that hangs up without a byte never answered at all.
        return this.forward
          ? new UpstreamHandshakeError(
            handshakeProtocol(this.proxy.scheme),
            HandshakeFailure.closed,
            `Proxy ${where} closed the connection without answering`,
            options,
          )
          : new UpstreamFirstByteError(
            `The target closed the tunnel through ${where} without answering`,
            options,
          );
      case RunPhase.response:
        return new UpstreamIdleError(
          timedOut
            ? `The answer through proxy ${where} stalled past ${this.timeoutMs} ms`
            : `The answer through proxy ${where} broke off`,
          options,
        );
    }
  }

  #finish(): void {
    this.#settled = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#signal?.removeEventListener("abort", this.#onAbort);
  }

  readonly #onConnect = (): void => {
    if (this.#settled) return;
    this.connected();
  };

  readonly #onHandshakeData = (chunk: Buffer): void => {
    if (this.#settled) return;
    let step;
    try {
      step = this.#handshake!.push(chunk);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (step.write) this.socket!.write(step.write);
    if (step.done) {
      this.socket!.removeListener("data", this.#onHandshakeData);
      this.tunnelReady(step.leftover);
    }
  };

  readonly #onError = (error: Error): void => {
    if (!this.#settled) this.fail(this.phaseError(error, false));
  };

  readonly #onClose = (): void => {
    if (!this.#settled) this.closed();
  };

  readonly #onTimeout = (): void => {
    this.#timer = undefined;
    if (!this.#settled) this.fail(this.phaseError(undefined, true));
  };

  readonly #onAbort = (): void => {
    if (!this.#settled) this.fail(this.#signal!.reason);
  };
}
