/**
 * The TLS interception CA's files on disk, for `npm start` (scripts/start.ts) and the CA tool
 * (`npm run ca:create`, `npm run ca:rotate`: scripts/ca.ts): made when neither file exists, the key
 * first and private from its first byte (0600), never written over a file another run made, and
 * checked whenever found (shared/tls/ca.ts `loadCa`). A certificate found without its key (or
 * the key without it) is never replaced: the clients that trust the old CA would stop trusting
 * the install, so that is the operator's decision.
 */
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
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
