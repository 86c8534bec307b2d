/**
 * OCTOPROX_UPSTREAM_CA_FILE: more CAs an intercepting gateway trusts for targets' certificates
 * (a company's internal CA, a test bed's), beside the runtime's own roots, never instead of them.
 * Read once when an isolate builds its listeners; a file that cannot be read or holds no
 * certificate stops the start, naming the setting and the path.
 *
 * The browser-grade modes' engine (gateway/net/tls/impersonation.ts) verifies targets itself,
 * against its own copy of the public roots and the roots the usual OpenSSL variables name: the
 * main isolate points SSL_CERT_FILE at the same file (and SSL_CERT_DIR at the system's folder,
 * so the system's roots stay trusted beside it) before any isolate or engine starts.
 */
import { StartRefused } from "./start-refused.ts";

export const UPSTREAM_CA_SETTING = "OCTOPROX_UPSTREAM_CA_FILE";

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The file's certificates, one PEM block each; none when the setting is unset. */
export function readUpstreamCas(path: string | undefined): string[] {
  if (path === undefined) return [];
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    const why = error instanceof Deno.errors.NotFound ? "does not exist" : "cannot be read";
    throw new StartRefused(`${UPSTREAM_CA_SETTING} ${path} ${why}`, { path });
  }
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) {
    throw new StartRefused(`${UPSTREAM_CA_SETTING} ${path} holds no PEM certificate`, { path });
  }
  return blocks.map((block) => `${block}\n`);
}

/** The system's folder of trusted roots (Debian's, and most distributions'). */
const SYSTEM_CERT_DIR = "/etc/ssl/certs";

/**
 * Makes the browser-grade engine trust the file's CAs too. Called once, in the main isolate,
 * before worker isolates start: setting the environment later would race the engine's threads.
 */
export function trustUpstreamCasInEngine(path: string | undefined): void {
  if (path === undefined) return;
  Deno.env.set("SSL_CERT_FILE", path);
  Deno.env.set("SSL_CERT_DIR", SYSTEM_CERT_DIR);
}
