/** Waiting for conditions with a deadline, instead of sleeps that guess timing. */
import net from "node:net";

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Says what was awaited, in the error when the deadline passes. */
  message?: string;
}

/** Polls `condition` until it holds (returns truthy) or the deadline passes. */
export async function waitFor<T>(
  condition: () => T | Promise<T>,
  options: WaitOptions = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 10;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for ${options.message ?? "a condition"}`,
        {
          cause: lastError,
        },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

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
 * A port that was free a moment ago (the OS picks it). For programs that cannot listen on
 * port 0 and report back; callers retry when another process takes it meanwhile.
 */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/**
 * An address that refuses connections for as long as `heldPort` stays bound on 127.0.0.1 only:
 * the same port on another loopback address. A port merely found free could be taken by a
 * process running beside the test.
 */
export function refusingAddress(heldPort: number): { host: string; port: number } {
  return { host: "127.0.0.254", port: heldPort };
}
