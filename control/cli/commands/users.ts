/** `users list|create|delete` (admins). */
import { type Command, Option } from "commander";
import type { UserRecord } from "../../api/answers/users.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { emit, line, pc, printTable } from "../output.ts";
import { askSecret, confirm } from "../prompt.ts";
import { pick } from "../resolve.ts";
import { readSecretFile } from "../secrets.ts";

export function registerUsers(program: Command): void {
  const users = program.command("users").description("Users of the admin API (admins)");

  leaf(users, "list", "List the users", ["octoprox users list"])
    .action(async (options: JsonOption) => {
      const client = await connect();
      const list = await client.request<UserRecord[]>("GET", "/users");
      emit(outputOf(options), list, () =>
        printTable(
          ["Username", "Role", "Active", "Email", "Last login", "Id"],
          list.map((user) => [
            user.username,
            user.role,
            user.is_active,
            user.email,
            user.last_login_at,
            user.id,
          ]),
        ));
    });

  leaf(users, "create <username>", "Create a user (the password is asked unless given a file)", [
    "octoprox users create alice --role editor",
    "octoprox users create ci --role viewer --password-file ./ci-password",
  ])
    .addOption(
      new Option("--role <role>", "what the user may do").choices(["viewer", "editor", "admin"])
        .makeOptionMandatory(),
    )
    .option("--email <email>", "an email address")
    .option("--password-file <path>", "read the password from this file (first line)")
    .action(async (
      username: string,
      options: JsonOption & { role: string; email?: string; passwordFile?: string },
    ) => {
      const client = await connect();
      const password = options.passwordFile
        ? await readSecretFile(options.passwordFile)
        : await askSecret(`Password for ${username}: `);
      const user = await client.request<UserRecord>("POST", "/users", {
        body: { username, password, role: options.role, email: options.email },
      });
      emit(
        outputOf(options),
        user,
        () => line(`${pc.green("Created")} user ${user.username} (${user.role}, ${user.id}).`),
      );
    });

  leaf(users, "delete <user>", "Delete a user (by username or id)", [
    "octoprox users delete alice --yes",
  ])
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const list = await client.request<UserRecord[]>("GET", "/users");
      const user = pick(list, ref, (u) => u.username, "user");
      if (!await confirm(`Delete user ${user.username}?`, options.yes)) {
        line("Nothing deleted.");
        return;
      }
      await client.request("DELETE", `/users/${user.id}`);
      emit(
        outputOf(options),
        { deleted: user },
        () => line(`${pc.green("Deleted")} user ${user.username}.`),
      );
    });
}
