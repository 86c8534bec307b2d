/**
 * The OpenVPN endpoint's texts, runtime-neutral: the server config the daemon reads from its
 * stdin, and the management interface's lines, read and written.
 *
 * The daemon runs as a plain TLS server (`mode server`, `tls-server`) on a tun interface with
 * the subnet's first host, and hands every connecting device to the gateway through the
 * management interface (`management-client-auth`): the gateway answers with the device's own
 * address (`ifconfig-push`), or refuses it. The daemon connects to the gateway's management
 * listener (`management-client`), so the gateway needs no file or socket path of its own. Every
 * device pushes its default route and DNS through the tunnel (`redirect-gateway def1`, the
 * gateway's address as DNS). The CA, server pair and tls-crypt key are inline, so nothing of the
 * identity touches the disk.
 */
import type { FeedOpenvpn } from "../../shared/feed/models.ts";
import { formatIPv4 } from "../../shared/net/ip.ts";
import { gatewayAddress } from "./wireguard-config.ts";

export interface OpenvpnDaemonOptions {
  interface: string;
  /** The port the daemon listens on (UDP or TCP as the identity says). */
  listenPort: number;
  /** The gateway's management listener on loopback, which the daemon connects to. */
  managementPort: number;
}

/** The subnet's first host (the gateways' tunnel address) and its dotted netmask. */
export function openvpnAddressing(subnet: string): { address: string; netmask: string } {
  const { address, bits } = gatewayAddress(subnet);
  return { address, netmask: formatIPv4(2 ** 32 - 2 ** (32 - bits)) };
}

const inline = (tag: string, pem: string) => [`<${tag}>`, pem.trim(), `</${tag}>`];

export function openvpnServerConfig(identity: FeedOpenvpn, options: OpenvpnDaemonOptions): string {
  const { address, netmask } = openvpnAddressing(identity.subnet);
  const tcp = identity.transport === "tcp";
  return [
    "mode server",
    "tls-server",
    `dev ${options.interface}`,
    "dev-type tun",
    "topology subnet",
    `proto ${tcp ? "tcp-server" : "udp"}`,
    `port ${options.listenPort}`,
    `ifconfig ${address} ${netmask}`,
    `tun-mtu ${identity.mtu}`,
    'push "topology subnet"',
    `push "route-gateway ${address}"`,
    'push "redirect-gateway def1"',
    `push "dhcp-option DNS ${address}"`,
    `keepalive ${identity.keepalive_interval_seconds} ${identity.keepalive_timeout_seconds}`,
    // A daemon stopping (a restart, a new identity) tells UDP clients to reconnect at once,
    // rather than after their keepalive timeout; TCP clients see the connection close.
    ...(tcp ? [] : ["explicit-exit-notify 1"]),
    // ECDHE only: the identity's keys are P-256.
    "dh none",
    // A device's certificate must be a client's, as the server's is a server's.
    "remote-cert-tls client",
    `management 127.0.0.1 ${options.managementPort}`,
    "management-client",
    "management-client-auth",
    // Devices present a certificate, never a password: without this the daemon waits for one.
    "auth-user-pass-optional",
    // No scripts, no user's files: the management interface decides.
    "script-security 1",
    "verb 3",
    ...inline("ca", identity.ca_certificate),
    ...inline("cert", identity.server_certificate),
    ...inline("key", identity.server_key),
    ...inline("tls-crypt", identity.tls_crypt_key),
    "",
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// The management interface

/** A device's request, as the daemon announces it over several lines. */
export interface ClientRequest {
  /** `CONNECT` and `REAUTH` wait for an answer; `ESTABLISHED` and `DISCONNECT` tell. */
  event: "CONNECT" | "REAUTH" | "ESTABLISHED" | "DISCONNECT";
  cid: string;
  /** The key id, for CONNECT and REAUTH; "" otherwise. */
  kid: string;
  env: Record<string, string>;
}

/**
 * Reads the daemon's management lines: `>CLIENT:<event>,<cid>[,<kid>]` then `>CLIENT:ENV,k=v`
 * lines up to `>CLIENT:ENV,END`, handed on whole. Other lines (logs, `SUCCESS:`, `ERROR:`)
 * go to `other`.
 */
export class ManagementReader {
  #pending: ClientRequest | undefined;
  #partial = "";
  readonly #onRequest: (request: ClientRequest) => void;
  readonly #other: (line: string) => void;

  constructor(onRequest: (request: ClientRequest) => void, other: (line: string) => void) {
    this.#onRequest = onRequest;
    this.#other = other;
  }

  /** Feeds text as it arrives; lines may be split anywhere. */
  feed(text: string): void {
    const lines = (this.#partial + text).split("\n");
    this.#partial = lines.pop() ?? "";
    for (const raw of lines) this.#line(raw.replace(/\r$/, ""));
  }

  #line(line: string): void {
    if (line.startsWith(">CLIENT:ENV,")) {
      const pair = line.slice(">CLIENT:ENV,".length);
      const pending = this.#pending;
      if (pending === undefined) return;
      if (pair === "END") {
        this.#pending = undefined;
        this.#onRequest(pending);
        return;
      }
      const equals = pair.indexOf("=");
      if (equals > 0) pending.env[pair.slice(0, equals)] = pair.slice(equals + 1);
      return;
    }
    const match = /^>CLIENT:(CONNECT|REAUTH|ESTABLISHED|DISCONNECT),(\d+)(?:,(\d+))?/.exec(line);
    if (match !== null) {
      this.#pending = {
        event: match[1] as ClientRequest["event"],
        cid: match[2],
        kid: match[3] ?? "",
        env: {},
      };
      return;
    }
    this.#other(line);
  }
}

/** The answer admitting a device at `address`. */
export function admitCommand(cid: string, kid: string, address: string, netmask: string): string {
  return `client-auth ${cid} ${kid}\nifconfig-push ${address} ${netmask}\nEND\n`;
}

/** The answer to a re-negotiation of a device still admitted: nothing to push again. */
export function reauthCommand(cid: string, kid: string): string {
  return `client-auth-nt ${cid} ${kid}\n`;
}

/** Refuses a device; `reason` goes to the daemon's log, never to the device. */
export function denyCommand(cid: string, kid: string, reason: string): string {
  return `client-deny ${cid} ${kid} "${reason.replace(/["\\\n]/g, " ")}"\n`;
}

export function killCommand(cid: string): string {
  return `client-kill ${cid}\n`;
}
