/** `tokens list|create|revoke`: API tokens for scripts (your own; admins may name a user). */
import type { Command } from "commander";
import type { ApiToken, UserRecord } from "../../api/answers/users.ts";
import type { Client } from "../client.ts";
import { connect, type JsonOption, leaf, outputOf, positiveInteger } from "../command.ts";
import { emit, line, pc, printTable } from "../output.ts";
import { confirm } from "../prompt.ts";
import { pick } from "../resolve.ts";

async function userId(client: Client, ref: string | undefined): Promise<string | undefined> {
  if (!ref) return undefined;
  const users = await client.request<UserRecord[]>("GET", "/users");
  return pick(users, ref, (user) => user.username, "user").id;
}

export function registerTokens(program: Command): void {
  const tokens = program.command("tokens").description("API tokens");

  leaf(tokens, "list", "List API tokens", [
    "octoprox tokens list",
    "octoprox tokens list --user alice",
  ])
    .option("--user <user>", "another user's tokens (admins; name or id)")
    .action(async (options: JsonOption & { user?: string }) => {
      const client = await connect();
      const list = await client.request<ApiToken[]>("GET", "/tokens", {
        query: { user_id: await userId(client, options.user) },
      });
      emit(outputOf(options), list, () =>
        printTable(
          ["Name", "Prefix", "Active", "Created", "Expires", "Last used", "Id"],
          list.map((token) => [
            token.name,
            token.prefix,
            token.active ? pc.green("yes") : pc.dim(token.revoked_at ? "revoked" : "expired"),
            token.created_at,
            token.expires_at,
            token.last_used_at,
            token.id,
          ]),
          "No token.",
        ));
    });

  leaf(tokens, "create <name>", "Create an API token (shown once)", [
    "octoprox tokens create ci",
    "octoprox tokens create ci --expires-in-days 90 --json | jq -r .token",
  ])
    .option("--expires-in-days <n>", "days it lasts (until revoked otherwise)", positiveInteger)
    .action(async (name: string, options: JsonOption & { expiresInDays?: number }) => {
      const client = await connect();
      const token = await client.request<ApiToken>("POST", "/tokens", {
        body: { name, expires_in_days: options.expiresInDays },
      });
      emit(outputOf(options), token, () => {
        line(`${pc.green("Created")} token ${token.name} (${token.id}). It is shown this once:`);
        line(token.token ?? "");
      });
    });

  leaf(tokens, "revoke <token>", "Revoke an API token (by id, name or prefix)", [
    "octoprox tokens revoke ci",
    "octoprox tokens revoke 3f1c2a9e-… --yes",
  ])
    .option("--user <user>", "another user's token (admins; name or id)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: JsonOption & { user?: string; yes?: boolean }) => {
      const client = await connect();
      const list = await client.request<ApiToken[]>("GET", "/tokens", {
        query: { user_id: await userId(client, options.user) },
      });
      const active = list.filter((token) => token.active);
      const byPrefix = active.find((token) => token.prefix === ref);
      const token = byPrefix ?? pick(active, ref, (t) => t.name, "active token");
      if (!await confirm(`Revoke token ${token.name} (${token.prefix}…)?`, options.yes)) {
        line("Nothing revoked.");
        return;
      }
      await client.request("DELETE", `/tokens/${token.id}`);
      emit(
        outputOf(options),
        { revoked: token },
        () => line(`${pc.green("Revoked")} token ${token.name}.`),
      );
    });
}
