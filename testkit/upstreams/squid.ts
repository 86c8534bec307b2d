/** Debian's Squid as a forward proxy chained to an upstream. */
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../ports.ts";
import { type Service, spawnListening, stopChild } from "./daemon.ts";

/**
 * Debian's Squid as a forward proxy on a free loopback port, chained to `upstreamPort` on
 * 127.0.0.1: a `cache_peer` parent with `never_direct`, so forward requests and CONNECT
 * tunnels alike go through it (Squid keeps its connections to the peer alive and reuses them).
 * No caching (`cache deny all`, no cache_dir, no cache memory), no access log, one worker
 * (`-N`: one process, no daemon), clients from 127/8 only.
 */
export async function startSquid(upstreamPort: number): Promise<Service> {
  const dir = await mkdtemp(join(tmpdir(), "ox-bench-squid-"));
  // Squid drops to its own user (proxy) as root: it must write its log and pid here.
  await chmod(dir, 0o777);
  const port = await freePort();
  const config = [
    `http_port 127.0.0.1:${port}`,
    `pid_filename ${join(dir, "squid.pid")}`,
    `cache_log ${join(dir, "cache.log")}`,
    "access_log none",
    "cache_store_log none",
    "logfile_rotate 0",
    `coredump_dir ${dir}`,
    "cache deny all",
    "cache_mem 0 MB",
    "workers 1",
    "pinger_enable off",
    "acl bench_clients src 127.0.0.0/8",
    "http_access allow bench_clients",
    "http_access deny all",
    `cache_peer 127.0.0.1 parent ${upstreamPort} 0 no-query no-digest default name=shared_upstream`,
    "never_direct allow all",
    "visible_hostname octoprox-bench-squid",
    "max_filedescriptors 16384",
    "shutdown_lifetime 0 seconds",
  ].join("\n");
  const configPath = join(dir, "squid.conf");
  await writeFile(configPath, `${config}\n`);
  const child = await spawnListening("squid", "/usr/sbin/squid", ["-N", "-f", configPath], {
    dir,
    port,
    log: () => readFile(join(dir, "cache.log"), "utf8").then((log) => log.slice(-2000)),
  });
  return {
    name: "squid",
    port,
    pids: [child.pid!],
    async stop() {
      await stopChild(child, 10_000);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
