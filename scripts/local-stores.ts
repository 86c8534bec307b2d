/**
 * Private Postgres and Redis servers in a folder of ours, from Debian's binaries. `npm start`
 * uses them when no store is configured; outage tests use them so that stopping or flushing a
 * store never disturbs another test. Installs Debian's packages when they are missing and we are
 * root; otherwise says plainly what to install.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdir, readFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0;

export function findFreePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolvePort(address.port);
        else reject(new Error("No port assigned"));
      });
    });
  });
}

export function postgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length > 0 ? join(root, versions[0], "bin") : undefined;
}

export function redisServerBin(): string | undefined {
  for (const candidate of ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]) {
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Makes sure Debian's postgresql and redis-server are installed, installing them as root. */
export async function ensureStorePackages(
  needs: { postgres: boolean; redis: boolean },
  log: (line: string) => void = console.log,
): Promise<void> {
  const missing: string[] = [];
  if (needs.postgres && !postgresBinDir()) missing.push("postgresql");
  if (needs.redis && !redisServerBin()) missing.push("redis-server");
  if (missing.length === 0) return;
  if (!isRoot()) {
    throw new Error(
      `Octoprox needs ${missing.join(" and ")} to run its own stores. Install them with ` +
        `\`sudo apt-get install -y ${missing.join(" ")}\`, or set OCTOPROX_DATABASE_URL and ` +
        "OCTOPROX_REDIS_URL to stores you run.",
    );
  }
  log(`Installing ${missing.join(" and ")} from Debian's packages…`);
  await run("apt-get", ["update", "-qq"], { maxBuffer: 64 << 20 });
  await run("apt-get", ["install", "-y", "-qq", ...missing], {
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    maxBuffer: 64 << 20,
  });
}

async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not come up within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ---------------------------------------------------------------------------------------------

export interface LocalPostgresOptions {
  dir: string;
  port: number;
}

/**
 * A Postgres cluster in `dir`, trust auth on 127.0.0.1 and a socket in the folder. Postgres
 * refuses to run as root, so as root it runs as the `postgres` user, which owns the folder.
 */
export class LocalPostgres {
  readonly dir: string;
  readonly port: number;
  readonly #bin: string;

  constructor(options: LocalPostgresOptions) {
    this.dir = resolve(options.dir);
    this.port = options.port;
    const bin = postgresBinDir();
    if (!bin) throw new Error("Postgres binaries not found under /usr/lib/postgresql");
    this.#bin = bin;
  }

  url(database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async #pg(tool: string, args: string[]): Promise<string> {
    const command = join(this.#bin, tool);
    const { stdout } = isRoot()
      ? await run("runuser", ["-u", "postgres", "--", command, ...args], { cwd: "/" })
      : await run(command, args);
    return stdout;
  }

  async start(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    if (isRoot()) await chown(this.dir, ...(await postgresIds()));
    if (!existsSync(join(this.dir, "PG_VERSION"))) {
      await this.#pg("initdb", ["-D", this.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8"]);
    }
    if (await this.running()) return;
    await this.#pg("pg_ctl", [
      "-D",
      this.dir,
      "-l",
      join(this.dir, "server.log"),
      "-w",
      "-t",
      "60",
      "-o",
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off`,
      "start",
    ]);
  }

  async running(): Promise<boolean> {
    try {
      await this.#pg("pg_ctl", ["-D", this.dir, "status"]);
      return true;
    } catch {
      return false;
    }
  }

  async stop(): Promise<void> {
    if (!(await this.running())) return;
    await this.#pg("pg_ctl", ["-D", this.dir, "-m", "fast", "-w", "stop"]).catch(() => {});
  }

  async createDatabase(name: string): Promise<void> {
    if (!/^[a-z0-9_]+$/.test(name)) throw new Error(`Unsafe database name ${name}`);
    const psql = join(this.#bin, "psql");
    const args = ["-h", "127.0.0.1", "-p", String(this.port), "-U", "postgres", "-tAc"];
    const { stdout } = await run(psql, [
      ...args,
      `select 1 from pg_database where datname='${name}'`,
    ]);
    if (stdout.trim() !== "1") await run(psql, [...args, `create database ${name}`]);
  }
}

async function postgresIds(): Promise<[number, number]> {
  const passwd = await readFile("/etc/passwd", "utf8");
  const line = passwd.split("\n").find((l) => l.startsWith("postgres:"));
  if (!line) throw new Error("No postgres user: install Debian's postgresql package");
  const [, , uid, gid] = line.split(":");
  return [Number(uid), Number(gid)];
}

// ---------------------------------------------------------------------------------------------

export interface LocalRedisOptions {
  dir: string;
  port: number;
  /** Keep data across restarts (append-only file); tests keep nothing. */
  persist?: boolean;
  /**
   * Run in a process group of its own, so a Ctrl-C in the terminal reaches only its owner,
   * which stops it after the processes that use it (`npm start`).
   */
  detached?: boolean;
  /** A password clients must give (`requirepass`); none unless said. */
  password?: string;
}

/** A redis-server child process on 127.0.0.1. */
export class LocalRedis {
  readonly dir: string;
  readonly port: number;
  readonly persist: boolean;
  readonly detached: boolean;
  readonly password: string | undefined;
  #child: ChildProcess | undefined;

  constructor(options: LocalRedisOptions) {
    this.dir = resolve(options.dir);
    this.port = options.port;
    this.persist = options.persist ?? false;
    this.detached = options.detached ?? false;
    this.password = options.password;
  }

  get url(): string {
    const login = this.password === undefined ? "" : `:${encodeURIComponent(this.password)}@`;
    return `redis://${login}127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  async start(): Promise<void> {
    if (this.#child && this.#child.exitCode === null) return;
    const bin = redisServerBin();
    if (!bin) throw new Error("redis-server not found: install Debian's redis-server package");
    await mkdir(this.dir, { recursive: true });
    const args = [
      "--port",
      String(this.port),
      "--bind",
      "127.0.0.1",
      "--dir",
      this.dir,
      "--save",
      "",
      "--appendonly",
      this.persist ? "yes" : "no",
      "--daemonize",
      "no",
      "--logfile",
      join(this.dir, "redis.log"),
      ...(this.password === undefined ? [] : ["--requirepass", this.password]),
    ];
    const child = spawn(bin, args, { stdio: "ignore", detached: this.detached });
    this.#child = child;
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
        const login = this.password === undefined ? [] : ["-a", this.password, "--no-auth-warning"];
        const { stdout } = await run("redis-cli", ["-p", String(this.port), ...login, "ping"]);
        return stdout.trim() === "PONG";
      },
      15_000,
      "Redis",
    );
  }

  /** Stops the server; `kill` is a crash (SIGKILL), otherwise a clean shutdown. */
  async stop(options: { kill?: boolean } = {}): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    child.kill(options.kill ? "SIGKILL" : "SIGTERM");
    await exited;
    this.#child = undefined;
  }
}
