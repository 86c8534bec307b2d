/**
 * A real HAProxy (Debian's) for tests: TCP mode on 127.0.0.1 at a free port, balancing round
 * robin over `servers` and sending each one a PROXY protocol header (`send-proxy-v2`, or
 * `send-proxy` for version 1) that names the client as HAProxy saw it. Its own config in a temp
 * dir, run in the foreground (`-db`), stopped with SIGTERM.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { access, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { constants } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../processes.ts";
import { freePort, portAccepts } from "../ports.ts";
import { waitUntil } from "../wait.ts";

/** The balancer example shipped for operators (infra/haproxy/haproxy.cfg). */
export const HAPROXY_EXAMPLE = join(ROOT, "infra", "haproxy", "haproxy.cfg");

export const HAPROXY_BIN = process.env.OCTOPROX_HAPROXY_BIN ?? "/usr/sbin/haproxy";

export interface HaproxyOptions {
  /** The backends' ports on 127.0.0.1, in the order round robin visits them. */
  servers: readonly number[];
  /** The PROXY protocol version sent to them (2 unless said). */
  proxyProtocol?: 1 | 2;
}

export interface Haproxy {
  readonly host: string;
  readonly port: number;
  /** What HAProxy printed so far (for failure messages). */
  output(): string;
  close(): Promise<void>;
}

/**
 * The example's rule: every `address:port` on a bind or server line, and a server's check
 * `port N` (the server's address:N), is looked up in `endpoints` and replaced. An endpoint the
 * table lacks is an error, so every listener of the file is placed.
 */
function renderExample(text: string, endpoints: Record<string, string>): string {
  const place = (endpoint: string): string => {
    const placed = endpoints[endpoint];
    if (placed === undefined) throw new Error(`No endpoint given for ${endpoint}`);
    return placed;
  };
  return text.split("\n").map((line) => {
    const bind = /^(\s*bind\s+)(\S+:\d+)(.*)$/.exec(line);
    if (bind) return `${bind[1]}${place(bind[2])}${bind[3]}`;
    const server = /^(\s*server\s+\S+\s+)([0-9.]+):(\d+)(.*)$/.exec(line);
    if (!server) return line;
    const [, head, address, port, rest] = server;
    const checked = rest.replace(
      /\bport (\d+)\b/,
      (_, checkPort: string) => `port ${place(`${address}:${checkPort}`).split(":").pop()}`,
    );
    return `${head}${place(`${address}:${port}`)}${checked}`;
  }).join("\n");
}

/**
 * Each server's row of HAProxy's CSV stats (a stats frontend at 127.0.0.1:`statsPort`, `stats
 * uri /stats`), by `backend/server`: its columns by name.
 */
