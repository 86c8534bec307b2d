/**
 * Where `octoprox login` keeps its login: `$XDG_CONFIG_HOME/octoprox/config.json` (by default
 * ~/.config/octoprox), `{url, token}`, the file 0600 in a folder 0700 since the token acts as
 * its user. OCTOPROX_URL and OCTOPROX_TOKEN override what is stored.
 */
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { ErrorCode } from "../../shared/errors.ts";
import type { Connection } from "./client.ts";
import { CliError } from "./errors.ts";

export interface StoredLogin {
  url: string;
  token: string;
}

type Env = Record<string, string | undefined>;

export function configDir(env: Env = process.env): string {
  const base = env.XDG_CONFIG_HOME || join(homedir(), ".config");
  return join(base, "octoprox");
}

export function configPath(env: Env = process.env): string {
  return join(configDir(env), "config.json");
}

export async function readStored(env: Env = process.env): Promise<StoredLogin | undefined> {
  const path = configPath(env);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new CliError(`Cannot read ${path}`, { cause: error });
  }
  try {
    const parsed = JSON.parse(text) as Partial<StoredLogin>;
    if (typeof parsed.url === "string" && typeof parsed.token === "string") {
      return { url: parsed.url, token: parsed.token };
    }
  } catch {
    // Reported below, with what to do.
  }
  throw new CliError(`${path} is not an octoprox login; run \`octoprox login <url>\` again`);
}

/** Written to a temporary file first and renamed, so a reader never sees half a file. */
export async function writeStored(login: StoredLogin, env: Env = process.env): Promise<string> {
  const dir = configDir(env);
  const path = configPath(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(login, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, path);
  return path;
}

export async function removeStored(env: Env = process.env): Promise<void> {
  await rm(configPath(env), { force: true });
}

/** The URL and token a command uses: the environment's over the stored login's. */
export async function resolveConnection(env: Env = process.env): Promise<Connection> {
  const stored = await readStored(env);
  const url = env.OCTOPROX_URL || stored?.url;
  const token = env.OCTOPROX_TOKEN || stored?.token;
  if (!url || !token) {
    throw new CliError(
      "Not logged in: run `octoprox login <url>`, or set OCTOPROX_URL and OCTOPROX_TOKEN",
      { code: ErrorCode.unauthorized },
    );
  }
  return { url, token };
}
