/**
 * A backup's envelope: its contents sealed with a passphrase. AES-256-GCM under a key that
 * scrypt derives from the passphrase and a random salt, with a random IV each time; the clear
 * header fields (format, schema version, creation time, whether history is in, the key
 * derivation and the cipher) are the cipher's additional data, so none of them can be changed
 * without the open failing. Only the schema version is read before the passphrase opens it, to
 * refuse another version with a message that says so.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import * as v from "valibot";
import { BackupRefusedError } from "../../shared/errors.ts";
import { scryptKey } from "../services/passwords.ts";

export const BACKUP_FORMAT = "octoprox-backup";
export const BACKUP_CIPHER = "aes-256-gcm";

const KEY_BYTES = 32;
const SALT_BYTES = 16;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** What an export costs the passphrase's guesser: about 32 MB and a tenth of a second a guess. */
export const BACKUP_KDF_COST = { N: 1 << 15, r: 8, p: 1 } as const;

/** A file's own cost is read from it: bounded, so a crafted one cannot take the machine. */
const KDF_LIMITS = { minN: 1 << 14, maxN: 1 << 20, maxR: 32, maxP: 16 } as const;
const MAX_KDF_MEMORY_BYTES = 256 * 1024 * 1024;

export const UNOPENED =
  "The passphrase does not open this backup, or the file was altered; nothing was changed";

export interface BackupKdf {
  name: "scrypt";
  /** base64 */
  salt: string;
  N: number;
  r: number;
  p: number;
  key_length: number;
}

/** The fields readable without the passphrase, each bound to the contents. */
export interface BackupHeader {
  format: typeof BACKUP_FORMAT;
  schema_version: number;
  created_at: string;
  include_history: boolean;
  kdf: BackupKdf;
  cipher: typeof BACKUP_CIPHER;
}

export interface BackupEnvelope extends BackupHeader {
  /** base64 */
  iv: string;
  /** base64: the GCM tag over the additional data and the contents. */
  tag: string;
  /** base64: the sealed contents. */
  data: string;
}

/** The header as the cipher's additional data: an array, so key order cannot matter. */
function additionalData(header: BackupHeader): Buffer {
  const k = header.kdf;
  return Buffer.from(JSON.stringify([
    header.format,
    header.schema_version,
    header.created_at,
    header.include_history,
    [k.name, k.salt, k.N, k.r, k.p, k.key_length],
    header.cipher,
  ]));
}

function keyOf(passphrase: string, kdf: BackupKdf): Promise<Buffer> {
  const { N, r, p } = kdf;
  // scrypt needs 128 * N * r bytes and refuses to run past maxmem.
  return scryptKey(passphrase, Buffer.from(kdf.salt, "base64"), kdf.key_length, {
    N,
    r,
    p,
    maxmem: 2 * 128 * N * r,
  });
}

/** Seals `contents` (already compressed chunks) under the passphrase. */
export async function sealBackup(
  passphrase: string,
  fields: { schemaVersion: number; createdAt: Date; includeHistory: boolean },
  contents: readonly Buffer[],
): Promise<BackupEnvelope> {
  const header: BackupHeader = {
    format: BACKUP_FORMAT,
    schema_version: fields.schemaVersion,
    created_at: fields.createdAt.toISOString(),
    include_history: fields.includeHistory,
    kdf: {
      name: "scrypt",
      salt: randomBytes(SALT_BYTES).toString("base64"),
      ...BACKUP_KDF_COST,
      key_length: KEY_BYTES,
    },
    cipher: BACKUP_CIPHER,
  };
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(BACKUP_CIPHER, await keyOf(passphrase, header.kdf), iv, {
    authTagLength: TAG_BYTES,
  });
  cipher.setAAD(additionalData(header));
  const sealed = contents.map((chunk) => cipher.update(chunk));
  sealed.push(cipher.final());
  return {
    ...header,
    iv: iv.toString("base64"),
    tag: cipher.getAuthTag().toString("base64"),
    data: Buffer.concat(sealed).toString("base64"),
  };
}

