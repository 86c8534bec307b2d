/**
 * Ports for programs under test: the one free-port helper (`freePort`), whether a port accepts
 * connections, and an address that refuses them.
 */
import { readFileSync } from "node:fs";
import net from "node:net";

/** Whether something accepts TCP connections at host:port right now. */
export function portAccepts(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (accepted: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(accepted);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/**
 * The ports the kernel hands out by itself (port 0 binds, a connection's own end), read once:
 * Linux's ip_local_port_range, or the common default elsewhere.
 */
let ephemeralLow: number | undefined;
function ephemeralRangeLow(): number {
  if (ephemeralLow === undefined) {
    try {
      const text = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8");
      ephemeralLow = Number(text.trim().split(/\s+/)[0]) || 32768;
    } catch {
      ephemeralLow = 32768;
    }
  }
  return ephemeralLow;
}

function bindsOn(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * A port that was free a moment ago, for programs that cannot listen on port 0 and report
 * back. Drawn below the kernel's ephemeral range: a port from inside it can be taken between
 * this check and the program's bind by any test's port-0 listener or outgoing connection;
 * below it only another caller of this function could, drawing at random among thousands.
 */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  const high = ephemeralRangeLow() - 1;
  const low = Math.max(1024, high - 10_000);
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (await bindsOn(port, host)) return port;
  }
  throw new Error(`no free port found between ${low} and ${high}`);
}

/**
 * An address that refuses connections for as long as `heldPort` stays bound on 127.0.0.1 only:
 * the same port on another loopback address. A port merely found free could be taken by a
 * process running beside the test.
 */
export function refusingAddress(heldPort: number): { host: string; port: number } {
  return { host: "127.0.0.254", port: heldPort };
}
