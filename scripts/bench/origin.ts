/**
 * The throughput benchmark's origin: a keep-alive HTTP server (Deno.serve) answering every
 * request with the same small body.
 *
 *   DENO_NO_UPDATE_CHECK=1 deno run --allow-net scripts/bench/origin.ts [--port 0]
 *     [--cert leaf.pem --key leaf-key.pem]   (HTTPS; needs --allow-read of the two files)
 *
 * It prints `{"port": N}` once listening. Deno's API is reached through a small interface, as
 * in bare-relay.ts, so the file passes the Node type check of `scripts/` too.
 */

interface DenoServe {
  args: string[];
  readTextFileSync(path: string): string;
  serve(
    options: {
      hostname: string;
      port: number;
      onListen(address: { port: number }): void;
      cert?: string;
      key?: string;
    },
    handler: (request: Request) => Response,
  ): unknown;
}

const deno = (globalThis as unknown as { Deno: DenoServe }).Deno;

/** 64 bytes: a small answer, as an API or a page's probe gets. */
const BODY = new TextEncoder().encode(`${"octoprox bench origin ".repeat(3).slice(0, 63)}\n`);
const argument = (name: string) => {
  const index = deno.args.indexOf(name);
  return index >= 0 ? deno.args[index + 1] : undefined;
};
const port = Number(argument("--port") ?? "0");
const certPath = argument("--cert");
const keyPath = argument("--key");
const tls = certPath !== undefined && keyPath !== undefined
  ? { cert: deno.readTextFileSync(certPath), key: deno.readTextFileSync(keyPath) }
  : {};

deno.serve(
  {
    hostname: "127.0.0.1",
    port,
    ...tls,
    onListen: (address) => console.log(JSON.stringify({ port: address.port })),
  },
  () => new Response(BODY, { headers: { "content-type": "text/plain" } }),
);
