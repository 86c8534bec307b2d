/** An origin that records each request's exact bytes and answers them as a test says. */
import net from "node:net";
import { chunkedEnd } from "../clients/raw-http.ts";

export interface RawOrigin {
  readonly port: number;
  /** Every request as received (head and body bytes, exactly). */
  readonly requests: Buffer[];
  /** Connections accepted so far. */
  readonly connections: number;
  /** Closes every connection open now (the server keeps listening). */
  dropConnections(): void;
  close(): Promise<void>;
}

/** Where a request came: its connection's number (from 0) and its own on it (from 0). */
export interface RawRequestInfo {
  connection: number;
  index: number;
}

/**
 * An origin that records each request's exact bytes and answers what `respond` returns for it
 * (raw bytes; the connection closes after when `close` is set).
 */
export async function startRawOrigin(
  respond: (request: Buffer, info: RawRequestInfo) => { bytes: Buffer | string; close?: boolean },
): Promise<RawOrigin> {
  const requests: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    const connection = connections++;
    let index = 0;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const headEnd = buffer.indexOf("\r\n\r\n");
        if (headEnd < 0) return;
        const head = buffer.subarray(0, headEnd).toString("latin1").toLowerCase();
        let total = headEnd + 4;
        if (/\r\ntransfer-encoding:[^\r]*chunked/.test(head)) {
          const end = chunkedEnd(buffer.subarray(total));
          if (end < 0) return;
          total += end;
        } else {
          const length = /\r\ncontent-length:\s*(\d+)/.exec(head);
          if (length) total += Number(length[1]);
          if (buffer.length < total) return;
        }
        const request = buffer.subarray(0, total);
        buffer = buffer.subarray(total);
        requests.push(request);
        const answer = respond(request, { connection, index: index++ });
        socket.write(answer.bytes);
        if (answer.close) {
          socket.end();
          return;
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    requests,
    get connections() {
      return connections;
    },
    dropConnections: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
