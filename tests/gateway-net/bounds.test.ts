/**
 * What the gateway answers itself, and its bounds: credentials (407), malformed and oversized
 * requests (400, 431), the guard (403), the connection bound, idle connections, readiness
 * (the proxy port closed until the first feed), and settings checked at start.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { freePort, portAccepts } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { seriesValue } from "../../testkit/promtool.ts";
import { curl } from "../../testkit/clients/curl.ts";
import {
  gatewayEnv,
  metricValue,
  PROXY_AUTH,
  spawnDeno,
  startGateway,
  type TestGateway,
} from "../../testkit/gateway/fixture-gateway.ts";
import {
  openConnect,
  proxyStatusError,
  RawConnection,
  type RawResponse,
} from "../../testkit/clients/raw-http.ts";

let origin: Origin;
let tinyproxy: Tinyproxy;
let gateway: TestGateway;

beforeAll(async () => {
  [origin, tinyproxy] = await Promise.all([
    startOrigin(),
    startTinyproxy({ bindAddress: "127.0.0.8" }),
  ]);
  gateway = await startGateway({
    upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
    env: { OCTOPROX_MAX_HEADER_BYTES: "2048" },
    blocked: ["blocked.example"],
  });
});

afterAll(async () => {
  const code = await gateway?.stop();
  await Promise.all([origin, tinyproxy].map((server) => server?.close()));
  expect(code).toBe(0);
});

/**
 * Sends raw bytes on a fresh connection; answers the one response and, with `waitForClose`,
 * whether the gateway closed the connection after it (within 5 s).
 */
async function exchange(
  bytes: string | Buffer,
  waitForClose = false,
): Promise<{ response: RawResponse; closed: boolean }> {
  const connection = await RawConnection.open(gateway.proxyPort);
  try {
    connection.write(bytes);
    const response = await connection.readResponse();
    if (waitForClose) await connection.waitUntil(() => connection.ended, 5_000).catch(() => {});
    return { response, closed: connection.ended };
  } finally {
    connection.destroy();
  }
}

