/**
 * The TLS interception CA's files, for installs that `npm start` does not run (compose's
 * `tls-ca` service, Kubernetes, systemd; docs/tls-interception.md):
 *
 *   npm run ca:create [-- --cert <path> --key <path>]
 *   npm run ca:rotate -- --overlap-days <n> [--cert <path> --key <path>]
 *
 * `ca:create` makes the CA when neither file exists (the key 0600, never over an existing file),
 * checks it when both do, and refuses one without the other; then prints the files, the
 * subject, the end and the SPKI hash.
 *
 * `ca:rotate` moves the current pair aside as the previous CA (`mitm-ca.previous.pem`,
 * `mitm-ca-key.previous.pem`), makes a new pair in its place, records the overlap's end beside
 * the certificate (rotation.json, which `npm start` reads) and prints the settings that give
 * the api and the gateways the previous CA until then (docs/tls-interception.md, "Rotation").
 *
 * The paths default to OCTOPROX_TLS_MITM_CA_CERT_PATH and OCTOPROX_TLS_MITM_CA_KEY_PATH, else
 * `npm start`'s data folder (OCTOPROX_DATA_DIR, ./data): tls/mitm-ca.pem and tls/mitm-ca-key.pem.
 * Exit code 1 with one line when the files cannot be used, 2 for a wrong command line.
 */
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { errorText } from "../shared/errors.ts";
import { daysLeft } from "../shared/tls/ca-expiry.ts";
import { type CaFiles, CaFilesError, ensureCaFiles, rotateCaFiles } from "./mitm-ca-files.ts";
import type { MitmCa } from "../shared/tls/ca.ts";

const USAGE = "usage: npm run ca:create [-- --cert <path> --key <path>]\n" +
  "       npm run ca:rotate -- --overlap-days <n> [--cert <path> --key <path>]";
/** A rotation's overlap: at least a day, at most a year. */
const MAX_OVERLAP_DAYS = 365;

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

async function rotate(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      cert: { type: "string" },
      key: { type: "string" },
      "overlap-days": { type: "string" },
    },
    strict: true,
  });
  const days = Number(values["overlap-days"]);
  if (
    values["overlap-days"] === undefined || !Number.isInteger(days) || days < 1 ||
    days > MAX_OVERLAP_DAYS
  ) {
    fail(`--overlap-days takes a whole number of days from 1 to ${MAX_OVERLAP_DAYS}`, 2);
  }
  const files = currentFiles(values);
  const rotated = await rotateCaFiles(files, { overlapDays: days });
  const record = rotated.record;
  const say = (line: string) => process.stdout.write(`${line}\n`);
  describe("Rotated the TLS interception CA. The new one:", files, rotated.current);
  describe(
    "The previous one, handed out beside it and signed with until the overlap ends:",
    { certPath: record.previous_cert_path, keyPath: record.previous_key_path },
    rotated.previous,
  );
  say(
    `  overlap until ${record.overlap_until}${
      rotated.clamped ? " (the previous CA's own end, sooner than the days asked)" : ""
    }`,
  );
  say("");
  say("npm start reads this from rotation.json beside the certificate. Elsewhere, give the api:");
  say(`  OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH=${record.previous_cert_path}`);
  say(`  OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL=${record.overlap_until}`);
  say("and every gateway those two and:");
  say(`  OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH=${record.previous_key_path}`);
  say("then restart them: until the overlap ends gateways sign with the previous CA and the");
  say("download holds both; clients fetch it again now, and gateways started after the end sign");
  say("with the new CA.");
}

const [command, ...rest] = process.argv.slice(2);
try {
  switch (command) {
    case "create":
      await create(rest);
      break;
    case "rotate":
      await rotate(rest);
      break;
    default:
      fail(USAGE, 2);
  }
} catch (error) {
  if (error instanceof CaFilesError) fail(error.message, 1);
  if (error instanceof TypeError && "code" in error) fail(`${errorText(error)}\n${USAGE}`, 2);
  throw error;
}