const NOT_A_BACKUP = "This is not an Octoprox backup";

const wholeNumber = v.pipe(v.number(), v.integer(), v.minValue(0));

const Envelope = v.object({
  format: v.literal(BACKUP_FORMAT),
  schema_version: wholeNumber,
  created_at: v.string(),
  include_history: v.boolean(),
  kdf: v.object({
    name: v.literal("scrypt"),
    salt: v.string(),
    N: wholeNumber,
    r: wholeNumber,
    p: wholeNumber,
    key_length: v.literal(KEY_BYTES),
  }),
  cipher: v.literal(BACKUP_CIPHER),
  iv: v.string(),
  tag: v.string(),
  data: v.string(),
});

function kdfWithinLimits({ N, r, p }: BackupKdf): boolean {
  const powerOfTwo = (N & (N - 1)) === 0;
  return powerOfTwo && N >= KDF_LIMITS.minN && N <= KDF_LIMITS.maxN && r >= 1 &&
    r <= KDF_LIMITS.maxR && p >= 1 && p <= KDF_LIMITS.maxP &&
    128 * N * r <= MAX_KDF_MEMORY_BYTES;
}

/**
 * Opens an envelope made at `schemaVersion`: its header and contents (still compressed), or a
 * BackupRefusedError saying why not. Changes nothing anywhere.
 */
export async function openBackup(
  passphrase: string,
  backup: unknown,
  schemaVersion: number,
): Promise<{ header: BackupHeader; contents: Buffer }> {
  const format = (backup as { format?: unknown } | null)?.format;
  if (format !== BACKUP_FORMAT) {
    throw new BackupRefusedError(
      `${NOT_A_BACKUP} (its format is not "${BACKUP_FORMAT}"); nothing was changed`,
    );
  }
  const version = (backup as { schema_version?: unknown }).schema_version;
  if (typeof version === "number" && version !== schemaVersion) {
    throw new BackupRefusedError(
      `This backup was made at schema version ${version}; this install is at ${schemaVersion}: ` +
        `restore it on a release at schema version ${version}, upgrade that install to this ` +
        "release, and export it again; nothing was changed",
    );
  }
  const parsed = v.safeParse(Envelope, backup);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const field = ["backup", ...(issue.path ?? []).map((item) => String(item.key))].join(".");
    throw new BackupRefusedError(
      `${NOT_A_BACKUP}: ${field} is missing or malformed; nothing was changed`,
    );
  }
  const envelope = parsed.output;
  if (!kdfWithinLimits(envelope.kdf)) {
    throw new BackupRefusedError(
      `${NOT_A_BACKUP}: its key derivation cost (scrypt N=${envelope.kdf.N}, ` +
        `r=${envelope.kdf.r}, p=${envelope.kdf.p}) is beyond what an import runs; ` +
        "nothing was changed",
    );
  }
  const iv = Buffer.from(envelope.iv, "base64");
  const tag = Buffer.from(envelope.tag, "base64");
  if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new BackupRefusedError(UNOPENED);
  const header: BackupHeader = {
    format: envelope.format,
    schema_version: envelope.schema_version,
    created_at: envelope.created_at,
    include_history: envelope.include_history,
    kdf: envelope.kdf,
    cipher: envelope.cipher,
  };
  const key = await keyOf(passphrase, envelope.kdf);
  try {
    const decipher = createDecipheriv(BACKUP_CIPHER, key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(additionalData(header));
    decipher.setAuthTag(tag);
    const opened = decipher.update(Buffer.from(envelope.data, "base64"));
    // final() checks the tag: a wrong key, an altered header or altered contents all land here.
    return { header, contents: Buffer.concat([opened, decipher.final()]) };
  } catch (error) {
    throw new BackupRefusedError(UNOPENED, { cause: error });
  }
}
