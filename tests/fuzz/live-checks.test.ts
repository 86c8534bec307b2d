/**
 * The live fuzzer's checks catch what they are for: against small servers that misbehave on
 * purpose (one that never answers nor closes, one that answers with a stack trace, one that
 * answers 500), a short run reports each as a violation; its log scan finds stack frames,
 * unhandled rejections and error lines, and lets a plain info line pass.
 */
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { faultLine, runLiveFuzz, showsStack } from "../../scripts/fuzz/live.ts";

const servers: net.Server[] = [];
const sockets = new Set<net.Socket>();

afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A loopback server whose every connection gets `onData` for what the client sends. */
async function server(onData: (socket: net.Socket) => void): Promise<number> {
  const made = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.once("data", () => onData(socket));
  });
  servers.push(made);
  await new Promise<void>((resolve) => made.listen(0, "127.0.0.1", resolve));
  return (made.address() as net.AddressInfo).port;
}

function fuzz(port: number) {
  return runLiveFuzz({
    proxy: { host: "127.0.0.1", port },
    maxHeaderBytes: 1024,
    closeBoundMs: 300,
    durationMs: 600,
    connections: 4,
    seed: 1,
  });
}

describe("the live fuzzer's checks", () => {
  it("reports connections neither answered nor closed within the bound", async () => {
    const report = await fuzz(await server(() => {}));
    expect(report.violations.some((v) => v.includes("neither answered nor closed"))).toBe(true);
    const hung = Object.values(report.byCase).reduce((sum, f) => sum + f.hung, 0);
    expect(hung).toBeGreaterThan(0);
  });

  it("reports a stack trace in an answer, and a 500", async () => {
    const traced = await fuzz(
      await server((socket) =>
        socket.end(
          "HTTP/1.1 400 Bad Request\r\n\r\nTypeError: x is undefined\n    at parse (file:///gateway/net/http/parse.ts:10:5)\n",
        )
      ),
    );
    expect(traced.violations.some((v) => v.includes("a stack trace in the answer"))).toBe(true);
    const failing = await fuzz(
      await server((socket) => socket.end("HTTP/1.1 500 Internal Server Error\r\n\r\n")),
    );
    expect(failing.violations.some((v) => v.includes("answered 500"))).toBe(true);
  });

  it("finds faults in log lines and lets ordinary lines pass", () => {
    expect(showsStack("Error: boom\n    at run (file:///x.ts:1:2)")).toBe(true);
    expect(faultLine("error: Uncaught (in promise) TypeError: nope")).toBeDefined();
    expect(faultLine('{"level":"error","msg":"Unhandled rejection"}')).toBeDefined();
    expect(faultLine('{"level":"error","msg":"Client session failed"}')).toBeDefined();
    expect(faultLine('{"level":"info","msg":"Proxy listener bound","port":1}')).toBeUndefined();
    expect(faultLine('{"level":"warn","msg":"PROXY protocol header refused"}')).toBeUndefined();
  });
});
