/**
 * `npm start`: a whole single instance from a clone. Local Postgres and Redis in the data folder
 * when no store is configured, the secrets generated once and kept there, then the control
 * process (role `all`) as a child, its output forwarded, and a banner with the address, the
 * first admin's login and where health checks go once it is ready. Ctrl-C stops the children,
 * then the local stores (their data kept). A child that dies stops everything, and the script
 * exits non-zero.
 *
 * The TLS interception CA is made here too when the data folder holds none (tls/mitm-ca.pem and
 * its key, 0600), never shipped: an install's CA is its own. Pointing
 * OCTOPROX_TLS_MITM_CA_CERT_PATH and OCTOPROX_TLS_MITM_CA_KEY_PATH at an operator's files uses
 * those instead; either way the files are checked before anything starts.
 *
 * Settings: every OCTOPROX_* variable passes through to the children. Of its own, it reads
 * OCTOPROX_DATA_DIR (default ./data), OCTOPROX_LOCAL_POSTGRES_PORT and
 * OCTOPROX_LOCAL_REDIS_PORT (the local stores' ports, otherwise chosen once and remembered).
 * The dashboard (dist/web) and the control plane (dist/control, scripts/build-control.ts) are
 * built first when missing or older than their sources.
 *
 * Health checks are left to the settings (the public echo unless OCTOPROX_PUBLIC_URL or
 * OCTOPROX_ECHO_URL says otherwise), never this machine's loopback: the proxies may run on other
 * machines, where 127.0.0.1 is their own. The banner says which echo they ask.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join, relative, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { errorText } from "../shared/errors.ts";
import { parseControlSettings, parseGatewaySettings, SettingsError } from "../shared/settings.ts";
import {
  EchoSource,
  type HealthEcho,
  healthEcho,
  healthEchoReason,
  LOOPBACK_NOTE,
} from "../control/jobs/health-echo.ts";
import { DENO_BIN, DENO_ENV, gatewayRunArgs } from "./gateway-command.ts";
import { ensureWebBuild } from "./build-web.ts";
import { controlCommand, ensureControlBuild } from "./build-control.ts";
import { ensureStorePackages, findFreePort, LocalPostgres, LocalRedis } from "./local-stores.ts";
import {
  CaFilesError,
  ensureCaFiles,
  readRotationRecord,
  type RotationRecord,
} from "./mitm-ca-files.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const PREFERRED_PORTS = { postgres: 54329, redis: 63799 } as const;
const DATABASE_NAME = "octoprox";
/** How long a child may take to stop before it is killed: its own grace, and some. */
const CHILD_STOP_MARGIN_MS = 15_000;
/** The gateway closes its listeners and waits for its connections' handlers, boundedly. */
const GATEWAY_STOP_TIMEOUT_MS = 30_000;
const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0;
const run = promisify(execFile);

// ---------------------------------------------------------------------------------------------
// The data folder: secrets.json (0600) and local.json (the local stores' ports and folders).

interface Secrets {
  internal_secret?: string;
  jwt_secret?: string;
  admin_password?: string;
}

interface LocalStores {
  postgres?: { port: number; dir: string };
  redis?: { port: number };
}

async function readJson<T>(path: string): Promise<T | undefined> {
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch (error) {
    throw new Error(`${path} is not valid JSON (${errorText(error)}); fix or remove it`);
  }
}

async function writeJson(path: string, value: unknown, mode = 0o644): Promise<void> {
  await writeFile(path, `${JSON.stringify(value, null, 2)}\n`, { mode });
  await chmod(path, mode);
}

const randomHex = (bytes = 32) => randomBytes(bytes).toString("hex");

function envValue(name: string): string | undefined {
  const value = process.env[name]?.trim();
  return value === "" ? undefined : value;
}

function portFromEnv(name: string): number | undefined {
  const value = envValue(name);
  if (value === undefined) return undefined;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    fail(`${name} must be a port number from 1 to 65535`, 2);
  }
  return port;
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.once("error", () => resolvePort(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolvePort(true)));
  });
}

async function choosePort(preferred: number): Promise<number> {
  return (await portIsFree(preferred)) ? preferred : await findFreePort();
}

// ---------------------------------------------------------------------------------------------
// Output

function fail(message: string, code = 1): never {
  process.stderr.write(`octoprox: ${message}\n`);
  process.exit(code);
}

const say = (line: string) => process.stdout.write(`${line}\n`);

const LEVEL_WIDTH = 5;

