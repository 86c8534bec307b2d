/**
 * An OpenVPN device in a namespace of its own (testkit/netns.ts), brought up from the `.ovpn`
 * profile the API hands out by Debian's `openvpn` client. The address comes from the gateway
 * (pushed at admission); the default route through the tunnel and the namespace's resolver are
 * set here, as a desktop client's scripts would (Linux's `openvpn` applies neither a pushed DNS
 * nor, with no default gateway in the namespace to save, `redirect-gateway`).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Netns } from "./netns.ts";
import { waitUntil } from "./wait.ts";

export interface OpenvpnDevice {
  readonly interface: string;
  /** The address the gateway pushed. */
  readonly address: string;
  /** Everything the client printed so far. */
  output(): string;
  /** Whether the client process still runs. */
  running(): boolean;
  close(): Promise<void>;
}

export interface OpenvpnDeviceOptions {
  /** The gateways' tunnel address: the namespace's resolver. */
  dns: string;
  /** Resolve once the client printed this rather than being up (a refusal, say). */
  until?: RegExp;
  timeoutMs?: number;
}

/** Starts the client in `ns` from `profile`; resolves once its tunnel is up (or `until`). */
export async function startOpenvpnDevice(
  ns: Netns,
  profile: string,
  options: OpenvpnDeviceOptions,
): Promise<OpenvpnDevice> {
  const iface = `ovd${randomBytes(2).toString("hex")}`;
  const folder = await mkdtemp(join(tmpdir(), "ox-ovpn-device-"));
  const file = join(folder, "device.ovpn");
  await writeFile(file, profile, { mode: 0o600 });
  const child = ns.spawn("openvpn", [
    "--config",
    file,
    "--dev",
    iface,
    "--dev-type",
    "tun",
    // Routes are set below; the pushed ones need a default gateway this namespace lacks.
    "--route-noexec",
  ]);
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => (output += text));
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (output += text));
  const close = async () => {
    child.kill("SIGTERM");
    await waitUntil(() => child.exitCode !== null || child.signalCode !== null, {
      timeoutMs: 5_000,
      message: "the OpenVPN client to exit",
    }).catch(() => child.kill("SIGKILL"));
    await rm(folder, { recursive: true, force: true });
  };
  try {
    await waitUntil(() => {
      if (options.until?.test(output)) return true;
      if (child.exitCode !== null) throw new Error(`openvpn exited: ${output.slice(-2000)}`);
      return output.includes("Initialization Sequence Completed");
    }, { timeoutMs: options.timeoutMs ?? 30_000, message: "the OpenVPN device's tunnel" });
  } catch (error) {
    await close();
    throw error;
  }
  let address = "";
  if (output.includes("Initialization Sequence Completed")) {
    const shown = await ns.exec("ip", ["-4", "-o", "address", "show", "dev", iface]);
    address = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(shown)?.[1] ?? "";
    await ns.exec("ip", ["route", "replace", "default", "dev", iface]);
    await ns.resolver(options.dns);
  }
  return {
    interface: iface,
    address,
    output: () => output,
    running: () => child.exitCode === null && child.signalCode === null,
    close,
  };
}
