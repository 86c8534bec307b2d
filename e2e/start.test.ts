/**
 * `npm start` from a clean data folder: it starts its own Postgres and Redis, the control
 * process reaches /ready, the first admin can log in with the password kept in secrets.json,
 * the install's own TLS interception CA is made in the folder (its key 0600) and answered by the
 * api, and Ctrl-C (SIGINT) stops everything. A second start finds it all again, the same CA.
 * Then `npm run ca:rotate -- --overlap-days 7` rotates the CA in the data folder, and a third
 * start hands out both (its banner says until when, the api's download is the bundle) while its
 * gateway signs with the previous one.
 */
import { execFile } from "node:child_process";
import { chmod, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalPostgres } from "../scripts/local-stores.ts";
import { freePort } from "../testkit/ports.ts";
import { waitUntil } from "../testkit/wait.ts";
import { killAll, readyStatus, spawnScript, waitWhileRunning } from "../testkit/processes.ts";

const run = promisify(execFile);

let dataDir: string;
let ports: { api: number; postgres: number; redis: number };
const started: Array<ReturnType<typeof spawnScript>> = [];

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

function startScript() {
  const start = spawnScript("scripts/start.ts", {
    OCTOPROX_DATA_DIR: dataDir,
    OCTOPROX_API_HOST: "127.0.0.1",
    OCTOPROX_API_PORT: String(ports.api),
    OCTOPROX_LOCAL_POSTGRES_PORT: String(ports.postgres),
    OCTOPROX_LOCAL_REDIS_PORT: String(ports.redis),
  });
  started.push(start);
  return start;
}

