/**
 * A tunnel target with known bytes both ways: it answers every byte with two, and optionally
 * greets each connection first with a fixed-size line naming the address it was reached from
 * (which tells a test which upstream proxy's exit carried the tunnel).
 */
import net from "node:net";

export interface Sink {
  readonly port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  close(): Promise<void>;
}

export interface SinkOptions {
  /** Greet each connection with its peer's address padded to this many bytes. */
  greetingBytes?: number;
  /** The address to listen on (127.0.0.1 unless told: another loopback one, say). */
  host?: string;
}

export async function startSink(options: SinkOptions = {}): Promise<Sink> {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    connections++;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    if (options.greetingBytes !== undefined) {
      const peer = (socket.remoteAddress ?? "").replace(/^::ffff:/, "");
      const size = options.greetingBytes;
      socket.write(Buffer.from(peer.padEnd(size, " ").slice(0, size)));
    }
    socket.on("data", (chunk: Buffer) => socket.write(Buffer.alloc(chunk.length * 2, 0x7a)));
    socket.on("end", () => socket.end());
  });
  await new Promise<void>((resolve) => server.listen(0, options.host ?? "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
