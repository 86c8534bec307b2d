/**
 * An HTTPS origin serving files a test puts at paths, as a publisher of IP databases does:
 * `put(path, bytes)` serves them (anything else is a 404), `require(path, authorization)` asks
 * for that Authorization header first (401 otherwise), and every request's path is kept. TLS
 * with the test certificate: the egress guard takes HTTPS only (trust `ca`).
 */
import https from "node:https";
import type net from "node:net";
import type { Duplex } from "node:stream";
import { testCertificate } from "../certs.ts";

export interface FileOrigin {
  /** `https://127.0.0.1:<port>`. */
  readonly url: string;
  /** The PEM to trust. */
  readonly ca: string;
  /** Every request's path (with its query), oldest first. */
  readonly paths: readonly string[];
  /** Serves `bytes` at `path` from now on (replacing what was there). */
  put(path: string, bytes: Uint8Array | string): void;
  /** Answers `path` only to a request with this Authorization header. */
  require(path: string, authorization: string): void;
  close(): Promise<void>;
}

export async function startFileOrigin(): Promise<FileOrigin> {
  const certificate = await testCertificate();
  const files = new Map<string, Uint8Array>();
  const guards = new Map<string, string>();
  const paths: string[] = [];
  const sockets = new Set<Duplex>();
  const server = https.createServer(
    { cert: certificate.cert, key: certificate.key },
    (req, res) => {
      const path = req.url ?? "/";
      paths.push(path);
      const bare = path.split("?")[0];
      const wanted = guards.get(bare);
      if (wanted !== undefined && req.headers.authorization !== wanted) {
        res.writeHead(401, { "www-authenticate": "Basic" }).end("unauthorized");
        return;
      }
      const bytes = files.get(bare);
      if (bytes === undefined) {
        res.writeHead(404).end("not found");
        return;
      }
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": String(bytes.byteLength),
      }).end(bytes);
    },
  );
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    ca: certificate.ca,
    paths,
    put(path, bytes) {
      files.set(path, typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes);
    },
    require(path, authorization) {
      guards.set(path, authorization);
    },
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
