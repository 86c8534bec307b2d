/**
 * The TLS interception CA's files on disk, for `npm start` (scripts/start.ts) and the CA tool
 * (`npm run ca:create`, `npm run ca:rotate`: scripts/ca.ts): made when neither file exists, the key
 * first and private from its first byte (0600), never written over a file another run made, and
 * checked whenever found (shared/tls/ca.ts `loadCa`). A certificate found without its key (or
 * the key without it) is never replaced: the clients that trust the old CA would stop trusting
 * the install, so that is the operator's decision. A rotation moves the pair aside as the
 * previous CA, makes a new one, and records the overlap's end beside the certificate.
 */
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, extname, join } from "node:path";
import { errorText } from "../shared/errors.ts";
import { createCa, loadCa, type MitmCa } from "../shared/tls/ca.ts";

/** Something about the files that the person at the terminal must put right. */
export class CaFilesError extends Error {}

export interface CaFiles {
  certPath: string;
  keyPath: string;
}

export interface EnsuredCa extends CaFiles {
  /** Whether this run made it (clients must then trust the new CA). */
  created: boolean;
  ca: MitmCa;
}

/** Writes a new CA's two files, neither existing: the key first, 0600 in a 0700 folder. */
export async function writeNewCa(files: CaFiles): Promise<void> {
  const pem = await createCa();
  await mkdir(dirname(files.keyPath), { recursive: true, mode: 0o700 });
  await mkdir(dirname(files.certPath), { recursive: true, mode: 0o700 });
  // `wx`: never over a file another run made meanwhile.
  await writeFile(files.keyPath, pem.keyPem, { mode: 0o600, flag: "wx" });
  await chmod(files.keyPath, 0o600);
  await writeFile(files.certPath, pem.certPem, { mode: 0o644, flag: "wx" });
}

/** The CA the files hold, checked; CaFilesError naming the file at fault. */
export async function readCaFiles(
  files: CaFiles,
  shown: (path: string) => string = (path) => path,
): Promise<MitmCa> {
  for (const path of [files.certPath, files.keyPath]) {
    if (!existsSync(path)) {
      throw new CaFilesError(`${shown(path)} (the TLS interception CA) does not exist`);
    }
  }
  try {
    return await loadCa(
      {
        certPem: await readFile(files.certPath, "utf8"),
        keyPem: await readFile(files.keyPath, "utf8"),
      },
      { source: { certPath: shown(files.certPath), keyPath: shown(files.keyPath) } },
    );
  } catch (error) {
    throw new CaFilesError(`the TLS interception CA cannot be used: ${errorText(error)}`);
  }
}

/**
 * The CA at `files`: made when neither file exists and `create` allows it, then checked. One file
 * without the other is a CaFilesError saying what to do.
 */
export async function ensureCaFiles(
  files: CaFiles,
  options: { create: boolean; shown?: (path: string) => string },
): Promise<EnsuredCa> {
  const shown = options.shown ?? ((path: string) => path);
  const present = [files.certPath, files.keyPath].filter((path) => existsSync(path));
  let created = false;
  if (present.length === 0 && options.create) {
    await writeNewCa(files);
    created = true;
  } else if (present.length === 1) {
    const missing = present[0] === files.certPath ? files.keyPath : files.certPath;
    throw new CaFilesError(
      `${shown(missing)} is missing beside the TLS interception CA's other file ` +
        `(${shown(present[0])}); restore it, or remove the other to make a new CA (clients that ` +
        "trusted the old one must then trust the new)",
    );
  }
  return { ...files, created, ca: await readCaFiles(files, shown) };
}

// ---------------------------------------------------------------------------------------------
// Rotation (docs/tls-interception.md, "Rotation")

/** The record a rotation leaves beside the current certificate, for `npm start` to read. */
export const ROTATION_RECORD = "rotation.json";

