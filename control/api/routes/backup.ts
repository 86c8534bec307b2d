/** Backups of the whole install: an encrypted export, and an import that replaces everything. */
import { UserRole } from "../../../shared/roles.ts";
import {
  backupFileName,
  exportBackup,
  importBackup,
  MAX_BACKUP_BYTES,
} from "../../backup/backup.ts";
import type { ApiDeps } from "../deps.ts";
import { defineRoute, type Route } from "../registry.ts";
import { ExportBackupBody, ImportBackupBody } from "../../model/backup.ts";

const BACKUP = "/api/v1/backup";
const MAX_MB = MAX_BACKUP_BYTES / 1e6;

export function backupRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "post",
      path: `${BACKUP}/export`,
      tag: "backup",
      summary: "Export every definition (and optionally the metrics history), encrypted",
      description: "Users with their password hashes, API tokens' hashes, projects with their " +
        "passwords, credentials, connectors and proxies, read in one snapshot, and with " +
        "`include_history` the metrics history, sealed with the passphrase (scrypt, " +
        "AES-256-GCM) in a JSON envelope whose header (format, schema_version, created_at, " +
        "include_history, kdf, cipher) is readable and bound to the contents. The passphrase " +
        "cannot be recovered. Answered as an attachment `octoprox-backup-<time>.json`.",
      access: UserRole.admin,
      body: ExportBackupBody,
      responses: {
        200: "The backup envelope",
        400: `The backup would be larger than an import takes (${MAX_MB} MB)`,
      },
      async handler({ c, body, principal }) {
        const { envelope, rows } = await exportBackup(deps, {
          passphrase: body.passphrase,
          includeHistory: body.include_history,
        });
        deps.logger.info(
          { user: principal.username, include_history: body.include_history, rows },
          "Backup exported",
        );
        c.header(
          "Content-Disposition",
          `attachment; filename="${backupFileName(envelope.created_at)}"`,
        );
        return c.json(envelope);
      },
    }),
    defineRoute({
      method: "post",
      path: `${BACKUP}/import`,
      tag: "backup",
      summary: "Replace every row with a backup's",
      description: "Opens the backup with the passphrase and, in one transaction, replaces " +
        "every user, API token, project, credential, connector and proxy, and the metrics " +
        "history (emptied when the backup holds none), keeping ids and timestamps; the " +
        "running totals are recomputed from the restored history. Then everything is " +
        "compiled again for the gateways. Your own login or token may be gone afterwards: " +
        `sign in with one of the backup's users. Bodies up to ${MAX_MB} MB.`,
      access: UserRole.admin,
      body: ImportBackupBody,
      maxBodyBytes: MAX_BACKUP_BYTES,
      responses: {
        200: "`{schema_version, restored: {table: rows}}`",
        400: "Not an Octoprox backup, another schema version, or the passphrase does not " +
          "open it (or it was altered); nothing changed",
        413: `The body is larger than ${MAX_MB} MB`,
      },
      async handler({ c, body, principal }) {
        const result = await importBackup(deps, {
          passphrase: body.passphrase,
          backup: body.backup,
        });
        deps.logger.info(
          { user: principal.username, restored: result.restored },
          "Backup restored",
        );
        return c.json({ schema_version: result.schemaVersion, restored: result.restored });
      },
    }),
  ];
}
