/** `login`, `logout` and `whoami`: the stored API token and who it acts as. */
import { hostname } from "node:os";
import type { Command } from "commander";
import { Client } from "../client.ts";
import { configPath, readStored, removeStored, writeStored } from "../config-store.ts";
import { ApiError, UsageError } from "../errors.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { emit, line, pc, printFields } from "../output.ts";
import { ask, askSecret } from "../prompt.ts";

interface Me {
  id: string;
  username: string;
  role: string;
  via: string;
}

interface TokenRecord {
  id: string;
  name: string;
  prefix: string;
  active: boolean;
}

/** `https://host:8000/`, `https://host:8000/api/v1` → `https://host:8000`. */
export function normalizeUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`"${text}" is not a URL (such as http://127.0.0.1:8000)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`"${text}" is not an http or https URL`);
  }
  const path = url.pathname.replace(/\/+$/, "").replace(/\/api\/v1$/, "");
  return `${url.origin}${path}`;
}

export function registerAuth(program: Command): void {
  leaf(
    program,
    "login <url>",
    "Log in to an Octoprox API and keep an API token for the next commands",
    [
      "octoprox login http://127.0.0.1:8000",
      "octoprox login https://octoprox.example.com --username alice",
      "octoprox login https://octoprox.example.com --token oxp_…",
    ],
  )
    .option("--token <token>", "use this API token instead of a username and password")
    .option("--username <name>", "the username (asked on the terminal otherwise)")
    .action(async (rawUrl: string, options: JsonOption & { token?: string; username?: string }) => {
      const url = normalizeUrl(rawUrl);
      let token = options.token;
      let created: TokenRecord | undefined;
      if (!token) {
        const username = options.username ?? await ask("Username: ");
        const password = await askSecret("Password: ");
        const session = await new Client({ url }).request<{ access_token: string }>(
          "POST",
          "/auth/login",
          { body: { username, password } },
        );
        const record = await new Client({ url, token: session.access_token }).request<
          TokenRecord & { token: string }
        >("POST", "/tokens", { body: { name: `cli@${hostname()}`.slice(0, 100) } });
        token = record.token;
        created = record;
      }
      // The token is checked before it is kept: a typo fails here, not on the next command.
      const me = await new Client({ url, token }).request<Me>("GET", "/auth/me");
      const path = await writeStored({ url, token });
      const answer = {
        url,
        username: me.username,
        role: me.role,
        token_name: created?.name ?? null,
        config_file: path,
      };
      emit(outputOf(options), answer, () => {
        line(`${pc.green("Logged in")} to ${url} as ${me.username} (${me.role}).`);
        line(
          `${created ? `API token "${created.name}" created and` : "Token"} stored in ${path}.`,
        );
      });
    });

  leaf(program, "logout", "Revoke the stored API token and forget the login", [
    "octoprox logout",
  ]).action(async (options: JsonOption) => {
    const stored = await readStored();
    if (!stored) {
      emit(outputOf(options), { logged_out: false }, () => line("Not logged in."));
      return;
    }
    const client = new Client(stored);
    let revoked = false;
    try {
      const tokens = await client.request<TokenRecord[]>("GET", "/tokens");
      const mine = tokens.find((t) => t.active && stored.token.startsWith(t.prefix));
      if (mine) {
        await client.request("DELETE", `/tokens/${mine.id}`);
        revoked = true;
      }
    } catch (error) {
      // A token the API no longer takes is as good as revoked; anything else keeps the file.
      if (!(error instanceof ApiError && error.status === 401)) throw error;
    }
    await removeStored();
    emit(outputOf(options), { logged_out: true, revoked, url: stored.url }, () => {
      line(`${revoked ? "Token revoked and login" : "Login"} removed (${configPath()}).`);
    });
  });

  leaf(program, "whoami", "Show the user the token acts as", ["octoprox whoami --json"])
    .action(async (options: JsonOption) => {
      const client = await connect();
      const me = await client.request<Me>("GET", "/auth/me");
      emit(outputOf(options), { url: client.baseUrl, ...me }, () =>
        printFields([
          ["API", client.baseUrl],
          ["User", me.username],
          ["Role", me.role],
          ["Via", me.via],
        ]));
    });
}
