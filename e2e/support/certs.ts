/**
 * A self-signed certificate for localhost and 127.0.0.1, made once per process with the openssl
 * CLI, for TLS proxies and TLS origins. Clients trust it through `ca`.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface TestCertificate {
  cert: string;
  key: string;
  /** The PEM a client trusts (the certificate itself). */
  ca: string;
}

let pending: Promise<TestCertificate> | undefined;

async function makeCertificate(): Promise<TestCertificate> {
  const dir = await mkdtemp(join(tmpdir(), "ox-cert-"));
  try {
    const keyPath = join(dir, "key.pem");
    const certPath = join(dir, "cert.pem");
    try {
      await run("openssl", [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "7",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
        "-keyout",
        keyPath,
        "-out",
        certPath,
      ]);
    } catch (error) {
      throw new Error("Making a test certificate needs the openssl CLI (apt-get install openssl)", {
        cause: error,
      });
    }
    const [cert, key] = await Promise.all([readFile(certPath, "utf8"), readFile(keyPath, "utf8")]);
    return { cert, key, ca: cert };
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
