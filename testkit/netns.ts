/**
 * Network namespaces a test makes for itself, so tunnel traffic stays on this machine and off
 * its own network: a namespace per role (a device, the upstream proxies), each joined to the
 * test's namespace by a veth pair with addresses the test picks, each with its own hosts file
 * and resolver (`ip netns exec` mounts /etc/netns/<name>/ over /etc/). Needs root (CAP_NET_ADMIN
 * and CAP_SYS_ADMIN); `netnsAvailable` says whether this machine grants it, and why not.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { promisify } from "node:util";
import { waitUntil } from "./wait.ts";

const exec = promisify(execFile);

/** Runs a program to its end; rejects with its stderr. */
export async function run(
  program: string,
  args: readonly string[],
  stdin?: string,
): Promise<string> {
  if (stdin === undefined) {
    const { stdout } = await exec(program, [...args], { encoding: "utf8" });
    return stdout;
  }
  return await new Promise((resolve, reject) => {
    const child = spawn(program, [...args], { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.once("error", reject);
    child.once("exit", (code) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`${program} ${args.join(" ")}: exit ${code}: ${stderr.trim()}`));
    });
    child.stdin.end(stdin);
  });
}

/** Why namespaces cannot be made here (not root, no `ip`), or undefined when they can. */
export async function netnsAvailable(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return "tests of tunnels make network namespaces, which needs root";
  const probe = `oxprobe${randomBytes(3).toString("hex")}`;
  try {
    await run("ip", ["netns", "add", probe]);
    await run("ip", ["netns", "del", probe]);
    return undefined;
  } catch (error) {
    return `ip netns add failed: ${error instanceof Error ? error.message : String(error)}`;
  }
}

export interface VethOptions {
  /** The address and prefix length on the test's side (`10.204.0.1/24`). */
  outside: string;
  /** Addresses inside the namespace (the first is its main one). */
  inside: readonly string[];
}

export class Netns {
  readonly name: string;
  readonly #links: string[] = [];
  readonly #children = new Set<ChildProcess>();
  #closed = false;

  private constructor(name: string) {
    this.name = name;
  }

  /** A new namespace, its loopback up. */
  static async create(label: string): Promise<Netns> {
    const ns = new Netns(`ox-${label}-${randomBytes(3).toString("hex")}`);
    await run("ip", ["netns", "add", ns.name]);
    await ns.exec("ip", ["link", "set", "lo", "up"]);
    return ns;
  }

  /** Runs a program inside to its end. */
  exec(program: string, args: readonly string[], stdin?: string): Promise<string> {
    return run("ip", ["netns", "exec", this.name, program, ...args], stdin);
  }

  /** Starts a program inside that runs until the namespace closes (or `kill`). */
  spawn(program: string, args: readonly string[], env: Record<string, string> = {}): ChildProcess {
    const child = spawn("ip", ["netns", "exec", this.name, program, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    this.#children.add(child);
    child.once("exit", () => this.#children.delete(child));
    return child;
  }

  /** Joins the namespace to the test's by a veth pair (names of at most 15 characters). */
  async veth(options: VethOptions): Promise<void> {
    const id = randomBytes(3).toString("hex");
    const outside = `oxo${id}`;
    const inside = `oxi${id}`;
    await run("ip", ["link", "add", outside, "type", "veth", "peer", "name", inside]);
    this.#links.push(outside);
    await run("ip", ["link", "set", inside, "netns", this.name]);
    await run("ip", ["address", "add", options.outside, "dev", outside]);
    await run("ip", ["link", "set", outside, "up"]);
    for (const address of options.inside) {
      await this.exec("ip", ["address", "add", address, "dev", inside]);
    }
    await this.exec("ip", ["link", "set", inside, "up"]);
  }

  /** What `ip netns exec` mounts over /etc/hosts inside. */
  async hosts(lines: readonly string[]): Promise<void> {
    await mkdir(`/etc/netns/${this.name}`, { recursive: true });
    await writeFile(`/etc/netns/${this.name}/hosts`, `127.0.0.1 localhost\n${lines.join("\n")}\n`);
  }

  /** What `ip netns exec` mounts over /etc/resolv.conf inside. */
  async resolver(nameserver: string): Promise<void> {
    await mkdir(`/etc/netns/${this.name}`, { recursive: true });
    await writeFile(
      `/etc/netns/${this.name}/resolv.conf`,
      `nameserver ${nameserver}\noptions timeout:2 attempts:2\n`,
    );
  }

  /** Stops what runs inside, removes the links and the namespace. Safe twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const child of this.#children) child.kill("SIGKILL");
    await waitUntil(() => this.#children.size === 0, {
      timeoutMs: 5_000,
      message: `${this.name}'s programs to end`,
    }).catch(() => undefined);
    // Whatever else runs inside (a daemon that forked) goes with the namespace's processes.
    const pids = await run("ip", ["netns", "pids", this.name]).catch(() => "");
    for (const pid of pids.split("\n").map(Number).filter((n) => n > 0)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone already.
      }
    }
    for (const link of this.#links) await run("ip", ["link", "del", link]).catch(() => undefined);
    await run("ip", ["netns", "del", this.name]).catch(() => undefined);
    await rm(`/etc/netns/${this.name}`, { recursive: true, force: true });
  }
}