export async function haproxyServerStats(
  statsPort: number,
): Promise<Record<string, Record<string, string>>> {
  const response = await fetch(`http://127.0.0.1:${statsPort}/stats;csv`, {
    signal: AbortSignal.timeout(2_000),
  });
  const [header, ...rows] = (await response.text()).trim().split("\n");
  const columns = header.replace(/^# /, "").split(",");
  const servers: Record<string, Record<string, string>> = {};
  for (const row of rows.map((line) => line.split(","))) {
    const fields = Object.fromEntries(columns.map((name, index) => [name, row[index]]));
    if (fields.svname === "FRONTEND" || fields.svname === "BACKEND") continue;
    servers[`${fields.pxname}/${fields.svname}`] = fields;
  }
  return servers;
}

/** Each server's status (UP, DOWN, "UP 1/2" while going down…), by `backend/server`. */
export async function haproxyServerStates(statsPort: number): Promise<Record<string, string>> {
  const stats = await haproxyServerStats(statsPort);
  return Object.fromEntries(Object.entries(stats).map(([server, row]) => [server, row.status]));
}

/** The example's listeners: clients' HTTP and SOCKS5 ports, and the stats page's. */
export type HaproxyExample = Haproxy & { readonly ports: readonly [number, number, number] };

/**
 * The shipped example (HAPROXY_EXAMPLE) rendered by its rule in front of `gateways` (each one's
 * proxy, SOCKS5 and status ports on 127.0.0.1, in the order gw1, gw2…), with its HTTP and SOCKS5
 * frontends and stats page on free ports.
 */
export async function startHaproxyExample(
  gateways: readonly { proxyPort: number; socksPort: number; statusPort: number }[],
): Promise<HaproxyExample> {
  const example = await readFile(HAPROXY_EXAMPLE, "utf8");
  const started = await startHaproxyConfig(([http, socks, stats]) => {
    const endpoints: Record<string, string> = {
      "0.0.0.0:8080": `127.0.0.1:${http}`,
      "0.0.0.0:1080": `127.0.0.1:${socks}`,
      "127.0.0.1:8404": `127.0.0.1:${stats}`,
    };
    gateways.forEach((gateway, index) => {
      const address = `10.0.0.1${index + 1}`;
      endpoints[`${address}:8080`] = `127.0.0.1:${gateway.proxyPort}`;
      endpoints[`${address}:1080`] = `127.0.0.1:${gateway.socksPort}`;
      endpoints[`${address}:8081`] = `127.0.0.1:${gateway.statusPort}`;
    });
    return renderExample(example, endpoints);
  }, 3);
  return started as HaproxyExample;
}

function config(port: number, options: HaproxyOptions): string {
  const send = options.proxyProtocol === 1 ? "send-proxy" : "send-proxy-v2";
  return [
    "global",
    "  maxconn 1024",
    "defaults",
    "  mode tcp",
    "  timeout connect 5s",
    "  timeout client 60s",
    "  timeout server 60s",
    "frontend clients",
    `  bind 127.0.0.1:${port}`,
    "  default_backend gateways",
    "backend gateways",
    "  balance roundrobin",
    ...options.servers.map((server, index) => `  server gw${index} 127.0.0.1:${server} ${send}`),
    "",
  ].join("\n");
}

export function startHaproxy(options: HaproxyOptions): Promise<Haproxy> {
  return startHaproxyConfig(([port]) => config(port, options), 1);
}

/**
 * HAProxy with a config of the caller's: `render` gets `portCount` free ports on 127.0.0.1 (the
 * first is the one waited for; HAProxy binds every listener at once, or exits) and answers the
 * config text. `port` is the first of them.
 */
export async function startHaproxyConfig(
  render: (ports: readonly number[]) => string,
  portCount: number,
): Promise<Haproxy & { readonly ports: readonly number[] }> {
  try {
    await access(HAPROXY_BIN, constants.X_OK);
  } catch {
    throw new Error(
      `haproxy not found at ${HAPROXY_BIN}: install it with \`apt-get install -y haproxy\` ` +
        "(.ci/run does), or set OCTOPROX_HAPROXY_BIN",
    );
  }
  const dir = await mkdtemp(join(tmpdir(), "ox-haproxy-"));
  const configPath = join(dir, "haproxy.cfg");
  let child: ChildProcess | undefined;
  let output = "";
  try {
    // A free port can be taken between the check and HAProxy's bind: try a few.
    for (let attempt = 1;; attempt++) {
      const ports: number[] = [];
      while (ports.length < portCount) {
        const candidate = await freePort();
        if (!ports.includes(candidate)) ports.push(candidate);
      }
      const port = ports[0];
      await writeFile(configPath, render(ports));
      output = "";
      const started = spawn(HAPROXY_BIN, ["-db", "-f", configPath], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      child = started;
      const collect = (chunk: Buffer) => {
        if (output.length < 8192) output += chunk.toString();
      };
      started.stdout?.on("data", collect);
      started.stderr?.on("data", collect);
      const up = await waitUntil(
        async () => {
          if (started.exitCode !== null || started.signalCode !== null) return "exited";
          return (await portAccepts("127.0.0.1", port)) ? "up" : undefined;
        },
        { timeoutMs: 10_000, message: `haproxy on ${port}` },
      );
      if (up === "up") {
        const running = started;
        return {
          host: "127.0.0.1",
          port,
          ports,
          output: () => output,
          async close() {
            await stop(running);
            await rm(dir, { recursive: true, force: true });
          },
        };
      }
      if (attempt >= 3) throw new Error(`haproxy did not start: ${output}`);
    }
  } catch (error) {
    if (child) await stop(child);
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
  await exited;
  clearTimeout(timer);
}
