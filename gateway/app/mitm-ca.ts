/**
 * The gateway's TLS interception CA, loaded before anything else starts (seed 000, "Starting":
 * a gateway that cannot intercept must not serve). The two files are read and checked once
 * (shared/tls/ca.ts `loadCa`: a CA certificate in force, its key its own); an unset path, a file
 * that cannot be read, or a CA that cannot be used is a `StartRefused` naming the setting and the
 * path, and the process exits with code 2 as for a bad setting (gateway/main.ts).
 *
 * Worker isolates (isolate-worker.ts) do not read the files again: the main isolate hands them
 * the PEM text it read and checked, in their start message, and each loads it (its own signing
 * key and leaf key: CryptoKeys do not cross isolates). One read means one CA per process: a file
 * replaced while the isolates start cannot give two isolates of one gateway two CAs, so a client
 * pinning the CA's SPKI hash is never served by a CA it was not told of. The text crosses only
 * within the process, never to Redis, a log line or the network.
 *
 * Expiry (shared/tls/ca-expiry.ts): the log says at start, and once a day after, when the CA
 * expires within 30 days (a warning) or has expired while the process ran (an error: a start
 * with an expired CA is refused by `loadCa`, the one rule for a CA out of its validity);
 * `octoprox_gateway_tls_mitm_ca_expiry_timestamp_seconds` on /metrics carries the date.
 */
import { errorText, MitmCaError } from "../../shared/errors.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import { type CaPem, loadCa, type MitmCa } from "../../shared/tls/ca.ts";
import { daysLeft, watchExpiry } from "../../shared/tls/ca-expiry.ts";
import type { Logger } from "../base/log.ts";
import { StartRefused } from "./start-refused.ts";

export const CA_CERT_SETTING = "OCTOPROX_TLS_MITM_CA_CERT_PATH";
export const CA_KEY_SETTING = "OCTOPROX_TLS_MITM_CA_KEY_PATH";

/** The gauge /metrics writes the CA's notAfter in (seconds since the epoch). */
export const CA_EXPIRY_METRIC = "octoprox_gateway_tls_mitm_ca_expiry_timestamp_seconds";

/** A CA file is a few kilobytes; anything far larger is not one (and is not read whole). */
const MAX_CA_FILE_BYTES = 1024 * 1024;

/** The CA's files as read: what a worker isolate loads the same CA from. */
export interface MitmCaFiles extends CaPem {
  certPath: string;
  keyPath: string;
}

/** The CA the gateway signs with, and the files it came from. */
export interface LoadedMitmCa {
  ca: MitmCa;
  files: MitmCaFiles;
}

export interface ReadMitmCaOptions {
  /** Reads a file's text (Deno's, bounded, by default); tests give their own. */
  read?: (path: string) => Promise<string>;
  now?: Date;
}

/** Why a file could not be read, in words that say what to fix. */
function readFailure(error: unknown): string {
  if (error instanceof Deno.errors.NotFound) return "does not exist";
  if (error instanceof Deno.errors.NotCapable) {
    return "is outside what the gateway may read (its --allow-read list: " +
      "scripts/gateway-command.ts)";
  }
  if (error instanceof Deno.errors.PermissionDenied) {
    return "cannot be read by the gateway's user (permission denied)";
  }
  return `cannot be read (${errorText(error)})`;
}

/** A regular file's text, refused past MAX_CA_FILE_BYTES (and for a device or a folder). */
async function readCaFile(path: string): Promise<string> {
  const info = await Deno.stat(path);
  if (!info.isFile) throw new MitmCaError("is not a regular file");
  if (info.size > MAX_CA_FILE_BYTES) {
    throw new MitmCaError(`holds ${info.size} bytes, more than a CA file (${MAX_CA_FILE_BYTES})`);
  }
  return await Deno.readTextFile(path);
}

async function readSetting(
  setting: string,
  path: string,
  read: (path: string) => Promise<string>,
): Promise<string> {
  try {
    return await read(path);
  } catch (error) {
    const why = error instanceof MitmCaError ? error.message : readFailure(error);
    throw new StartRefused(
      `${setting}: ${path} ${why}; the gateway does not start without its TLS interception CA`,
      { setting, path },
    );
  }
}

/**
 * Reads and checks the CA the settings name. Throws StartRefused naming the setting and the
 * path at fault: both unset, a file that cannot be read, or a CA `loadCa` refuses.
 */
export async function readMitmCa(
  settings: Pick<GatewaySettings, "tlsMitmCaCertPath" | "tlsMitmCaKeyPath">,
  options: ReadMitmCaOptions = {},
): Promise<LoadedMitmCa> {
  const certPath = settings.tlsMitmCaCertPath;
  const keyPath = settings.tlsMitmCaKeyPath;
  if (certPath === undefined || keyPath === undefined) {
    // The settings' schema takes both or neither: neither is set here.
    throw new StartRefused(
      `${CA_CERT_SETTING} and ${CA_KEY_SETTING} are unset: the gateway does not start without ` +
        "its TLS interception CA (npm start makes one; docs/tls-interception.md)",
      { setting: CA_CERT_SETTING },
    );
  }
  const read = options.read ?? readCaFile;
  const certPem = await readSetting(CA_CERT_SETTING, certPath, read);
  const keyPem = await readSetting(CA_KEY_SETTING, keyPath, read);
  const files: MitmCaFiles = { certPem, keyPem, certPath, keyPath };
  return { ca: await loadMitmCaFiles(files, options.now), files };
}

/**
 * The CA from files already read (a worker isolate's start message); StartRefused naming both
 * settings and paths when `loadCa` refuses it (its message names the file at fault).
 */
export async function loadMitmCaFiles(files: MitmCaFiles, now?: Date): Promise<MitmCa> {
  try {
    return await loadCa(files, {
      source: { certPath: files.certPath, keyPath: files.keyPath },
      ...(now === undefined ? {} : { now }),
    });
  } catch (error) {
    if (!(error instanceof MitmCaError)) throw error;
    const setting = error.message.startsWith(`${files.keyPath} `)
      ? CA_KEY_SETTING
      : CA_CERT_SETTING;
    throw new StartRefused(
      `${setting}: the TLS interception CA cannot be used: ${error.message} ` +
        `(${CA_CERT_SETTING}=${files.certPath}, ${CA_KEY_SETTING}=${files.keyPath})`,
      { setting, path: setting === CA_KEY_SETTING ? files.keyPath : files.certPath },
    );
  }
}

/**
 * Logs the CA in force, then its expiry notice (if any) now and once a day
 * (shared/tls/ca-expiry.ts); answers the function that stops the daily check. The timer never
 * keeps a stopping process alive.
 */
export function watchCaExpiry(
  ca: MitmCa,
  logger: Logger,
  options: { certPath?: string } = {},
): () => void {
  const now = new Date();
  logger.info("TLS interception CA loaded", {
    ...(options.certPath === undefined ? {} : { cert_path: options.certPath }),
    subject: ca.certificate.subject,
    not_after: ca.notAfter.toISOString(),
    days_left: daysLeft(ca.notAfter, now),
    spki_sha256: ca.spkiSha256,
  });
  return watchExpiry(ca, logger, {
    every: (check, ms) => {
      const timer = setInterval(check, ms);
      Deno.unrefTimer(timer);
      return () => clearInterval(timer);
    },
  });
}
