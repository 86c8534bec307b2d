/** Backup bodies: the export's passphrase and options, the import's passphrase and file. */
import * as v from "valibot";
import { booleanField, jsonObjectField } from "./common.ts";

export const BACKUP_PASSPHRASE_MIN_CHARS = 12;
export const BACKUP_PASSPHRASE_MAX_CHARS = 1024;

const tooLong = `must be at most ${BACKUP_PASSPHRASE_MAX_CHARS} characters`;

export const ExportBackupBody = v.strictObject({
  passphrase: v.pipe(
    v.string("must be text"),
    v.minLength(
      BACKUP_PASSPHRASE_MIN_CHARS,
      `must be at least ${BACKUP_PASSPHRASE_MIN_CHARS} characters`,
    ),
    v.maxLength(BACKUP_PASSPHRASE_MAX_CHARS, tooLong),
  ),
  include_history: v.optional(booleanField, false),
});

export const ImportBackupBody = v.strictObject({
  // Any length: a wrong one is refused as not opening the backup.
  passphrase: v.pipe(
    v.string("must be text"),
    v.minLength(1, "must not be empty"),
    v.maxLength(BACKUP_PASSPHRASE_MAX_CHARS, tooLong),
  ),
  /** The envelope an export answered; what is inside is checked by the import itself. */
  backup: jsonObjectField,
});