function expectOwnAnswer(response: RawResponse, status: number, token: string): void {
  expect(response.status).toBe(status);
  expect(response.headers.get("content-type")).toEqual(["text/plain; charset=utf-8"]);
  expect(response.headers.get("proxy-status")?.[0]).toMatch(/^octoprox; error=[a-z_]+; details="/);
  expect(proxyStatusError(response)).toBe(token);
  expect(response.body.length).toBeGreaterThan(1);
}

describe("answers of the gateway's own", () => {
  it("asks for credentials with 407 when they are missing or wrong, HTTP and CONNECT", async () => {
    const wrong = `Basic ${Buffer.from("alice:wrong").toString("base64")}`;
    for (const auth of [null, wrong]) {
      const header = auth ? `Proxy-Authorization: ${auth}\r\n` : "";
      const { response } = await exchange(
        `GET ${origin.url}/ip HTTP/1.1\r\nHost: x\r\n${header}\r\n`,
      );
      expectOwnAnswer(response, 407, "http_request_denied");
      expect(response.headers.get("proxy-authenticate")).toEqual(['Basic realm="octoprox"']);
      const tunnel = await openConnect(gateway.proxyPort, `127.0.0.1:${origin.port}`, auth);
      tunnel.connection.destroy();
      expectOwnAnswer(tunnel.response, 407, "http_request_denied");
      expect(tunnel.response.headers.get("proxy-authenticate")).toEqual(['Basic realm="octoprox"']);
    }
    // curl reads the answer too.
    const result = await curl([
      "-x",
      `http://alice:nope@127.0.0.1:${gateway.proxyPort}`,
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      `${origin.url}/ip`,
    ]);
    expect(result.stdout).toBe("407");
  });

  it("keeps the connection after a 407 without a body, so the client can retry on it", async () => {
    const connection = await RawConnection.open(gateway.proxyPort);
    try {
      connection.write(`GET ${origin.url}/ip HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect((await connection.readResponse()).status).toBe(407);
      connection.write(
        `GET ${origin.url}/ip HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${PROXY_AUTH}\r\n\r\n`,
      );
      const second = await connection.readResponse();
      expect(second.status).toBe(200);
      expect(JSON.parse(second.body.toString())).toEqual({ ip: "127.0.0.8" });
    } finally {
      connection.destroy();
    }
  });

  it("answers malformed requests with 400 and closes, and keeps serving", async () => {
    const malformed = [
      "GARBAGE\r\n\r\n",
      "GET http://a/ HTTP/1.1 extra\r\n\r\n",
      `GET ${origin.url}/ip HTTP/1.1\r\nNo colon here\r\n\r\n`,
      `GET ${origin.url}/ip HTTP/1.1\r\nX-Folded: a\r\n  b\r\n\r\n`,
      `GET ${origin.url}/ip HTTP/1.1\r\nBad Name: x\r\n\r\n`,
      "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET https://example.com/ HTTP/1.1\r\n\r\n",
      "GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n",
      "GET http://exa mple.com/ HTTP/1.1\r\n\r\n",
      "GET http://[::1/ HTTP/1.1\r\n\r\n",
      "GET http://example.com:99999/ HTTP/1.1\r\n\r\n",
      `POST ${origin.url}/ip HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n`,
      `POST ${origin.url}/ip HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n`,
      `POST ${origin.url}/ip HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n`,
      "CONNECT example.com:0 HTTP/1.1\r\n\r\n",
      "CONNECT /path HTTP/1.1\r\n\r\n",
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
      Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x0d, 0x0a, 0x0d, 0x0a]),
    ];
    for (const bytes of malformed) {
      const { response, closed } = await exchange(bytes, true);
      expectOwnAnswer(response, 400, "http_request_error");
      expect(closed, String(bytes)).toBe(true);
    }
    // A chunked request body that breaks its framing: 400 before any answer began.
    const broken = await exchange(
      `POST ${origin.url}/ip HTTP/1.1\r\nProxy-Authorization: ${PROXY_AUTH}\r\n` +
        "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
    );
    expectOwnAnswer(broken.response, 400, "http_request_error");
    // Still serving.
    const after = await curl(["-x", gateway.proxyUrl, `${origin.url}/ip`]);
    expect(JSON.parse(after.stdout)).toEqual({ ip: "127.0.0.8" });
  });

  it("survives random bytes without an error or a crash", async () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 60; round++) {
      const bytes = Buffer.alloc(1 + Math.floor(random() * 3000));
      for (let index = 0; index < bytes.length; index++) bytes[index] = Math.floor(random() * 256);
      const tail = round % 2 === 0 ? "\r\n\r\n" : "";
      const connection = await RawConnection.open(gateway.proxyPort);
      connection.write(Buffer.concat([bytes, Buffer.from(tail)]));
      connection.end();
      await connection.waitUntil(() => connection.ended);
      connection.destroy();
    }
    const after = await curl(["-x", gateway.proxyUrl, `${origin.url}/ip`]);
    expect(JSON.parse(after.stdout)).toEqual({ ip: "127.0.0.8" });
    expect(gateway.lines().filter((line) => line.level === "error" || line.level === "fatal"))
      .toEqual([]);
  });

  it("answers a head over OCTOPROX_MAX_HEADER_BYTES with 431", async () => {
    const { response, closed } = await exchange(
      `GET ${origin.url}/ip HTTP/1.1\r\nX-Big: ${"a".repeat(4096)}\r\n\r\n`,
      true,
    );
    expectOwnAnswer(response, 431, "http_request_error");
    expect(closed).toBe(true);
    const result = await curl([
      "-x",
      gateway.proxyUrl,
      "-H",
      `X-Big: ${"b".repeat(3000)}`,
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      `${origin.url}/ip`,
    ]);
    expect(result.stdout).toBe("431");
  });

  it("refuses a destination the guard refuses with 403", async () => {
    const { response } = await exchange(
      `GET http://blocked.example/ HTTP/1.1\r\nProxy-Authorization: ${PROXY_AUTH}\r\n\r\n`,
    );
    expectOwnAnswer(response, 403, "destination_ip_prohibited");
    const tunnel = await openConnect(gateway.proxyPort, "blocked.example:443");
    tunnel.connection.destroy();
    expectOwnAnswer(tunnel.response, 403, "destination_ip_prohibited");
  });

  it("answers Expect: 100-continue itself and refuses other expectations (417)", async () => {
    const connection = await RawConnection.open(gateway.proxyPort);
    try {
      connection.write(
        `POST ${origin.url}/ip HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${PROXY_AUTH}\r\n` +
          "Expect: 100-continue\r\nContent-Length: 5\r\n\r\n",
      );
      const interim = await connection.readResponse();
      expect(interim.status).toBe(100);
      connection.write("hello");
      const final = await connection.readResponse();
      expect(final.status).toBe(200);
    } finally {
      connection.destroy();
    }
    const { response } = await exchange(
      `GET ${origin.url}/ip HTTP/1.1\r\nProxy-Authorization: ${PROXY_AUTH}\r\nExpect: magic\r\n\r\n`,
    );
    expectOwnAnswer(response, 417, "http_request_error");
  });
});

describe("bounds", () => {
  it("closes connections over OCTOPROX_MAX_CLIENT_CONNECTIONS at once", async () => {
    const bounded = await startGateway({
      upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
      env: { OCTOPROX_MAX_CLIENT_CONNECTIONS: "2" },
    });
    const held: RawConnection[] = [];
    try {
      for (let index = 0; index < 2; index++) {
        held.push(await RawConnection.open(bounded.proxyPort));
      }
      await waitUntil(
        async () =>
          (await metricValue(bounded.statusPort, "octoprox_gateway_connections_open")) === 2,
        { message: "two connections open" },
      );
      const extra = await RawConnection.open(bounded.proxyPort);
      const started = Date.now();
      expect((await extra.readToEnd(2_000)).length).toBe(0);
      expect(Date.now() - started).toBeLessThan(1_000);
      extra.destroy();
      expect(
        await metricValue(
          bounded.statusPort,
          'octoprox_gateway_connections_total{result="rejected"}',
        ),
      ).toBe(1);
      // The held ones still work.
      held[0].write(
        `GET ${origin.url}/ip HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${PROXY_AUTH}\r\n\r\n`,
      );
      expect((await held[0].readResponse()).status).toBe(200);
    } finally {
      for (const connection of held) connection.destroy();
      expect(await bounded.stop()).toBe(0);
    }
  });

  it("closes a connection idle for OCTOPROX_CLIENT_IDLE_TIMEOUT, and a head that drags on", async () => {
    const idle = await startGateway({
      upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
      env: { OCTOPROX_CLIENT_IDLE_TIMEOUT: "1" },
    });
    try {
      const silent = await RawConnection.open(idle.proxyPort);
      const dragging = await RawConnection.open(idle.proxyPort);
      dragging.write("GET http://example.com/ HTTP/1.1\r\n");
      const started = Date.now();
      const timer = setInterval(() => dragging.write("X-Slow: 1\r\n"), 200);
      try {
        await silent.waitUntil(() => silent.ended, 5_000);
        await dragging.waitUntil(() => dragging.ended, 5_000);
      } finally {
        clearInterval(timer);
      }
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      silent.destroy();
      dragging.destroy();
    } finally {
      expect(await idle.stop()).toBe(0);
    }
  });
});

describe("process", () => {
  it("keeps the proxy port closed and /ready 503 until the first feed, then binds", async () => {
    const port = await freePort();
    const unready = await startGateway({
      upstreams: [{ id: "tiny", scheme: "http", host: tinyproxy.host, port: tinyproxy.port }],
      env: { OCTOPROX_PROXY_PORT: String(port) },
      ready: "stdin",
    });
    try {
      const health = await fetch(`http://127.0.0.1:${unready.statusPort}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: "healthy", role: "gateway" });
      const notReady = await fetch(`http://127.0.0.1:${unready.statusPort}/ready`);
      expect(notReady.status).toBe(503);
      expect(await portAccepts("127.0.0.1", port)).toBe(false);
      expect(await unready.markReady()).toBe(port);
      const ready = await fetch(`http://127.0.0.1:${unready.statusPort}/ready`);
      expect(ready.status).toBe(200);
      expect(await portAccepts("127.0.0.1", port)).toBe(true);
      const metrics = await (await fetch(`http://127.0.0.1:${unready.statusPort}/metrics`)).text();
      expect(seriesValue(metrics, "octoprox_gateway_ready")).toBe(1);
      expect(metrics).toContain("# TYPE octoprox_gateway_requests_total counter");
    } finally {
      expect(await unready.stop()).toBe(0);
    }
  });

  it("refuses a bad setting with one line naming it and exit code 2", async () => {
    const child = spawnDeno(
      "testkit/gateway/fixture/serve.ts",
      gatewayEnv({ OCTOPROX_CONNECT_TIMEOUT: "soon" }),
    );
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toHaveLength(1);
    expect(stderr).toMatch(/^octoprox-gateway: OCTOPROX_CONNECT_TIMEOUT must be/);
  });
});
