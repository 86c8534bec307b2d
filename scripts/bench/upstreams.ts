/**
 * Starts the benchmarks' upstream side (upstreams-child.ts) in a child process and hands back
 * its ports; `close` disconnects it, which closes every server and tinyproxy it started.
 */
import { type ChildProcess, fork } from "node:child_process";

export interface UpstreamPorts {
  /** The local origin: `/echo` answers `{"ip": ...}`. */
  origin: number;
  /** Our fault proxy passing traffic (every scheme on one port; no auth, any login taken). */
  pass: number;
  /** Our fault proxy accepting connections and never answering. */
  hang: number;
  /** tinyproxy instances (HTTP), outgoing from 127.0.0.2 and 127.0.0.3. */
  tinyproxies: number[];
  /** Processes besides the child itself whose CPU counts as the upstream side (tinyproxy). */
  pids: number[];
}

export interface Upstreams extends UpstreamPorts {
  /** The child and the tinyproxies: the upstream side's processes. */
  allPids: number[];
  close(): Promise<void>;
}

export async function startUpstreams(): Promise<Upstreams> {
  const child: ChildProcess = fork(new URL("./upstreams-child.ts", import.meta.url), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const ports = await new Promise<UpstreamPorts>((resolve, reject) => {
    child.once("message", (message) => resolve(message as UpstreamPorts));
    child.once("exit", (code) => reject(new Error(`upstream process exited (${code})`)));
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    ...ports,
    allPids: [child.pid!, ...ports.pids],
    async close() {
      if (child.connected) child.disconnect();
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
