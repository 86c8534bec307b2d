/**
 * The TLS interception CA every gateway the tests, the benchmarks and the screenshot tour start
 * is given, since a gateway does not start without one (gateway/app/mitm-ca.ts). One per test
 * process: made when this module loads (an ECDSA P-256 pair, a few milliseconds), written on
 * first use to a private temporary folder (0700, the key 0600) that goes when the process exits.
 * Made here, never kept in the repository: no key is shipped, not even a test's.
 *
 * `testMitmCaEnv()` is what a gateway's environment adds; `testMitmCa()` the files' paths and
 * text (a test that trusts the CA, or the secrets scan that looks for its key).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CaPem, createCa } from "../shared/tls/ca.ts";

export interface TestMitmCa extends CaPem {
  dir: string;
  certPath: string;
  keyPath: string;
}

const pem: CaPem = await createCa({ commonName: "Octoprox test MITM CA" });
let files: TestMitmCa | undefined;

/** The test process's CA, its files written on the first call. */
export function testMitmCa(): TestMitmCa {
  if (files !== undefined) return files;
  const dir = mkdtempSync(join(tmpdir(), "ox-test-ca-"));
  const certPath = join(dir, "mitm-ca.pem");
  const keyPath = join(dir, "mitm-ca-key.pem");
  writeFileSync(keyPath, pem.keyPem, { mode: 0o600 });
  writeFileSync(certPath, pem.certPem, { mode: 0o644 });
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  files = { ...pem, dir, certPath, keyPath };
  return files;
}

/** The two settings that give a gateway the test process's CA. */
export function testMitmCaEnv(): {
  OCTOPROX_TLS_MITM_CA_CERT_PATH: string;
  OCTOPROX_TLS_MITM_CA_KEY_PATH: string;
} {
  const ca = testMitmCa();
  return { OCTOPROX_TLS_MITM_CA_CERT_PATH: ca.certPath, OCTOPROX_TLS_MITM_CA_KEY_PATH: ca.keyPath };
}