export interface RotationRecord {
  previous_cert_path: string;
  previous_key_path: string;
  /** When the overlap ends, ISO 8601 (OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL). */
  overlap_until: string;
  rotated_at: string;
}

/** `mitm-ca.pem` → `mitm-ca.previous.pem`: where a rotation moves a file aside. */
export function previousPathOf(path: string): string {
  const ext = extname(path);
  return join(dirname(path), `${basename(path, ext)}.previous${ext}`);
}

export function rotationRecordPath(certPath: string): string {
  return join(dirname(certPath), ROTATION_RECORD);
}

/** The rotation record beside `certPath`, if any; CaFilesError when it cannot be read. */
export async function readRotationRecord(certPath: string): Promise<RotationRecord | undefined> {
  const path = rotationRecordPath(certPath);
  if (!existsSync(path)) return undefined;
  try {
    const record = JSON.parse(await readFile(path, "utf8")) as RotationRecord;
    if (
      typeof record.previous_cert_path !== "string" ||
      typeof record.previous_key_path !== "string" ||
      !Number.isFinite(Date.parse(record.overlap_until))
    ) {
      throw new Error("it lacks previous_cert_path, previous_key_path or overlap_until");
    }
    return record;
  } catch (error) {
    throw new CaFilesError(
      `${path} is not a rotation record (${errorText(error)}); fix or remove it`,
    );
  }
}

export interface Rotated {
  current: MitmCa;
  previous: MitmCa;
  record: RotationRecord;
  /** The overlap asked for ended past the previous CA's own end: it ends with the CA instead. */
  clamped: boolean;
}

/**
 * Rotates the CA at `files`: the pair moves aside as the previous CA (previousPathOf each), a new
 * pair takes its place, and the overlap ends `overlapDays` from now (or at the previous CA's own
 * end, if sooner). Refused while an earlier rotation's overlap still runs, since its previous CA
 * would be dropped while clients may still trust only it. The new files are written whole before
 * anything is moved, so an interrupted rotation leaves the current pair in place.
 */
export async function rotateCaFiles(
  files: CaFiles,
  options: { overlapDays: number; now?: Date },
): Promise<Rotated> {
  const now = options.now ?? new Date();
  const previous = await readCaFiles(files);
  const earlier = await readRotationRecord(files.certPath);
  if (earlier !== undefined && Date.parse(earlier.overlap_until) > now.getTime()) {
    throw new CaFilesError(
      `an earlier rotation's overlap runs until ${earlier.overlap_until} ` +
        `(${rotationRecordPath(files.certPath)}): rotating again now would drop the CA some ` +
        "clients may still trust alone; wait until it ends",
    );
  }
  // Whole seconds: the setting's value reads as it is written.
  const asked = Math.floor(now.getTime() / 1000) * 1000 + options.overlapDays * 86_400_000;
  const until = new Date(Math.min(asked, previous.notAfter.getTime()));
  const moved: CaFiles = {
    certPath: previousPathOf(files.certPath),
    keyPath: previousPathOf(files.keyPath),
  };
  const fresh: CaFiles = { certPath: `${files.certPath}.new`, keyPath: `${files.keyPath}.new` };
  for (const path of [fresh.certPath, fresh.keyPath]) await rm(path, { force: true });
  await writeNewCa(fresh);
  await rename(files.keyPath, moved.keyPath);
  await rename(files.certPath, moved.certPath);
  await rename(fresh.keyPath, files.keyPath);
  await rename(fresh.certPath, files.certPath);
  const record: RotationRecord = {
    previous_cert_path: moved.certPath,
    previous_key_path: moved.keyPath,
    overlap_until: until.toISOString(),
    rotated_at: now.toISOString(),
  };
  await writeFile(rotationRecordPath(files.certPath), `${JSON.stringify(record, null, 2)}\n`, {
    mode: 0o644,
  });
  return {
    current: await readCaFiles(files),
    previous,
    record,
    clamped: until.getTime() < asked,
  };
}
