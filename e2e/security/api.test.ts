/**
 * CR, LF and control characters in what a user sends the admin API (login fields, project,
 * connector, proxy, token and user fields, the X-Request-ID header), against a real api process:
 * no answer carries them into a header, every answer is a clear 4xx or a success, and every line
 * the process wrote is one JSON object with them escaped (none splits a log line or writes a
 * terminal escape). The cluster's secrets scan (at close) then finds none of the passwords sent.
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Cluster, type Member } from "../../testkit/cluster.ts";

let cluster: Cluster;
let api: Member;

const INJECTED = '\r\nX-Injected: 1\r\n\r\n{"level":"fatal","msg":"forged"}\n\x1b[2J\x00\x07';

beforeAll(async () => {
  cluster = await Cluster.create();
  api = await cluster.start("api");
});

afterAll(async () => {
  await cluster?.close();
});

/** The control characters (C0 and DEL) of `text` other than those `allowed`, by code. */
function controlCharacters(text: string, allowed: string): number[] {
  return [...text].map((char) => char.charCodeAt(0)).filter((code) =>
    (code < 0x20 || code === 0x7f) && !allowed.includes(String.fromCharCode(code))
  );
}

/** One request on a raw socket: the answer's head and body as sent. */
function raw(request: string): Promise<{ status: number; head: string; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port: api.port });
    let answer = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("end", () => {
      const end = answer.indexOf("\r\n\r\n");
      resolve({
        status: Number(answer.slice(9, 12)),
        head: answer.slice(0, end),
        body: answer.slice(end + 4),
      });
    });
    socket.on("error", reject);
    socket.write(request);
  });
}

async function send(method: string, path: string, body: unknown, token?: string) {
  const text = JSON.stringify(body);
  return await raw(
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      (token ? `Authorization: Bearer ${token}\r\n` : "") +
      `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}

describe("control characters in API input", () => {
  test("never reach an answer's header; each answer is a clear 4xx or a success", async () => {
    const login = await cluster.request("POST", "/api/v1/auth/login", cluster.adminLogin);
    const token = login.body.access_token as string;
    const project = await cluster.request("POST", "/api/v1/projects", {
      name: "ctl",
      username: "ctl",
    });
    expect(project.status).toBe(201);
    const calls: [string, string, unknown][] = [
      ["POST", "/api/v1/auth/login", { username: `admin${INJECTED}`, password: "x" }],
      ["POST", "/api/v1/auth/login", { username: "admin", password: `pw${INJECTED}` }],
      ["POST", "/api/v1/projects", { name: `p${INJECTED}`, username: "pctl1" }],
      ["POST", "/api/v1/projects", { name: "pctl2", username: `u${INJECTED}` }],
      ["POST", "/api/v1/projects", { name: "pctl3", username: "pctl3", password: `pw${INJECTED}` }],
      ["POST", `/api/v1/projects/${project.body.id}/connectors`, {
        name: `c${INJECTED}`,
        kind: "static",
      }],
      ["POST", `/api/v1/projects/${project.body.id}/proxies`, {
        connector_id: project.body.id,
        url: `http://u:p${INJECTED}@1.2.3.4:8080`,
      }],
      ["POST", "/api/v1/tokens", { name: `t${INJECTED}` }],
      ["POST", "/api/v1/users", {
        username: `v${INJECTED}`,
        password: "password-1234",
        role: "viewer",
      }],
      ["GET", `/api/v1/projects?name=${encodeURIComponent(INJECTED)}`, undefined],
    ];
    for (const [method, path, body] of calls) {
      const answer = body === undefined
        ? await raw(
          `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
        )
        : await send(method, path, body, path.endsWith("/login") ? undefined : token);
      const what = `${method} ${path} ${JSON.stringify(body)}`;
      expect(controlCharacters(answer.head, "\r\n"), what).toEqual([]);
      expect(answer.head, what).not.toMatch(/^X-Injected/im);
      expect(answer.status, what).toBeLessThan(500);
      // The body is JSON: whatever it repeats of the input is escaped.
      expect(controlCharacters(answer.body, ""), what).toEqual([]);
    }
  });

  test("an X-Request-ID with control characters is refused, an odd one replaced", async () => {
    const control = await raw(
      "GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: abc\x01\x1b[2Jdef\r\nConnection: close\r\n\r\n",
    );
    expect(control.status).toBe(400);
    expect(control.head).not.toContain("abc");
    const odd = await raw(
      'GET /health HTTP/1.1\r\nHost: x\r\nX-Request-ID: a b "<script>"\r\nConnection: close\r\n\r\n',
    );
    expect(odd.status).toBe(200);
    expect(/^X-Request-ID: (.*)$/im.exec(odd.head)?.[1]).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("every line the api wrote is one JSON object, control characters escaped", async () => {
    // The access log line of the last request is written after its answer.
    await cluster.until(() => api.logs().filter((line) => line.msg === "request").length >= 12);
    for (const line of [...api.stdout, ...api.stderr].filter((text) => text !== "")) {
      expect(controlCharacters(line, ""), line).toEqual([]);
      expect(() => JSON.parse(line), line).not.toThrow();
      expect(JSON.parse(line).msg).not.toBe("forged");
    }
  });
});

describe("error answers", () => {
  test("never repeat a secret the request sent", async () => {
    const project = await cluster.request("POST", "/api/v1/projects", {
      name: "errs",
      username: "errs",
      password: "Project-Passw0rd-77",
    });
    expect(project.status).toBe(201);
    const id = project.body.id as string;
    const connector = await cluster.request("POST", `/api/v1/projects/${id}/connectors`, {
      name: "static",
      kind: "static",
    });
    const refused = [
      // A proxy URL written wrong around its password, and one of a scheme not taken.
      await cluster.request("POST", `/api/v1/projects/${id}/proxies`, {
        connector_id: connector.body.id,
        url: "http://vendor:Vend0r-Secret-Pass@bad host:99999",
      }),
      await cluster.request("POST", `/api/v1/projects/${id}/proxies`, {
        connector_id: connector.body.id,
        url: "ftp://vendor:Vend0r-Secret-Pass2@203.0.113.5:21",
      }),
      // A password too long, a login with a wrong one, a credential with a key not taken.
      await cluster.request("POST", "/api/v1/projects", {
        name: "errs2",
        username: "errs2",
        password: `Too-Long-Passw0rd-${"x".repeat(300)}`,
      }),
      await cluster.request("POST", "/api/v1/auth/login", {
        username: "admin",
        password: "Wrong-Passw0rd-123",
      }),
      await cluster.request("POST", `/api/v1/projects/${id}/credentials`, {
        name: "bad",
        provider: "static",
        config: { username: "vendor", password: "Cred-Passw0rd-456", extra: "Extra-Secret-789" },
      }),
      await cluster.request("PATCH", `/api/v1/projects/${id}`, {
        password: 12345678,
        name: "Patch-Secret-0001\u0000",
      }),
    ];
    for (const answer of refused) {
      expect(answer.status, JSON.stringify(answer.body)).toBeGreaterThanOrEqual(400);
      expect(answer.status).toBeLessThan(500);
    }
    expect(await cluster.secretsScan.check(cluster)).toEqual([]);
  });
});
