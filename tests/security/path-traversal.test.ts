/**
 * Path traversal against every file the api serves (the dashboard's build is the only folder it
 * serves files from), over a real socket with the request line sent byte for byte as written:
 * encoded dots and slashes, double encoding, backslashes, overlong and full-width forms, absolute
 * paths and absolute-form targets, NUL, a symlink out. The answer is a 404 (or 400), or the
 * app's own page for a path that names no file; never a byte of a file outside the build.
 */
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ASSET, INDEX, SECRET, type ServedBuild, serveWebBuild } from "../api/web-build.ts";

let served: ServedBuild;
let port: number;

/** One request with `target` on its request line exactly; the status and the whole answer. */
function rawGet(target: string, method = "GET"): Promise<{ status: number; answer: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    let answer = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("end", () => {
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0), answer });
    });
    socket.on("error", reject);
    socket.write(`${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

beforeAll(async () => {
  served = await serveWebBuild();
  port = served.port;
});

afterAll(async () => {
  await served?.close();
});

/** Targets that point outside the build, each written another way. */
const TRAVERSALS = [
  "/../secret.txt",
  "/../../../../etc/passwd",
  "/assets/../../secret.txt",
  "/%2e%2e/secret.txt",
  "/%2E%2E/secret.txt",
  "/.%2e/secret.txt",
  "/%2e./secret.txt",
  "/..%2fsecret.txt",
  "/..%2Fsecret.txt",
  "/%2e%2e%2fsecret.txt",
  "/assets/%2e%2e/%2e%2e/secret.txt",
  "/%252e%252e/secret.txt", // double encoding
  "/%252e%252e%252fsecret.txt",
  "/..%252fsecret.txt",
  "/..\\secret.txt", // backslashes
  "/assets\\..\\..\\secret.txt",
  "/..%5csecret.txt",
  "/..%5Csecret.txt",
  "/%2e%2e%5csecret.txt",
  "/..%255csecret.txt",
  "/%c0%ae%c0%ae/secret.txt", // overlong UTF-8
  "/%c0%ae%c0%ae%c0%afsecret.txt",
  "/%ef%bc%8e%ef%bc%8e%ef%bc%8fsecret.txt", // full-width dots and slash
  "/..;/secret.txt",
  "/....//secret.txt",
  "//etc/passwd", // absolute paths
  "/%2fetc%2fpasswd",
  "/%2Fetc/passwd",
  `/${encodeURIComponent(join(tmpdir(), "x"))}`,
  "/assets/leak.txt", // a symlink out of the build
  "/../build-sibling/secret.txt",
  "/outside/secret.txt", // a link to the folder holding the build
  "/%00../secret.txt", // NUL
  "/secret.txt%00.js",
  `${ASSET}%00/../../../secret.txt`,
  "/%zz/../secret.txt", // percent-encoding that does not decode
  "http://127.0.0.1/../secret.txt", // absolute-form targets
  "http://127.0.0.1/%2e%2e/secret.txt",
  "../secret.txt", // no leading slash
  "*",
];

describe("path traversal on the dashboard's files", () => {
  test("the build's own files are served (the corpus can tell a file from a refusal)", async () => {
    const script = await rawGet(ASSET);
    expect(script.status).toBe(200);
    expect(script.answer).toContain("console.log('app')");
  });

  test.each(TRAVERSALS)("%s: never a file outside the build", async (target) => {
    for (const method of ["GET", "HEAD"]) {
      const { status, answer } = await rawGet(target, method);
      expect(answer, `${method} ${target}`).not.toContain(SECRET);
      expect(answer).not.toMatch(/root:.*:0:0:/);
      if (status === 200) {
        // A path the URL reader folded back inside, naming no file: the app's own page.
        if (method === "GET") expect(answer.endsWith(INDEX), `${method} ${target}`).toBe(true);
      } else {
        expect([400, 404], `${method} ${target}: ${answer.slice(0, 200)}`).toContain(status);
      }
    }
  });
});
