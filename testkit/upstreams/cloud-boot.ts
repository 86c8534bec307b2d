/**
 * The test clouds' stand-in for an instance's boot. A real instance runs its start-up script,
 * which installs Squid with the instance's own login (control/cloud/startup-script.ts); an
 * emulated one reads that login from the script's three assignments and starts Debian's
 * tinyproxy with it, listening on an address of its own in 127/8 (the instance's public IP)
 * and sending from it, so an echo origin sees which instance a request left through. The
 * script is the only place the login comes from, as on a real cloud.
 */
import type { ProxyLogin } from "../../control/cloud/startup-script.ts";
import { startTinyproxy, type Tinyproxy } from "./tinyproxy.ts";

/** The login a start-up script carries, or an error naming what is missing. */
export function readStartupScript(script: string): ProxyLogin {
  const value = (name: string) => {
    const match = new RegExp(`^${name}=([A-Za-z0-9]+)$`, "m").exec(script);
    if (match === null) throw new Error(`The start-up script sets no ${name}`);
    return match[1];
  };
  return {
    port: Number(value("OCTOPROX_PROXY_PORT")),
    username: value("OCTOPROX_PROXY_USER"),
    password: value("OCTOPROX_PROXY_PASSWORD"),
  };
}

export interface BootedInstance {
  readonly address: string;
  readonly proxy: Tinyproxy;
}

/**
 * Addresses for one emulator's instances: a /16 of 127/8 drawn at random, so emulators of
 * parallel test files rarely share one (and a shared one still differs by port).
 */
export class InstanceAddresses {
  readonly #base: number;
  #next = 1;
  constructor(base = 100 + Math.floor(Math.random() * 100)) {
    this.#base = base;
  }
  /** The next address: 127.<base>.<n / 250>.<n % 250 + 1>. */
  take(): string {
    const n = this.#next++;
    return `127.${this.#base}.${Math.floor(n / 250) % 256}.${(n % 250) + 1}`;
  }
}

/** Boots one instance: its proxy listening on `address`, with the script's login and port. */
export async function bootInstance(address: string, script: string): Promise<BootedInstance> {
  const login = readStartupScript(script);
  const proxy = await startTinyproxy({
    listenAddress: address,
    bindAddress: address,
    port: login.port,
    auth: { username: login.username, password: login.password },
    logLevel: "Warning",
  });
  return { address, proxy };
}
