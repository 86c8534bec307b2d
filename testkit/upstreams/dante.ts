/** Debian's Dante (danted) as a SOCKS5 server. */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../ports.ts";
import { descendants, type Service, spawnListening, stopChild } from "./daemon.ts";

/**
 * Debian's Dante (danted) as a SOCKS5 server on a free loopback port, connecting to
 * destinations itself, as it is usually run (no `route` to an upstream). It asks
 * for no login (`socksmethod: none`): Dante's username method checks the machine's own
 * password database, so giving it a login means adding a system account. No logging beyond
 * errors. Dante works in several processes (a mother and the children it forks to negotiate,
 * resolve and relay); the service's pids are all of them, read afresh each time.
 */
export async function startDante(): Promise<Service> {
  const dir = await mkdtemp(join(tmpdir(), "ox-bench-dante-"));
  await chmod(dir, 0o755);
  const port = await freePort();
  const user = process.getuid?.() === 0
    ? ["user.privileged: root", "user.unprivileged: nobody"]
    : [];
  const config = [
    `logoutput: ${join(dir, "danted.log")}`,
    "errorlog: stderr",
    `internal: 127.0.0.1 port = ${port}`,
    "external: 127.0.0.1",
    "clientmethod: none",
    "socksmethod: none",
    ...user,
    "client pass {\n  from: 127.0.0.0/8 to: 0.0.0.0/0\n  log: error\n}",
    "socks pass {\n  from: 127.0.0.0/8 to: 127.0.0.0/8\n  command: connect\n  log: error\n}",
    "socks block {\n  from: 0.0.0.0/0 to: 0.0.0.0/0\n  log: error\n}",
  ].join("\n");
  const configPath = join(dir, "danted.conf");
  await writeFile(configPath, `${config}\n`);
  const child = await spawnListening(
    "danted",
    "/usr/sbin/danted",
    ["-f", configPath, "-p", join(dir, "danted.pid")],
    { dir, port },
  );
  const mother = child.pid!;
  return {
    name: "dante",
    port,
    get pids() {
      return [mother, ...descendants(mother)];
    },
    async stop() {
      await stopChild(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
