/**
 * The CLI as a user runs it: the `octoprox` bin (control/cli/octoprox.js) as a child process
 * with its own config folder, or in a real terminal (a tmux pane on a private tmux server) when
 * a test looks at what a person sees: prompts, the password not echoed, the progress bar.
 */
import { execFile, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../../testkit/processes.ts";
import { waitUntil } from "../../testkit/wait.ts";
import type { Cluster } from "../../testkit/cluster.ts";

export const BIN = join(ROOT, "control/cli/octoprox.js");

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The parent's environment without OCTOPROX_* (each test says which it means). */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OCTOPROX_") && value !== undefined) env[key] = value;
  }
  return env;
}

/** A user of the CLI: a config folder of its own, cleaned up with `remove`. */
export class CliUser {
  readonly configHome = mkdtempSync(join(tmpdir(), "octoprox-cli-"));
  readonly env: Record<string, string>;

  constructor(env: Record<string, string> = {}) {
    this.env = { XDG_CONFIG_HOME: this.configHome, NO_COLOR: "1", ...env };
  }

  get configFile(): string {
    return join(this.configHome, "octoprox", "config.json");
  }

  /** Runs `octoprox ...args`; `input` is written to its stdin. */
  run(args: string[], options: { env?: Record<string, string>; input?: string } = {}) {
    return new Promise<CliRun>((resolve) => {
      const child = execFile(
        process.execPath,
        [BIN, ...args],
        {
          cwd: ROOT,
          env: { ...baseEnv(), ...this.env, ...options.env },
          maxBuffer: 64 * 1024 * 1024,
          timeout: 60_000,
        },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
      child.stdin?.end(options.input ?? "");
    });
  }

  /** Logs in to the cluster's api with a fresh API token of its admin (`--token`). */
  async loginWithToken(cluster: Cluster, tokenName: string): Promise<void> {
    const token = await cluster.request("POST", "/api/v1/tokens", { name: tokenName });
    const login = await this.run(["login", cluster.api.url, "--token", token.body.token]);
    if (login.code !== 0) throw new Error(`octoprox login failed: ${login.stderr}`);
  }

  /** Runs it and parses stdout as JSON; fails with its stderr when it did not exit 0. */
  async json<T = unknown>(args: string[]): Promise<T> {
    const run = await this.run([...args, "--json"]);
    if (run.code !== 0) {
      throw new Error(`octoprox ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
    }
    return JSON.parse(run.stdout) as T;
  }

  remove(): void {
    rmSync(this.configHome, { recursive: true, force: true });
  }
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/** A real terminal, 200×50: a tmux session on a tmux server of the test's own. */
export class Terminal {
  readonly #socket = `octoprox-cli-${randomBytes(4).toString("hex")}`;

  #tmux(args: string[]): string {
    const result = spawnSync("tmux", ["-L", this.#socket, ...args], { encoding: "utf8" });
    if (result.status !== 0) throw new Error(`tmux ${args[0]} failed: ${result.stderr}`);
    return result.stdout;
  }

  /**
   * Runs `octoprox ...args` in the pane; once it exits the pane shows `[exit N]` and stays
   * open, so its last screen can be read.
   */
  start(user: CliUser, args: string[]): void {
    const env = Object.entries({ ...user.env, PATH: process.env.PATH ?? "" })
      .map(([key, value]) => `${key}=${shellQuote(value)}`).join(" ");
    const command = `cd ${shellQuote(ROOT)} && env ${env} ${shellQuote(process.execPath)} ${
      shellQuote(BIN)
    } ${args.map(shellQuote).join(" ")}; echo "[exit $?]"; sleep 3600`;
    this.#tmux(["new-session", "-d", "-x", "200", "-y", "50", "-s", "cli", command]);
  }

  /** Types `text` and Enter. */
  type(text: string): void {
    this.#tmux(["send-keys", "-t", "cli", "-l", text]);
    this.#tmux(["send-keys", "-t", "cli", "Enter"]);
  }

  screen(): string {
    return this.#tmux(["capture-pane", "-p", "-t", "cli", "-S", "-200"]);
  }

  /** Waits until the screen holds `text`; answers the screen. */
  until(text: string | RegExp, timeoutMs = 30_000): Promise<string> {
    return waitUntil(() => {
      const screen = this.screen();
      return (typeof text === "string" ? screen.includes(text) : text.test(screen)) ? screen : null;
    }, { timeoutMs, intervalMs: 100, message: `the terminal to show ${text}` }).catch((error) => {
      throw new Error(`${(error as Error).message}\n--- screen:\n${this.screen()}`);
    });
  }

  /** The exit status once the command ended. */
  async exitCode(timeoutMs = 60_000): Promise<number> {
    const screen = await this.until(/\[exit \d+\]/, timeoutMs);
    return Number(/\[exit (\d+)\]/.exec(screen)![1]);
  }

  close(): void {
    spawnSync("tmux", ["-L", this.#socket, "kill-server"]);
  }
}
