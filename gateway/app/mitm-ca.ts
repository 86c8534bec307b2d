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
import { daysLeft, EXPIRY_CHECK_INTERVAL_MS, watchExpiry } from "../../shared/tls/ca-expiry.ts";
import type { Logger } from "../base/log.ts";
import { StartRefused } from "./start-refused.ts";

export const CA_CERT_SETTING = "OCTOPROX_TLS_MITM_CA_CERT_PATH";
export const CA_KEY_SETTING = "OCTOPROX_TLS_MITM_CA_KEY_PATH";
export const PREVIOUS_CERT_SETTING = "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH";
export const PREVIOUS_KEY_SETTING = "OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH";
export const OVERLAP_UNTIL_SETTING = "OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL";

/** The gauge /metrics writes the CA's notAfter in (seconds since the epoch). */
export const CA_EXPIRY_METRIC = "octoprox_gateway_tls_mitm_ca_expiry_timestamp_seconds";

/** A CA file is a few kilobytes; anything far larger is not one (and is not read whole). */
const MAX_CA_FILE_BYTES = 1024 * 1024;

/** The CA's files as read: what a worker isolate loads the same CA from. */
export interface MitmCaFiles extends CaPem {
  certPath: string;
  keyPath: string;
  /** The settings that named them (the current CA's, or after a rotation the previous one's). */
  settings: { cert: string; key: string };
}

/** A rotation's overlap (docs/tls-interception.md, "Rotation"). */
export interface MitmCaOverlap {
  until: Date;
  /** Whether it still ran when the gateway started: it then signs with the previous CA. */
  running: boolean;
  /** The CA rotated to. */
  current: MitmCa;
}

/** The CA the gateway signs with, and the files it came from. */
export interface LoadedMitmCa {
  /** The CA the gateway signs with: the previous one while a rotation's overlap lasts. */
  ca: MitmCa;
  files: MitmCaFiles;
  signing: "current" | "previous";
  /** Set after a rotation (the previous CA's settings given). */
  overlap?: MitmCaOverlap;
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
 *
 * After a rotation (the previous CA's three settings), the current CA is read and checked all
 * the same, and while the overlap lasts the previous one too, which the gateway then signs with:
 * clients that trust only it keep working until the overlap ends, while the api hands out both.
 * Once it has ended the previous files are not read (they may be gone).
 */
export async function readMitmCa(
  settings: Pick<
    GatewaySettings,
    | "tlsMitmCaCertPath"
    | "tlsMitmCaKeyPath"
    | "tlsMitmCaPreviousCertPath"
    | "tlsMitmCaPreviousKeyPath"
    | "tlsMitmCaOverlapUntilMs"
  >,
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
  const files = await readPair(
    certPath,
    keyPath,
    { cert: CA_CERT_SETTING, key: CA_KEY_SETTING },
    read,
  );
  const current = await loadMitmCaFiles(files, options.now);
  const previousCert = settings.tlsMitmCaPreviousCertPath;
  const previousKey = settings.tlsMitmCaPreviousKeyPath;
  const untilMs = settings.tlsMitmCaOverlapUntilMs;
  if (previousCert === undefined || previousKey === undefined || untilMs === undefined) {
    return { ca: current, files, signing: "current" };
  }
  const now = options.now ?? new Date();
  const until = new Date(untilMs);
  if (now.getTime() >= untilMs) {
    return { ca: current, files, signing: "current", overlap: { until, running: false, current } };
  }
  const previousFiles = await readPair(
    previousCert,
    previousKey,
    { cert: PREVIOUS_CERT_SETTING, key: PREVIOUS_KEY_SETTING },
    read,
  );
  return {
    ca: await loadMitmCaFiles(previousFiles, options.now),
    files: previousFiles,
    signing: "previous",
    overlap: { until, running: true, current },
  };
}

async function readPair(
  certPath: string,
  keyPath: string,
  names: { cert: string; key: string },
  read: (path: string) => Promise<string>,
): Promise<MitmCaFiles> {
  const certPem = await readSetting(names.cert, certPath, read);
  const keyPem = await readSetting(names.key, keyPath, read);
  return { certPem, keyPem, certPath, keyPath, settings: names };
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
    const { cert, key } = files.settings;
    const setting = error.message.startsWith(`${files.keyPath} `) ? key : cert;
    throw new StartRefused(
      `${setting}: the TLS interception CA cannot be used: ${error.message} ` +
        `(${cert}=${files.certPath}, ${key}=${files.keyPath})`,
      { setting, path: setting === key ? files.keyPath : files.certPath },
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
  options: { certPath?: string; overlap?: MitmCaOverlap } = {},
): () => void {
  const now = new Date();
  const overlap = options.overlap;
  logger.info("TLS interception CA loaded", {
    ...(options.certPath === undefined ? {} : { cert_path: options.certPath }),
    subject: ca.certificate.subject,
    not_after: ca.notAfter.toISOString(),
    days_left: daysLeft(ca.notAfter, now),
    spki_sha256: ca.spkiSha256,
    ...(overlap === undefined ? {} : { signing: overlap.running ? "previous" : "current" }),
  });
  if (overlap !== undefined) {
    const fields = {
      overlap_until: overlap.until.toISOString(),
      current_spki_sha256: overlap.current.spkiSha256,
    };
    logger.info(
      overlap.running
        ? "Signing with the previous TLS interception CA while the rotation's overlap lasts; " +
          "a start after it signs with the current one"
        : "The rotation's overlap has ended: signing with the current TLS interception CA (the " +
          "previous CA's settings can go)",
      fields,
    );
  }
  const stopExpiry = watchExpiry(ca, logger, { every: daily });
  // Past the overlap's end, a gateway started during it still signs with the previous CA: said
  // each day until it is restarted.
  const stopOverlap = overlap?.running
    ? daily(() => {
      if (Date.now() < overlap.until.getTime()) return;
      logger.warn(
        "The TLS interception CA's overlap has ended: restart the gateway to sign with the " +
          "current CA",
        {
          overlap_until: overlap.until.toISOString(),
          current_spki_sha256: overlap.current.spkiSha256,
        },
      );
    }, EXPIRY_CHECK_INTERVAL_MS)
    : undefined;
  return () => {
    stopExpiry();
    stopOverlap?.();
  };
}

/** Runs `check` every `ms` on a timer that never keeps a stopping process alive. */
function daily(check: () => void, ms: number): () => void {
  const timer = setInterval(check, ms);
  Deno.unrefTimer(timer);
  return () => clearInterval(timer);
}
