/** A connected socket to a target through an upstream proxy, for whatever speaks over it. */
import type net from "node:net";
import type { TunnelTarget } from "../../shared/proxy-protocol/types.ts";
import { type RunOptions, UpstreamRun } from "./run.ts";

export interface OpenTunnelOptions extends RunOptions {
  target: TunnelTarget;
}

class TunnelRun extends UpstreamRun<net.Socket> {
  readonly #target: TunnelTarget;

  constructor(options: OpenTunnelOptions) {
    super(options);
    this.#target = options.target;
  }

  protected prepare(): void {
    this.prepareHandshake(this.#target);
  }

  protected connected(): void {
    this.beginHandshake();
  }

  protected tunnelReady(leftover: Uint8Array): void {
    const socket = this.socket!;
    // Paused, so nothing is read before the caller listens; bytes that came with the
    // proxy's reply go back to be read first.
    socket.pause();
    this.detach();
    if (leftover.length > 0) {
      socket.unshift(Buffer.from(leftover.buffer, leftover.byteOffset, leftover.length));
    }
    this.succeed(socket);
  }
}

/**
 * Opens a tunnel to `options.target` through `options.proxy` (CONNECT or SOCKS; TLS to the
 * proxy for https), within `timeoutMs`. Resolves with the connected socket, paused (pipe it or
 * call resume), with keepalive on and no listeners of ours: attach an 'error' listener at once.
 * Rejects with UpstreamRefusedError, UpstreamConnectError or UpstreamHandshakeError, or the
 * signal's reason when aborted; the socket is destroyed then.
 */
export function openTunnel(options: OpenTunnelOptions): Promise<net.Socket> {
  return new TunnelRun(options).run();
}
