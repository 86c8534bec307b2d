/** TLS in front of a plain TCP port, with the test bed's CA-signed localhost certificate. */
import net from "node:net";
import { testCertificate } from "../certs.ts";

export interface TlsFront {
  readonly port: number;
  /** The CA that signed the front's certificate (rustls refuses a self-signed leaf). */
  readonly caPem: string;
  close(): Promise<void>;
}

/**
 * TLS in front of a plain TCP port: an `https` proxy made of a plain one, with the test bed's
 * CA-signed localhost certificate (testkit/certs.ts).
 */
export async function startTlsFront(targetPort: number): Promise<TlsFront> {
  const tls = await import("node:tls");
  const { cert, key, ca: caPem } = await testCertificate();
  const sockets = new Set<net.Socket>();
  const server = tls.createServer({ cert, key }, (secure) => {
    const plain = net.connect({ host: "127.0.0.1", port: targetPort });
    for (const socket of [secure, plain]) {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
      socket.on("error", () => {
        secure.destroy();
        plain.destroy();
      });
    }
    secure.pipe(plain).pipe(secure);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    caPem,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