/** A child's JSON log line as one short line for a person at a terminal. */
function renderLogLine(name: string, line: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  if (typeof record !== "object" || record === null || typeof record.msg !== "string") return line;
  const { time, level, msg, instance: _i, role: _r, pid: _p, ...rest } = record;
  const clock = typeof time === "string" ? time.slice(11, 19) : "";
  const fields = Object.entries(rest).map(([key, value]) =>
    `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`
  );
  const label = String(level ?? "").padEnd(LEVEL_WIDTH);
  return `${clock} ${label} ${name}: ${msg}${fields.length ? `  ${fields.join(" ")}` : ""}`;
}

// ---------------------------------------------------------------------------------------------
// Children: the processes of a single instance, started in order and stopped in reverse.

interface ChildSpec {
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** Answers 200 once the child serves. */
  readyUrl: string;
  stopTimeoutMs: number;
}

interface RunningChild {
  spec: ChildSpec;
  process: ChildProcess;
  exited: Promise<number>;
}

function startChild(spec: ChildSpec, onExit: (child: RunningChild, code: number) => void) {
  // A process group of its own: a Ctrl-C reaches this script only, which stops the children
  // once each, in order, rather than every process at the same moment.
  const child = spawn(spec.command, spec.args, {
    cwd: ROOT,
    env: spec.env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const pretty = process.stdout.isTTY === true;
  createInterface({ input: child.stdout! }).on("line", (line) => {
    say(pretty ? renderLogLine(spec.name, line) : line);
  });
  createInterface({ input: child.stderr! }).on("line", (line) => {
    process.stderr.write(`${line}\n`);
  });
  const running: RunningChild = {
    spec,
    process: child,
    exited: new Promise((resolveExit) => {
      child.once("exit", (code, signal) => {
        const exitCode = code ?? (signal ? 128 : 1);
        resolveExit(exitCode);
        onExit(running, exitCode);
      });
    }),
  };
  return running;
}

async function stopChild(child: RunningChild): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill("SIGTERM");
  const timer = setTimeout(() => child.process.kill("SIGKILL"), child.spec.stopTimeoutMs);
  await child.exited;
  clearTimeout(timer);
}

async function waitReady(child: RunningChild): Promise<boolean> {
  const startedAt = Date.now();
  let told = false;
  for (;;) {
    if (child.process.exitCode !== null || child.process.signalCode !== null) return false;
    try {
      const response = await fetch(child.spec.readyUrl, { signal: AbortSignal.timeout(2000) });
      if (response.ok) return true;
      if (!told && Date.now() - startedAt > 60_000) {
        told = true;
        say(`${child.spec.name} is not ready yet: ${await response.text()}`);
      }
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

// ---------------------------------------------------------------------------------------------

const dataDir = resolve(envValue("OCTOPROX_DATA_DIR") ?? join(ROOT, "data"));
const shown = (path: string) => {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith("..") ? rel : path;
};

let stopRequested = false;
let stopping: Promise<void> | undefined;
let postgres: LocalPostgres | undefined;
let redis: LocalRedis | undefined;
const children: RunningChild[] = [];

function stopEverything(code: number): Promise<void> {
  stopping ??= (async () => {
    for (const child of [...children].reverse()) {
      await stopChild(child).catch(() => {});
    }
    await redis?.stop().catch(() => {});
    await postgres?.stop().catch(() => {});
    process.exit(code);
  })();
  return stopping;
}

function onSignal(): void {
  if (stopRequested) {
    // A second signal: stop the children at once; the stores still stop cleanly.
    for (const child of children) child.process.kill("SIGKILL");
    return;
  }
  stopRequested = true;
  say("Stopping Octoprox…");
  // Before the children run, the start itself notices the request at its next step.
  if (children.length > 0) void stopEverything(0);
}

/** Between start steps: a stop asked for during one ends the start there. */
async function checkpoint(): Promise<void> {
  if (stopRequested) await stopEverything(0);
}

for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, onSignal);
// Last resort if this script dies: its children are in groups of their own.
process.on("exit", () => {
  for (const child of children) {
    if (child.process.exitCode === null) child.process.kill("SIGKILL");
  }
});

/** Where the Postgres cluster lives: in the data folder, if the postgres user can reach it. */
async function postgresDir(remembered: string | undefined): Promise<string> {
  if (remembered) return remembered;
  const inData = join(dataDir, "postgres");
  if (!isRoot()) return inData;
  // As root, Postgres runs as the postgres user, which may not reach a folder under /root.
  const reachable = await run("runuser", ["-u", "postgres", "--", "test", "-x", dataDir]).then(
    () => true,
    () => false,
  );
  if (reachable) return inData;
  const digest = createHash("sha256").update(dataDir).digest("hex").slice(0, 12);
  const elsewhere = join("/var/lib/octoprox", digest, "postgres");
  say(`The postgres user cannot reach ${dataDir}; the local Postgres lives in ${elsewhere}.`);
  return elsewhere;
}

/** A start step that failed in a way the person at the terminal can act on. */
class StartError extends Error {}

interface MitmCaFiles {
  certPath: string;
  keyPath: string;
  /** Whether this start made it (the banner says so: clients must trust the new CA). */
  created: boolean;
  spkiSha256: string;
  /**
   * After `npm run ca:rotate` (its record beside the certificate, unless the operator set the
   * previous CA's settings): the previous CA's files and the overlap's end.
   */
  rotation?: RotationRecord;
}

/**
 * The TLS interception CA: the operator's files when both paths are set, else the data folder's,
 * made when absent (scripts/mitm-ca-files.ts). A certificate without its key is never replaced
 * silently: the clients that trust it would stop trusting the install, so the person at the
 * terminal decides. The operator's files are never made here.
 */
async function ensureMitmCa(): Promise<MitmCaFiles> {
  const ownCert = envValue("OCTOPROX_TLS_MITM_CA_CERT_PATH");
  const ownKey = envValue("OCTOPROX_TLS_MITM_CA_KEY_PATH");
  if ((ownCert === undefined) !== (ownKey === undefined)) {
    throw new StartError(
      "OCTOPROX_TLS_MITM_CA_CERT_PATH and OCTOPROX_TLS_MITM_CA_KEY_PATH must be set together",
    );
  }
  const certPath = resolve(ownCert ?? join(dataDir, "tls", "mitm-ca.pem"));
  const keyPath = resolve(ownKey ?? join(dataDir, "tls", "mitm-ca-key.pem"));
  try {
    const ensured = await ensureCaFiles({ certPath, keyPath }, {
      create: ownCert === undefined,
      shown,
    });
    const rotation = envValue("OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH") === undefined
      ? await readRotationRecord(certPath)
      : undefined;
    return {
      certPath,
      keyPath,
      created: ensured.created,
      spkiSha256: ensured.ca.spkiSha256,
      ...(rotation === undefined ? {} : { rotation }),
    };
  } catch (error) {
    if (error instanceof CaFilesError) throw new StartError(error.message);
    throw error;
  }
}

interface PortOverrides {
  postgres: number | undefined;
  redis: number | undefined;
}

async function startStores(
  local: LocalStores,
  ports: PortOverrides,
): Promise<{ databaseUrl: string; redisUrl: string }> {
  const configuredDatabase = envValue("OCTOPROX_DATABASE_URL");
  const configuredRedis = envValue("OCTOPROX_REDIS_URL");
  try {
    await ensureStorePackages(
      { postgres: configuredDatabase === undefined, redis: configuredRedis === undefined },
      say,
    );
  } catch (error) {
    throw new StartError(errorText(error));
  }
  let databaseUrl = configuredDatabase;
  if (databaseUrl === undefined) {
    const port = ports.postgres ?? local.postgres?.port ??
      await choosePort(PREFERRED_PORTS.postgres);
    const dir = await postgresDir(local.postgres?.dir);
    local.postgres = { port, dir };
    await writeJson(join(dataDir, "local.json"), local);
    if (!existsSync(join(dir, "PG_VERSION"))) say(`Creating a local Postgres in ${shown(dir)}…`);
    postgres = new LocalPostgres({ dir, port });
    try {
      await postgres.start();
      await postgres.createDatabase(DATABASE_NAME);
    } catch (error) {
      const log = join(dir, "server.log");
      throw new StartError(
        `the local Postgres did not start on 127.0.0.1:${port} (${errorText(error).trim()}); ` +
          `see ${shown(log)}`,
      );
    }
    databaseUrl = postgres.url(DATABASE_NAME);
  }
  await checkpoint();
  let redisUrl = configuredRedis;
  if (redisUrl === undefined) {
    const port = ports.redis ?? local.redis?.port ?? await choosePort(PREFERRED_PORTS.redis);
    local.redis = { port };
    await writeJson(join(dataDir, "local.json"), local);
    if (!(await portIsFree(port))) {
      throw new StartError(
        `port ${port}, kept for the local Redis in ${shown(join(dataDir, "local.json"))}, is ` +
          "in use: is an earlier `npm start` still running? Stop it, or remove the redis entry " +
          "there to choose another port.",
      );
    }
    redis = new LocalRedis({ dir: join(dataDir, "redis"), port, persist: true, detached: true });
    await redis.start();
    redisUrl = redis.url;
  }
  return { databaseUrl, redisUrl };
}

async function main(): Promise<void> {
  // Check every setting before starting anything; the stores' URLs and the secrets are filled
  // in below, so placeholders stand in for them here.
  let apiPort: number;
  let adminUsername: string;
  let echo: HealthEcho;
  try {
    const settings = parseControlSettings({
      OCTOPROX_DATABASE_URL: "postgres://placeholder/octoprox",
      OCTOPROX_REDIS_URL: "redis://placeholder",
      OCTOPROX_INTERNAL_SECRET: "i".repeat(64),
      OCTOPROX_JWT_SECRET: "j".repeat(64),
      ...process.env,
      OCTOPROX_ROLE: "all",
    });
    apiPort = settings.apiPort;
    adminUsername = settings.adminUsername;
    echo = healthEcho(settings);
  } catch (error) {
    if (error instanceof SettingsError) fail(error.message, 2);
    throw error;
  }
  const ports: PortOverrides = {
    postgres: portFromEnv("OCTOPROX_LOCAL_POSTGRES_PORT"),
    redis: portFromEnv("OCTOPROX_LOCAL_REDIS_PORT"),
  };

  // The dashboard the api serves and the control process's own build, each made when missing
  // or older than its sources.
  try {
    if (await ensureWebBuild()) say("Dashboard built (dist/web).");
    if (await ensureControlBuild("main")) say("Control plane built (dist/control).");
  } catch (error) {
    fail(errorText(error), 1);
  }

  await mkdir(dataDir, { recursive: true });
  const secretsPath = join(dataDir, "secrets.json");
  const secrets = (await readJson<Secrets>(secretsPath)) ?? {};
  const local = (await readJson<LocalStores>(join(dataDir, "local.json"))) ?? {};

  const internalSecret = envValue("OCTOPROX_INTERNAL_SECRET") ??
    (secrets.internal_secret ??= randomHex());
  const jwtSecret = envValue("OCTOPROX_JWT_SECRET") ?? (secrets.jwt_secret ??= randomHex());
  const firstStart = secrets.admin_password === undefined;
  const adminPassword = envValue("OCTOPROX_ADMIN_PASSWORD") ??
    (secrets.admin_password ??= randomBytes(12).toString("base64url"));
  await writeJson(secretsPath, secrets, 0o600);
  const mitmCa = await ensureMitmCa();

  const stores = await startStores(local, ports);
  await checkpoint();

  const controlEnv: NodeJS.ProcessEnv = {
    ...process.env,
    OCTOPROX_ROLE: "all",
    OCTOPROX_DATA_DIR: dataDir,
    OCTOPROX_DATABASE_URL: stores.databaseUrl,
    OCTOPROX_REDIS_URL: stores.redisUrl,
    OCTOPROX_INTERNAL_SECRET: internalSecret,
    OCTOPROX_JWT_SECRET: jwtSecret,
    OCTOPROX_ADMIN_PASSWORD: adminPassword,
    // The api answers the certificate; the key goes to the gateway alone.
    OCTOPROX_TLS_MITM_CA_CERT_PATH: mitmCa.certPath,
    // After a rotation, the previous certificate too, handed out until the overlap ends.
    ...(mitmCa.rotation === undefined ? {} : {
      OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: mitmCa.rotation.previous_cert_path,
      OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: mitmCa.rotation.overlap_until,
    }),
  };
  const caEnv = {
    OCTOPROX_TLS_MITM_CA_CERT_PATH: mitmCa.certPath,
    OCTOPROX_TLS_MITM_CA_KEY_PATH: mitmCa.keyPath,
    // The gateway signs with the previous pair while the overlap lasts.
    ...(mitmCa.rotation === undefined ? {} : {
      OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: mitmCa.rotation.previous_cert_path,
      OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH: mitmCa.rotation.previous_key_path,
      OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: mitmCa.rotation.overlap_until,
    }),
  };
  const gatewaySettings = parseGatewaySettings({
    ...process.env,
    OCTOPROX_REDIS_URL: stores.redisUrl,
    OCTOPROX_INTERNAL_SECRET: internalSecret,
    ...caEnv,
  });
  const [controlProgram, ...controlArgs] = controlCommand();
  // One entry per process of the instance, in start order.
  const specs: ChildSpec[] = [
    {
      name: "control",
      command: controlProgram,
      args: controlArgs,
      env: controlEnv,
      readyUrl: `http://127.0.0.1:${apiPort}/ready`,
      stopTimeoutMs: parseControlSettings(controlEnv).stopGraceMs + CHILD_STOP_MARGIN_MS,
    },
    {
      // Ready once it applied its first feed, which the controller publishes at once.
      name: "gateway",
      command: DENO_BIN,
      // It may read the CA's two files (and its code), nothing else of the disk.
      args: gatewayRunArgs(caEnv),
      env: {
        ...process.env,
        ...DENO_ENV,
        OCTOPROX_REDIS_URL: stores.redisUrl,
        OCTOPROX_INTERNAL_SECRET: internalSecret,
        ...caEnv,
        // IP database files come from the api beside it, unless the caller says otherwise.
        OCTOPROX_GATEWAY_GEO_URL: process.env.OCTOPROX_GATEWAY_GEO_URL ||
          `http://127.0.0.1:${apiPort}`,
        // Preflight asks the echo the health checks ask (it too goes through the proxies),
        // unless the caller says otherwise.
        OCTOPROX_GATEWAY_ECHO_URL: process.env.OCTOPROX_GATEWAY_ECHO_URL ||
          echo.url,
      },
      readyUrl: `http://127.0.0.1:${gatewaySettings.statusPort}/ready`,
      stopTimeoutMs: GATEWAY_STOP_TIMEOUT_MS,
    },
  ];

  for (const spec of specs) {
    const child = startChild(spec, (exited, code) => {
      if (stopping) return;
      process.stderr.write(`octoprox: ${exited.spec.name} exited (code ${code}); stopping\n`);
      void stopEverything(code === 0 ? 1 : code);
    });
    children.push(child);
    if (!(await waitReady(child))) return; // its exit handler stops everything
    await checkpoint();
  }

  const url = `http://127.0.0.1:${apiPort}/`;
  const login = envValue("OCTOPROX_ADMIN_PASSWORD") !== undefined
    ? `${adminUsername} (password: the one in OCTOPROX_ADMIN_PASSWORD)`
    : firstStart
    ? `${adminUsername} / ${adminPassword}   (shown this once; kept in ${shown(secretsPath)})`
    : `${adminUsername} (password kept in ${shown(secretsPath)})`;
  say("");
  say("  Octoprox is running.");
  say(`    Dashboard           ${url}`);
  say(`    API                 ${url}api/v1`);
  say(
    `    Proxy (HTTP)        http://<project username>:<password>@127.0.0.1:${gatewaySettings.proxyPort}`,
  );
  if (gatewaySettings.socksEnabled) {
    say(
      `    Proxy (SOCKS5)      socks5h://<project username>:<password>@127.0.0.1:${gatewaySettings.socksPort}`,
    );
  }
  say(`    First admin         ${login}`);
  // Where the checks go decides whether any proxy on another machine can pass them.
  say(`    Health checks       ask ${echo.url} through each proxy (${healthEchoReason(echo)})`);
  if (echo.loopback) say(`                        ${LOOPBACK_NOTE}`);
  if (echo.source === EchoSource.publicEcho) {
    say(
      `                        to check against this install's /echo instead, set ` +
        `OCTOPROX_PUBLIC_URL=http://<an address of this machine the proxies reach>:${apiPort}`,
    );
  }
  say(
    `    TLS interception CA ${shown(mitmCa.certPath)}${
      mitmCa.created ? " (made now: clients trust it to let the gateway intercept)" : ""
    }`,
  );
  say(`                        also at ${url}api/v1/projects/ca-certificate`);
  say(`                        SPKI SHA-256 ${mitmCa.spkiSha256}`);
  if (mitmCa.rotation !== undefined) {
    const running = Date.parse(mitmCa.rotation.overlap_until) > Date.now();
    say(
      running
        ? `                        rotated: the previous CA (${
          shown(mitmCa.rotation.previous_cert_path)
        }) is handed out too, and signed with, until ${mitmCa.rotation.overlap_until}`
        : `                        rotated: the overlap with the previous CA ended ${mitmCa.rotation.overlap_until}`,
    );
  }
  say(`    Data                ${shown(dataDir)}`);
  say("    Stop                Ctrl-C");
  say("");
}

main().catch((error: unknown) => {
  const message = error instanceof StartError ? error.message : `start failed: ${errorText(error)}`;
  process.stderr.write(`octoprox: ${message}\n`);
  void stopEverything(1);
});
