/**
 * The real gateway entry (gateway/main.ts under Deno, with the permissions the unit and the
 * build use) on a feed the real publisher writes into Redis: unready with the proxy port closed
 * until the first feed, then HTTP and CONNECT through two tinyproxy upstreams in turn, 407 for a
 * wrong password, 403 for a destination outside the allowed CIDRs, and a clean stop.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type FeedBed, feedBed, feedProject, publishFeedContent } from "../../testkit/feed.ts";
import { DENO_BIN, gatewayRunArgs } from "../../scripts/gateway-command.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { gatewayEnv } from "../../testkit/gateway/fixture-gateway.ts";
import { ROOT } from "../../testkit/processes.ts";
import { connector } from "../../testkit/gateway/feed-fixtures.ts";
import { spawn } from "node:child_process";

let bed: FeedBed;
let origin: Origin;
let tinyproxies: Tinyproxy[];
let child: ChildProcess;
let stdout = "";
let proxyPort: number;
let statusPort: number;

beforeAll(async () => {
  [bed, origin, ...tinyproxies] = await Promise.all([
    feedBed(),
    startOrigin(),
    startTinyproxy({ bindAddress: "127.0.0.11" }),
    startTinyproxy({ bindAddress: "127.0.0.12" }),
  ]);
  await bed.lead();
  [proxyPort, statusPort] = [await freePort(), await freePort()];
  // The command `npm start` and the build use, permissions included.
  // gatewayEnv gives it the test process's TLS interception CA, which it loads first.
  const env = gatewayEnv({
    OCTOPROX_REDIS_URL: process.env.OCTOPROX_TEST_REDIS_URL ?? "redis://127.0.0.1:6379",
    OCTOPROX_REDIS_PREFIX: bed.prefix,
    OCTOPROX_INTERNAL_SECRET: bed.secret,
    OCTOPROX_PROXY_PORT: String(proxyPort),
    OCTOPROX_GATEWAY_STATUS_PORT: String(statusPort),
    OCTOPROX_DESTINATION_ALLOW_CIDRS: "127.0.0.0/8",
  });
  child = spawn(DENO_BIN, gatewayRunArgs(env), {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (stdout += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stdout += text));
  await waitUntil(() => stdout.includes('"Status listener bound"'), {
    timeoutMs: 20_000,
    message: "the gateway's status listener",
  });
});

afterAll(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
  await bed?.close();
});

async function publish(): Promise<void> {
  const project = await feedProject(bed, { id: "p1", username: "acme", password: "acme-pass" });
  const content: Record<string, unknown> = {
    global: { schema: SCHEMA_VERSION, default_strategy: "round_robin", projects: [project] },
    runtime: { schema: SCHEMA_VERSION, quarantines: [], traffic_blocks: [], project_blocks: [] },
    "connector:c1": {
      schema: SCHEMA_VERSION,
      connector: connector("c1", { name: "static" }),
      proxies: tinyproxies.map((tinyproxy, index) => ({
        id: `x${index}`,
        scheme: "http",
        host: tinyproxy.host,
        port: tinyproxy.port,
        username: null,
        password: null,
        country: null,
        status: "healthy",
        max_concurrency: null,
      })),
    },
  };
  await publishFeedContent(bed, Object.entries(content));
}

describe("gateway/main.ts", () => {
  it("stays unready with the proxy port closed until the first feed", async () => {
    const ready = await fetch(`http://127.0.0.1:${statusPort}/ready`);
    expect(ready.status).toBe(503);
    // The start says who resolves destination names: the upstream, unless set otherwise.
    await waitUntil(() => stdout.includes('"destination_resolution":"upstream"'), {
      timeoutMs: 5_000,
      message: "the line saying who resolves destination names",
    });
    expect(await portAccepts("127.0.0.1", proxyPort)).toBe(false);
    await publish();
    await waitUntil(
      async () => (await fetch(`http://127.0.0.1:${statusPort}/ready`)).status === 200,
      { timeoutMs: 10_000, message: "the gateway to be ready" },
    );
    expect(await portAccepts("127.0.0.1", proxyPort)).toBe(true);
  });

  it("routes HTTP and CONNECT through both upstreams, refuses what it must", async () => {
    const proxy = `http://acme:acme-pass@127.0.0.1:${proxyPort}`;
    const exits = new Set<string>();
    for (let round = 0; round < 4; round++) {
      const result = await curl(["-x", proxy, `${origin.url}/ip`]);
      expect(result.stderr).toBe("");
      exits.add((JSON.parse(result.stdout) as { ip: string }).ip);
    }
    expect([...exits].sort()).toEqual(["127.0.0.11", "127.0.0.12"]);
    const tunnel = await curl(["-x", proxy, "-p", `${origin.url}/ip`]);
    expect(tunnel.stdout).toMatch(/"ip":"127\.0\.0\.1[12]"/);

    const wrong = await curl([
      "-x",
      `http://acme:nope@127.0.0.1:${proxyPort}`,
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      `${origin.url}/ip`,
    ]);
    expect(wrong.stdout).toBe("407");
    const denied = await curl(["-x", proxy, "-i", "http://169.254.169.254/latest/meta-data/"]);
    expect(denied.stdout).toMatch(/^HTTP\/1\.1 403 /);
    expect(denied.stdout).toMatch(/Proxy-Status: octoprox; error=destination_ip_prohibited/);
  });

  it("stops on SIGTERM with exit code 0", async () => {
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(stdout).toContain('"msg":"Stopped"');
    expect(stdout).not.toMatch(/acme-pass|"level":"(error|fatal)"/);
  });
});
