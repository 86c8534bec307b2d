/**
 * A certificate for localhost, 127.0.0.1 and ::1, signed by a CA made alongside it, once per
 * process with the openssl CLI, for TLS proxies and TLS origins. Clients trust it through `ca`
 * (the CA's PEM); a CA-signed leaf is what Deno's TLS (rustls) accepts, where it refuses a
 * self-signed one.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface TestCertificate {
  cert: string;
  key: string;
  /** The PEM a client trusts: the CA that signed `cert`. */
  ca: string;
}

let pending: Promise<TestCertificate> | undefined;

async function makeCertificate(): Promise<TestCertificate> {
  const dir = await mkdtemp(join(tmpdir(), "ox-cert-"));
  const path = (name: string) => join(dir, name);
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  try {
    try {
      await run("openssl", [
        "req",
        "-x509",
        ...ec,
        "-days",
        "7",
        "-subj",
        "/CN=octoprox test CA",
        "-keyout",
        path("ca.key"),
        "-out",
        path("ca.pem"),
      ]);
      await run("openssl", [
        "req",
        ...ec,
        "-subj",
        "/CN=localhost",
        "-keyout",
        path("leaf.key"),
        "-out",
        path("leaf.csr"),
      ]);
      await writeFile(
        path("leaf.ext"),
        "basicConstraints=critical,CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n",
      );
      await run("openssl", [
        "x509",
        "-req",
        "-in",
        path("leaf.csr"),
        "-CA",
        path("ca.pem"),
        "-CAkey",
        path("ca.key"),
        "-CAcreateserial",
        "-days",
        "7",
        "-extfile",
        path("leaf.ext"),
        "-out",
        path("leaf.pem"),
      ]);
    } catch (error) {
      throw new Error("Making a test certificate needs the openssl CLI (apt-get install openssl)", {
        cause: error,
      });
    }
    const [ca, cert, key] = await Promise.all(
      ["ca.pem", "leaf.pem", "leaf.key"].map((name) => readFile(path(name), "utf8")),
    );
    return { cert, key, ca };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The process's test certificate (made on first use). */
export function testCertificate(): Promise<TestCertificate> {
  pending ??= makeCertificate().catch((error) => {
    pending = undefined;
    throw error;
  });
  return pending;
}
