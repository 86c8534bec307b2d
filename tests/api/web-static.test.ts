/**
 * The dashboard's files as the api serves them, over a real socket with the request line sent
 * as written (a client that does not normalise its path): a file inside the build, a deep link
 * answered with the app's page, and nothing outside the build however the path is written or
 * linked: `..`, `%2e%2e`, an encoded slash, a backslash, a symlink out.
 */
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { safeSegments } from "../../control/api/web-static.ts";
import { startHarness } from "../../testkit/api-harness.ts";
import { INDEX, SECRET, type ServedBuild, serveWebBuild } from "./web-build.ts";

let served: ServedBuild;
let port: number;

/** GET with the path exactly as given on the request line. */
function rawGet(path: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, method: "GET" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on(
        "end",
        () =>
          resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"]), body }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

beforeAll(async () => {
  served = await serveWebBuild();
  port = served.port;
});

afterAll(async () => {
  await served?.close();
});

describe("the dashboard's files", () => {
  test("serves a file of the build with its type, the app's page at /", async () => {
    const script = await rawGet("/assets/app-1234.js");
    expect(script.status).toBe(200);
    expect(script.type).toMatch(/text\/javascript/);
    expect(script.body).toContain("console.log");
    const home = await rawGet("/");
    expect(home.status).toBe(200);
    expect(home.type).toMatch(/text\/html/);
    expect(home.body).toBe(INDEX);
  });

  test("answers a deep link with the app's page, a missing file with a 404", async () => {
    const page = await rawGet("/projects/123/settings");
    expect(page.status).toBe(200);
    expect(page.body).toBe(INDEX);
    expect((await rawGet("/assets/missing-1.js")).status).toBe(404);
  });

  test("never reaches outside the build, however the path is written", async () => {
    for (
      const path of [
        "/../secret.txt",
        "/assets/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/assets/%2e%2e/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/..%2fsecret.txt",
        "/..%5csecret.txt",
        "/assets/leak.txt",
        "/outside/secret.txt",
        "/%00/secret.txt",
        "/%zz",
      ]
    ) {
      const answer = await rawGet(path);
      expect(answer.body, path).not.toContain(SECRET);
      // Refused outright, or (a path the URL parser folded back inside) the app's own page.
      if (answer.status === 200) expect(answer.body, path).toBe(INDEX);
      else expect(answer.status, path).toBe(404);
    }
    // What a client that does not fold the path sends is refused, not served as the page.
    expect((await rawGet("/..%2fsecret.txt")).status).toBe(404);
    expect((await rawGet("/assets/leak.txt")).status).toBe(404);
  });

  test("leaves /api to the API: an unknown route there is its JSON 404", async () => {
    const answer = await rawGet("/api/v1/nothing-here");
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.body).error).toMatch(/No route/);
  });

  test("refuses a segment that decodes to a traversal, a separator or a NUL", () => {
    expect(safeSegments("/assets/app.js")).toEqual(["assets", "app.js"]);
    expect(safeSegments("/a%20b")).toEqual(["a b"]);
    for (const path of ["/..", "/%2e%2e", "/a/%2E", "/..%2f", "/a%5cb", "/%00", "/%zz"]) {
      expect(safeSegments(path), path).toBeUndefined();
    }
  });
});

describe("without a build", () => {
  test("the home page says how to build the dashboard", async () => {
    const bare = await startHarness({ webDir: join(tmpdir(), "ox-web-none-here") });
    try {
      const answer = await bare.request("GET", "/");
      expect(answer.status).toBe(200);
      expect(answer.text).toContain("npm run build:web");
      expect(answer.text).toContain("/api/v1/openapi.json");
      expect((await bare.request("GET", "/projects/1")).status).toBe(404);
    } finally {
      await bare.close();
    }
  });
});
