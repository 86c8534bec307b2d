/**
 * A real HAProxy (Debian's) for tests: TCP mode on 127.0.0.1 at a free port, balancing round
 * robin over `servers` and sending each one a PROXY protocol header (`send-proxy-v2`, or
 * `send-proxy` for version 1) that names the client as HAProxy saw it. Its own config in a temp
 * dir, run in the foreground (`-db`), stopped with SIGTERM.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { access, mkdtemp, rm, writeFile } from "node:fs/promises";
import { constants } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, portAccepts, waitFor } from "./wait.ts";

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
      const up = await waitFor(
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
