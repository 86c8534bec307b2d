/**
 * `distribution-keys list|create|revoke <project>`: the keys of a project's extraction API,
 * over the admin API (viewers list; editors and admins create and revoke). A key is shown once,
 * when created.
 */
import type { Command } from "commander";
import type { DistributionKey } from "../../api/answers/distribution-keys.ts";
import {
  collectRepeated,
  connect,
  type JsonOption,
  leaf,
  outputOf,
  positiveInteger,
} from "../command.ts";
import { UsageError } from "../errors.ts";
import { emit, line, note, pc, printTable } from "../output.ts";
import { confirm } from "../prompt.ts";
import { pick, resolveProject } from "../resolve.ts";

export function registerDistributionKeys(program: Command): void {
  const keys = program.command("distribution-keys").description(
    "Distribution keys: who may call a project's extraction API",
  );

  leaf(keys, "list <project>", "List a project's distribution keys", [
    "octoprox distribution-keys list shop",
  ]).action(async (project: string, options: JsonOption) => {
    const client = await connect();
    const { id } = await resolveProject(client, project);
    const list = await client.request<DistributionKey[]>(
      "GET",
      `/projects/${id}/distribution-keys`,
    );
    emit(outputOf(options), list, () =>
      printTable(
        ["Name", "Prefix", "Active", "Allowed from", "Created", "Expires", "Last used", "Id"],
        list.map((key) => [
          key.name,
          key.prefix,
          key.active ? pc.green("yes") : pc.dim(key.revoked_at ? "revoked" : "expired"),
          key.allowed_cidrs.length === 0 ? "anywhere" : key.allowed_cidrs.join(", "),
          key.created_at,
          key.expires_at,
          key.last_used_at,
          key.id,
        ]),
        "No distribution key.",
      ));
  });

  leaf(keys, "create <project> <name>", "Create a distribution key (shown once)", [
    "octoprox distribution-keys create shop crawler --allow 203.0.113.0/24",
    "octoprox distribution-keys create shop ci --expires-in-days 30 --json | jq -r .key",
  ])
    .option("--allow <cidr>", "a client block the key is taken from (repeatable)", collectRepeated)
    .option("--expires-at <time>", "when it stops working (ISO 8601)")
    .option("--expires-in-days <n>", "days it lasts (until revoked otherwise)", positiveInteger)
    .action(async (
      project: string,
      name: string,
      options: JsonOption & { allow?: string[]; expiresAt?: string; expiresInDays?: number },
    ) => {
      if (options.expiresAt !== undefined && options.expiresInDays !== undefined) {
        throw new UsageError("Give --expires-at or --expires-in-days, not both");
      }
      const client = await connect();
      const { id } = await resolveProject(client, project);
      const expiresAt = options.expiresInDays === undefined
        ? options.expiresAt
        : new Date(Date.now() + options.expiresInDays * 86_400_000).toISOString();
      const created = await client.request<DistributionKey>(
        "POST",
        `/projects/${id}/distribution-keys`,
        { body: { name, allowed_cidrs: options.allow, expires_at: expiresAt } },
      );
      emit(outputOf(options), created, () => {
        line(
          `${pc.green("Created")} distribution key ${created.name} (${created.id}). ` +
            "It is shown this once:",
        );
        line(created.key ?? "");
        note(
          "Whoever holds it extracts this project's proxies with their credentials in clear: " +
            "keep it like a password.",
        );
      });
    });

  leaf(keys, "revoke <project> <key>", "Revoke a distribution key (by id, name or prefix)", [
    "octoprox distribution-keys revoke shop crawler",
    "octoprox distribution-keys revoke shop oxd_3kT9aQ… --purge --yes",
  ])
    .option("--purge", "delete its record too (a revoke keeps it, with its last use)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (
      project: string,
      ref: string,
      options: JsonOption & { purge?: boolean; yes?: boolean },
    ) => {
      const client = await connect();
      const { id } = await resolveProject(client, project);
      const list = await client.request<DistributionKey[]>(
        "GET",
        `/projects/${id}/distribution-keys`,
      );
      const candidates = options.purge ? list : list.filter((key) => key.active);
      const key = candidates.find((k) => k.prefix === ref) ??
        pick(candidates, ref, (k) => k.name, options.purge ? "key" : "active key");
      const verb = options.purge ? "Delete" : "Revoke";
      if (!await confirm(`${verb} distribution key ${key.name} (${key.prefix}…)?`, options.yes)) {
        line("Nothing changed.");
        return;
      }
      await client.request("DELETE", `/projects/${id}/distribution-keys/${key.id}`, {
        query: { purge: options.purge ? "true" : undefined },
      });
      emit(
        outputOf(options),
        { [options.purge ? "deleted" : "revoked"]: key },
        () => line(`${pc.green(options.purge ? "Deleted" : "Revoked")} key ${key.name}.`),
      );
    });
}
