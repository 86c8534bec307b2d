/**
 * Control processes for tests: each a real control process (the command `npm start` runs, on the
 * control plane's build of control/main.ts) with its own environment,
 * its output kept, and a registry so a file's afterAll can kill whatever a failed test left.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { controlCommand, ensureControlBuild } from "../scripts/build-control.ts";
import { freePort } from "./ports.ts";
import { TEST_REDIS_URL, testSecrets } from "./stores.ts";
import { type WaitOptions, waitUntil } from "./wait.ts";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Spawned {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  exited: Promise<Exit>;
  /** Whether the process is still running. */
  alive(): boolean;
  /** Sends a signal and waits for the exit. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<Exit>;
}

const running = new Set<ChildProcess>();

/** The parent's environment without any OCTOPROX_* variable, so a test sets each it means. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OCTOPROX_")) env[key] = value;
  }
  return env;
}

/** Runs a TypeScript entry of the project under Node (through tsx), as `npm` scripts do. */
export function spawnScript(
  entry: string,
  env: Record<string, string | undefined>,
  args: string[] = [],
): Spawned {
  return spawnCommand(process.execPath, ["--import", "tsx", entry, ...args], env);
}

/**
 * Runs any program from the checkout's root (a gateway under Deno, say) with the parent's
 * environment minus its OCTOPROX_* variables, plus `env`; kept in the registry killAll empties.
 */
export function spawnCommand(
  command: string,
  args: readonly string[],
  env: Record<string, string | undefined>,
): Spawned {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...cleanEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  const stdout: string[] = [];
  const stderr: string[] = [];
  const collect = (into: string[]) => {
    let partial = "";
    return (chunk: Buffer) => {
      const lines = (partial + chunk.toString("utf8")).split("\n");
      partial = lines.pop() ?? "";
      into.push(...lines);
    };
  };
  child.stdout!.on("data", collect(stdout));
  child.stderr!.on("data", collect(stderr));
  const exited = new Promise<Exit>((resolve) => {
    child.once("exit", (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    });
  });
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    child,
    stdout,
    stderr,
    exited,
    alive,
    async stop(signal = "SIGTERM", timeoutMs = 20_000) {
      if (alive()) child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Kills every process a test started and did not stop. */
export async function killAll(): Promise<void> {
  const exits = [...running].map((child) =>
    new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGKILL");
    })
  );
  await Promise.all(exits);
}

export interface ControlEnvOptions {
  databaseUrl: string;
  redisUrl?: string;
  prefix: string;
  role: string;
  port: number;
  instance?: string;
  extra?: Record<string, string | undefined>;
}

/** A complete, valid environment for a control process on the test bed. */
export function controlEnv(options: ControlEnvOptions): Record<string, string | undefined> {
  const secrets = testSecrets();
  return {
    OCTOPROX_DATABASE_URL: options.databaseUrl,
    OCTOPROX_REDIS_URL: options.redisUrl ?? TEST_REDIS_URL,
    OCTOPROX_REDIS_PREFIX: options.prefix,
    OCTOPROX_ROLE: options.role,
    OCTOPROX_API_HOST: "127.0.0.1",
    OCTOPROX_API_PORT: String(options.port),
    OCTOPROX_INTERNAL_SECRET: secrets.internal,
    OCTOPROX_JWT_SECRET: secrets.jwt,
    OCTOPROX_HEARTBEAT_INTERVAL: "0.2",
    OCTOPROX_INSTANCE_ID: options.instance,
    OCTOPROX_LOG_LEVEL: "info",
    ...options.extra,
  };
}

export interface ControlProcess extends Spawned {
  port: number;
  url: string;
}

export async function startControl(
  options: Omit<ControlEnvOptions, "port"> & { port?: number },
): Promise<ControlProcess> {
  const port = options.port ?? await freePort();
  // Current already after the suite's setup; a bench calling this builds it once.
  await ensureControlBuild("main");
  const [command, ...args] = controlCommand();
  const spawned = spawnCommand(command, args, controlEnv({ ...options, port }));
  return { ...spawned, port, url: `http://127.0.0.1:${port}` };
}

/** The status of GET /ready, or undefined while nothing answers. */
export async function readyStatus(url: string): Promise<number | undefined> {
  try {
    const response = await fetch(`${url}/ready`, { signal: AbortSignal.timeout(2000) });
    await response.body?.cancel();
    return response.status;
  } catch {
    return undefined;
  }
}

/**
 * Waits for a condition while a process runs: fails at once, with its output, if it exits
 * first (waitUntil alone would take a throw for "not yet" and wait out its deadline).
 */
export async function waitWhileRunning<T>(
  spawned: Spawned,
  check: () => T | Promise<T>,
  options: WaitOptions = {},
): Promise<NonNullable<T>> {
  const died = spawned.exited.then((exit): never => {
    throw new Error(
      `process exited (${exit.code ?? exit.signal}) before ${
        options.message ?? "the condition"
      }:\n` +
        `${spawned.stderr.join("\n")}\n${spawned.stdout.slice(-20).join("\n")}`,
    );
  });
  return await Promise.race([waitUntil(check, options), died]);
}

/** Waits until /ready answers `status`; fails early, with the output, if the process dies. */
export async function waitForReady(
  control: ControlProcess,
  status = 200,
  timeoutMs = 30_000,
): Promise<void> {
  await waitWhileRunning(control, async () => (await readyStatus(control.url)) === status, {
    timeoutMs,
    intervalMs: 100,
    message: `/ready to answer ${status} on ${control.url}`,
  });
}
