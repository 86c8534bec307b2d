/**
 * The TLS interception CA's files, for installs that `npm start` does not run (compose's
 * `tls-ca` service, Kubernetes, systemd; docs/tls-interception.md):
 *
 *   npm run ca:create [-- --cert <path> --key <path>]
 *
 * makes the CA when neither file exists (the key 0600, never over an existing file), checks it
 * when both do, and refuses one without the other; then prints the files, the subject, the end
 * and the SPKI hash. The paths default to OCTOPROX_TLS_MITM_CA_CERT_PATH and
 * OCTOPROX_TLS_MITM_CA_KEY_PATH, else `npm start`'s data folder (OCTOPROX_DATA_DIR, ./data):
 * tls/mitm-ca.pem and tls/mitm-ca-key.pem. Exit code 1 with one line when the files cannot be
 * used, 2 for a wrong command line.
 */
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { errorText } from "../shared/errors.ts";
import { daysLeft } from "../shared/tls/ca-expiry.ts";
import { type CaFiles, CaFilesError, ensureCaFiles } from "./mitm-ca-files.ts";
import type { MitmCa } from "../shared/tls/ca.ts";

const USAGE = "usage: npm run ca:create [-- --cert <path> --key <path>]";

function fail(message: string, code: number): never {
  process.stderr.write(`ca: ${message}\n`);
  process.exit(code);
}

function envValue(name: string): string | undefined {
  const value = process.env[name]?.trim();
  return value === "" ? undefined : value;
}

/** The current CA's two paths: the flags, else the settings, else the data folder's. */
function currentFiles(values: { cert?: string; key?: string }): CaFiles {
  const dataDir = envValue("OCTOPROX_DATA_DIR") ?? "data";
  const cert = values.cert ?? envValue("OCTOPROX_TLS_MITM_CA_CERT_PATH");
  const key = values.key ?? envValue("OCTOPROX_TLS_MITM_CA_KEY_PATH");
  if ((cert === undefined) !== (key === undefined)) {
    fail("the certificate's and the key's paths go together (--cert and --key)", 2);
  }
  return {
    certPath: resolve(cert ?? join(dataDir, "tls", "mitm-ca.pem")),
    keyPath: resolve(key ?? join(dataDir, "tls", "mitm-ca-key.pem")),
  };
}

function describe(title: string, files: CaFiles, ca: MitmCa): void {
  const say = (line: string) => process.stdout.write(`${line}\n`);
  say(title);
  say(`  certificate  ${files.certPath}`);
  say(`  key          ${files.keyPath}`);
  say(`  subject      ${ca.certificate.subject}`);
  say(
    `  not after    ${ca.notAfter.toISOString()} (${daysLeft(ca.notAfter, new Date())} days)`,
  );
  say(`  SPKI SHA-256 ${ca.spkiSha256}`);
}

async function create(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { cert: { type: "string" }, key: { type: "string" } },
    strict: true,
  });
  const files = currentFiles(values);
  const ensured = await ensureCaFiles(files, { create: true });
  describe(
    ensured.created
      ? "Made the TLS interception CA (clients trust its certificate to let gateways intercept):"
      : "The TLS interception CA is there already, and usable:",
    files,
    ensured.ca,
  );
}

const [command, ...rest] = process.argv.slice(2);
try {
  switch (command) {
    case "create":
      await create(rest);
      break;
    default:
      fail(USAGE, 2);
  }
} catch (error) {
  if (error instanceof CaFilesError) fail(error.message, 1);
  if (error instanceof TypeError && "code" in error) fail(`${errorText(error)}\n${USAGE}`, 2);
  throw error;
}
