/**
 * `octoprox backup export` and `backup import` against a real api: an export in a real
 * terminal shows its download progress and writes a 0600 sealed file; an import of it brings
 * back what was deleted since; a wrong passphrase is refused (exit 1) and changes nothing.
 */
import { statSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster } from "../../testkit/cluster.ts";
import { CliUser, Terminal } from "./support.ts";

let cluster: Cluster;
const user = new CliUser();
const terminals: Terminal[] = [];
const PASSPHRASE = "correct horse battery staple";

beforeAll(async () => {
  cluster = await Cluster.create();
  await cluster.start("all");
  await user.loginWithToken(cluster, "backup-test");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const terminal of terminals) terminal.close();
  user.remove();
  await cluster?.close();
});

async function projectNames(): Promise<string[]> {
  return (await user.json<{ name: string }[]>(["projects", "list"])).map((p) => p.name);
}

describe("backup", () => {
  it("exports with a progress bar and imports what was deleted since", async () => {
    await user.json(["projects", "create", "keep-me"]);
    await user.json(["connectors", "create", "main", "-p", "keep-me"]);
    const passphraseFile = join(user.configHome, "passphrase");
    writeFileSync(passphraseFile, `${PASSPHRASE}\n`);
    const backupFile = join(user.configHome, "octoprox.backup");

    const terminal = new Terminal();
    terminals.push(terminal);
    terminal.start(user, [
      "backup",
      "export",
      "-o",
      backupFile,
      "--passphrase-file",
      passphraseFile,
    ]);
    expect(await terminal.exitCode()).toBe(0);
    const screen = terminal.screen();
    expect(screen).toMatch(/Downloading octoprox\.backup/);
    expect(screen).toContain(`Wrote ${backupFile}`);
    expect(statSync(backupFile).mode & 0o777).toBe(0o600);
    const envelope = JSON.parse(await readFile(backupFile, "utf8"));
    expect(envelope.format).toBe("octoprox-backup");
    expect(await readFile(backupFile, "utf8")).not.toContain("keep-me");

    expect((await user.run(["projects", "delete", "keep-me", "--yes"])).code).toBe(0);
    expect(await projectNames()).toEqual([]);

    const wrong = await user.run(["backup", "import", backupFile, "--yes"], {
      env: { OCTOPROX_BACKUP_PASSPHRASE: "not the passphrase at all" },
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("POST /api/v1/backup/import: 400");
    expect(await projectNames()).toEqual([]);

    const restored = await user.run(["backup", "import", backupFile, "--yes"], {
      env: { OCTOPROX_BACKUP_PASSPHRASE: PASSPHRASE },
    });
    expect(restored.code, restored.stderr).toBe(0);
    expect(restored.stdout).toContain(`Restored ${backupFile}`);
    expect(restored.stdout).toMatch(/projects\s+│\s+1/);
    expect(restored.stderr).toContain("Uploading octoprox.backup: 100%");
    expect(await projectNames()).toEqual(["keep-me"]);
  });

  it("asks for a passphrase only on a terminal", async () => {
    const run = await user.run(["backup", "export", "-o", join(user.configHome, "x.backup")]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("--passphrase-file or set OCTOPROX_BACKUP_PASSPHRASE");
  });
});