async function login(password: string): Promise<Response> {
  return await fetch(`http://127.0.0.1:${ports.api}/api/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: "admin", password }),
  });
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "octoprox-start-"));
  // As root the local Postgres runs as the postgres user, which must reach the folder.
  await chmod(dataDir, 0o755);
  ports = {
    api: await freePort(),
    postgres: await freePort(),
    redis: await freePort(),
  };
});

afterAll(async () => {
  // A start script left running stops its children and stores itself; killing it would not.
  for (const start of started) await start.stop("SIGINT", 60_000);
  await killAll();
  // Whatever a failed test left running: the cluster, the Redis server.
  await new LocalPostgres({ dir: join(dataDir, "postgres"), port: ports.postgres }).stop()
    .catch(() => {});
  await run("redis-cli", ["-p", String(ports.redis), "shutdown", "nosave"]).catch(() => {});
  await rm(dataDir, { recursive: true, force: true });
});

/** The banner's last line: once it is out, every line of the banner is (they may come in parts). */
const BANNER_END = /^\s+Stop\s+Ctrl-C$/;

describe("npm start", () => {
  it("brings up a single instance from nothing and stops it all on Ctrl-C", async () => {
    const start = startScript();
    await waitWhileRunning(
      start,
      async () => (await readyStatus(`http://127.0.0.1:${ports.api}`)) === 200,
      { timeoutMs: 150_000, intervalMs: 250, message: "/ready after npm start" },
    );

    const secrets = JSON.parse(await readFile(join(dataDir, "secrets.json"), "utf8")) as {
      internal_secret: string;
      jwt_secret: string;
      admin_password: string;
    };
    expect(secrets.internal_secret).toMatch(/^[0-9a-f]{64}$/);
    expect(secrets.jwt_secret).toMatch(/^[0-9a-f]{64}$/);
    expect((await stat(join(dataDir, "secrets.json"))).mode & 0o777).toBe(0o600);
    const local = JSON.parse(await readFile(join(dataDir, "local.json"), "utf8"));
    expect(local).toMatchObject({
      postgres: { port: ports.postgres },
      redis: { port: ports.redis },
    });

    // The banner comes once the process is ready; it names the address and, this first
    // time, the admin's password.
    await waitUntil(() => start.stdout.some((line) => BANNER_END.test(line)), {
      message: "the whole banner",
    });
    const output = start.stdout.join("\n");
    expect(output).toContain(`http://127.0.0.1:${ports.api}/`);
    expect(output).toContain(`admin / ${secrets.admin_password}`);
    // It names the dashboard, and says where health checks go and how to point them here.
    expect(output).toContain(`Dashboard           http://127.0.0.1:${ports.api}/`);
    expect(output).toContain(
      "Health checks       ask https://httpbin.org/ip through each proxy " +
        "(no OCTOPROX_PUBLIC_URL or OCTOPROX_ECHO_URL set: the public echo)",
    );
    expect(output).toContain(
      `set OCTOPROX_PUBLIC_URL=http://<an address of this machine the proxies reach>:${ports.api}`,
    );

    // The dashboard is served, built by npm start when it was missing or stale.
    const home = await fetch(`http://127.0.0.1:${ports.api}/`);
    expect(home.status).toBe(200);
    expect(await home.text()).toContain('<div id="app"></div>');

    const response = await login(secrets.admin_password);
    expect(response.status).toBe(200);
    const { access_token: token } = await response.json() as { access_token: string };

    // The install's own CA, made in the data folder; the api answers its certificate.
    const caPem = await readFile(join(dataDir, "tls", "mitm-ca.pem"), "utf8");
    expect(caPem).toMatch(/^-----BEGIN CERTIFICATE-----\n/);
    expect((await stat(join(dataDir, "tls", "mitm-ca-key.pem"))).mode & 0o777).toBe(0o600);
    expect(output).toContain(`TLS interception CA ${join(dataDir, "tls", "mitm-ca.pem")}`);
    const answered = await fetch(`http://127.0.0.1:${ports.api}/api/v1/projects/ca-certificate`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(answered.status).toBe(200);
    expect(await answered.text()).toBe(caPem);
    const spki = answered.headers.get("x-octoprox-ca-spki-sha256");
    expect(output).toContain(`SPKI SHA-256 ${spki}`);

    const exit = await start.stop("SIGINT", 60_000);
    expect(exit.code).toBe(0);
    for (const port of Object.values(ports)) expect(await listening(port)).toBe(false);

    // A second start finds the cluster, the secrets and the admin, and shows no password.
    const again = startScript();
    await waitWhileRunning(
      again,
      async () => (await readyStatus(`http://127.0.0.1:${ports.api}`)) === 200,
      { timeoutMs: 60_000, intervalMs: 250, message: "/ready after a second npm start" },
    );
    await waitUntil(() => again.stdout.some((line) => BANNER_END.test(line)), {
      message: "the whole banner",
    });
    expect(again.stdout.join("\n")).not.toContain(secrets.admin_password);
    expect((await login(secrets.admin_password)).status).toBe(200);
    // The same CA: clients that trust it keep trusting the install.
    expect(await readFile(join(dataDir, "tls", "mitm-ca.pem"), "utf8")).toBe(caPem);
    expect(again.stdout.join("\n")).not.toContain("(made now");

    expect((await again.stop("SIGTERM", 60_000)).code).toBe(0);
    for (const port of Object.values(ports)) expect(await listening(port)).toBe(false);

    // A rotation, as an operator runs it between two starts.
    const rotate = spawnScript("scripts/ca.ts", { OCTOPROX_DATA_DIR: dataDir }, [
      "rotate",
      "--overlap-days",
      "7",
    ]);
    expect((await rotate.exited).code).toBe(0);
    const previousPath = join(dataDir, "tls", "mitm-ca.previous.pem");
    expect(await readFile(previousPath, "utf8")).toBe(caPem);
    const newPem = await readFile(join(dataDir, "tls", "mitm-ca.pem"), "utf8");
    const { overlap_until: until } = JSON.parse(
      await readFile(join(dataDir, "tls", "rotation.json"), "utf8"),
    ) as { overlap_until: string };

    const third = startScript();
    await waitWhileRunning(
      third,
      async () => (await readyStatus(`http://127.0.0.1:${ports.api}`)) === 200,
      { timeoutMs: 60_000, intervalMs: 250, message: "/ready after a rotation" },
    );
    await waitUntil(() => third.stdout.some((line) => BANNER_END.test(line)), {
      message: "the whole banner",
    });
    const banner = third.stdout.join("\n");
    expect(banner).toContain(
      `rotated: the previous CA (${previousPath}) is handed out too, and signed with, until ${until}`,
    );
    // The gateway signs with the previous CA, the api hands out both.
    expect(banner).toMatch(/"msg":"TLS interception CA loaded".*"signing":"previous"/);
    const token2 = await (await login(secrets.admin_password)).json() as { access_token: string };
    const bundle = await fetch(`http://127.0.0.1:${ports.api}/api/v1/projects/ca-certificate`, {
      headers: { authorization: `Bearer ${token2.access_token}` },
    });
    expect(await bundle.text()).toBe(newPem + caPem);
    expect(bundle.headers.get("x-octoprox-ca-spki-sha256")).toBe(
      `${third.stdout.join("\n").match(/SPKI SHA-256 (\S+)/)![1]},${spki}`,
    );
    expect((await third.stop("SIGTERM", 60_000)).code).toBe(0);
  }, 300_000);
});
