/**
 * `backup export -o FILE` and `backup import FILE`: a sealed copy of everything, streamed to or
 * from disk with a progress bar. The passphrase comes from `--passphrase-file`, else
 * OCTOPROX_BACKUP_PASSPHRASE, else the terminal (asked twice for an export), never an argument
 * (it would show in the process list).
 */
import { rename, rm } from "node:fs/promises";
import { basename } from "node:path";
import type { Command } from "commander";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { CliError } from "../errors.ts";
import { emit, formatBytes, line, pc, printTable } from "../output.ts";
import { byteProgress } from "../progress.ts";
import { askSecret, confirm, isInteractive } from "../prompt.ts";
import { readSecretFile } from "../secrets.ts";
import { saveBody, sizeOf, streamParts } from "../streams.ts";

interface PassphraseOptions extends JsonOption {
  passphraseFile?: string;
}

async function passphraseOf(options: PassphraseOptions, twice: boolean): Promise<string> {
  if (options.passphraseFile) return await readSecretFile(options.passphraseFile);
  const fromEnv = process.env.OCTOPROX_BACKUP_PASSPHRASE;
  if (fromEnv) return fromEnv;
  if (!isInteractive()) {
    throw new CliError(
      "No passphrase: give --passphrase-file or set OCTOPROX_BACKUP_PASSPHRASE",
    );
  }
  const passphrase = await askSecret("Backup passphrase: ");
  if (twice && await askSecret("The passphrase again: ") !== passphrase) {
    throw new CliError("The two passphrases differ");
  }
  return passphrase;
}

export function registerBackup(program: Command): void {
  const backup = program.command("backup").description(
    "Sealed backups of every definition (admin)",
  );

  leaf(backup, "export", "Download a backup sealed with a passphrase", [
    "octoprox backup export -o octoprox.backup",
    "octoprox backup export -o octoprox.backup --passphrase-file ./passphrase --history",
  ])
    .requiredOption("-o, --output <file>", "the file to write (mode 0600)")
    .option("--passphrase-file <path>", "read the passphrase (12 characters or more) from a file")
    .option("--history", "include the usage history (larger)")
    .action(async (options: PassphraseOptions & { output: string; history?: boolean }) => {
      const client = await connect();
      const passphrase = await passphraseOf(options, true);
      const response = await client.send("POST", "/backup/export", {
        body: { passphrase, include_history: Boolean(options.history) },
        untimed: true,
      });
      const length = Number(response.headers.get("content-length")) || undefined;
      // Written aside and renamed: a failed download never leaves half a backup at the name.
      const partial = `${options.output}.partial`;
      const progress = byteProgress(`Downloading ${basename(options.output)}`, length);
      let bytes: number;
      try {
        bytes = await saveBody(response, partial, (received) => progress.update(received));
        await rename(partial, options.output);
      } catch (error) {
        await rm(partial, { force: true });
        throw new CliError(`The backup was not written: ${(error as Error).message}`, {
          cause: error,
        });
      } finally {
        progress.stop();
      }
      emit(
        outputOf(options),
        { file: options.output, bytes },
        () => line(`${pc.green("Wrote")} ${options.output} (${formatBytes(bytes)}).`),
      );
    });

  leaf(backup, "import <file>", "Restore a backup: replaces everything with its contents", [
    "octoprox backup import octoprox.backup",
    "OCTOPROX_BACKUP_PASSPHRASE=… octoprox backup import octoprox.backup --yes",
  ])
    .option("--passphrase-file <path>", "read the passphrase from a file")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (file: string, options: PassphraseOptions & { yes?: boolean }) => {
      const client = await connect();
      // The envelope is sent as it is on disk, inside the body: never parsed or held whole.
      const passphrase = await passphraseOf(options, false);
      const head = new TextEncoder().encode(
        `{"passphrase":${JSON.stringify(passphrase)},"backup":`,
      );
      const parts = [{ bytes: head }, { file }, { bytes: new TextEncoder().encode("}") }];
      const lengthBytes = await sizeOf(parts);
      if (
        !await confirm(
          `Replace every user, token, project, connector and proxy at ${client.baseUrl} with ${file}?`,
          options.yes,
        )
      ) {
        line("Nothing restored.");
        return;
      }
      const progress = byteProgress(`Uploading ${basename(file)}`, lengthBytes);
      let answer: { schema_version: number; restored: Record<string, number> };
      try {
        answer = await client.request("POST", "/backup/import", {
          stream: {
            body: streamParts(parts, (bytes) => progress.update(bytes)),
            contentType: "application/json",
            lengthBytes,
          },
        });
      } finally {
        progress.stop();
      }
      emit(outputOf(options), answer, () => {
        line(`${pc.green("Restored")} ${file} (schema version ${answer.schema_version}).`);
        printTable(
          ["Restored", "Rows"],
          Object.entries(answer.restored).map(([table, rows]) => [table, rows]),
        );
        line(pc.dim("Tokens are the backup's now: log in again if this one was not in it."));
      });
    });
}
