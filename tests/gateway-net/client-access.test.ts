/**
 * Who may use the gateway, through the real gateway (gateway/main.ts under Deno) on a hand-made
 * feed, clients binding other loopback addresses as their own:
 *
 * - a project's allowed blocks refuse a client from elsewhere with 403 (HTTP, CONNECT) or a
 *   failed sub-negotiation (SOCKS5) before any upstream is dialled, counted under its kind;
 * - a client without credentials from a password-less block is the project; X-Octoprox-Country
 *   chooses its exit as `-cc-` does, alone or beside a password, and no X-Octoprox field
 *   reaches the upstream or the origin; a bad value is 400 naming the header; SOCKS5's
 *   no-authentication method works by address;
 * - a PROXY protocol header (v1, v2) from OCTOPROX_TRUSTED_PROXIES names the client the rules
 *   see; one from anyone else, or malformed, is refused (400 and closed; SOCKS5: closed);
 * - strict mode: beyond loopback, a first feed with a project open to anyone stops the gateway
 *   naming it, a later one turns its password-less access off; a bad OCTOPROX_TRUSTED_PROXIES
 *   stops it at start naming the variable.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultProxy, startFaultProxy } from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { DENO_BIN, gatewayRunArgs } from "../../scripts/gateway-command.ts";
import { encodeProxyV1, encodeProxyV2 } from "../../shared/proxy-protocol/proxy-header.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";
import {
  type FeedGateway,
  publishApplied,
  publishFeed,
  startFeedGateway,
  startLoopbackGateway,
} from "../../testkit/gateway/feed-gateway.ts";
import { basicAuth, RawConnection, type RawResponse } from "../../testkit/clients/raw-http.ts";
import { gatewayEnv } from "../../testkit/gateway/fixture-gateway.ts";
import { ROOT } from "../../testkit/processes.ts";

let bed: FeedBed;
let origin: Origin;
/** The fenced project's upstream; the password-less project's DE and US exits. */
let plain: FaultProxy;
let de: FaultProxy;
let us: FaultProxy;
let gateway: FeedGateway;
let proxyPort: number;
let socksPort: number;

const FENCED = "fenced:fenced-pass";
const KEYLESS = "keyless:keyless-pass";

const spec = () => ({
  projects: [
    { id: "fenced", username: "fenced", password: "fenced-pass", allowedCidrs: ["127.0.0.5/32"] },
    {
      id: "keyless",
      username: "keyless",
      password: "keyless-pass",
      passwordlessCidrs: ["127.0.0.7/32"],
    },
  ],
  connectors: [
    {
      id: "c-fenced",
      projectId: "fenced",
      proxies: [{ id: "fenced-x", scheme: "http" as const, host: plain.host, port: plain.port }],
    },
    {
      id: "c-keyless",
      projectId: "keyless",
      proxies: [
        { id: "de-x", scheme: "http" as const, host: de.host, port: de.port, country: "DE" },
        { id: "us-x", scheme: "http" as const, host: us.host, port: us.port, country: "US" },
      ],
    },
  ],
});

beforeAll(async () => {
  [bed, origin, plain, de, us] = await Promise.all([
    feedBed(),
    startOrigin(),
    startFaultProxy(),
    startFaultProxy({ bindAddress: "127.0.0.2" }),
    startFaultProxy({ bindAddress: "127.0.0.3" }),
  ]);
  // The test's own connections from 127.0.0.1 are the trusted balancer's.
  ({ gateway, proxyPort } = await startLoopbackGateway(bed, spec(), {
    OCTOPROX_TRUSTED_PROXIES: "127.0.0.1",
  }));
  socksPort = await gateway.socksPort();
});

afterAll(async () => {
  expect(await gateway?.stop()).toBe(0);
  await Promise.all([plain?.close(), de?.close(), us?.close(), origin?.close()]);
  await bed?.close();
});

interface Request {
  /** The client's own address (a loopback one). */
  from?: string;
  login?: string;
  headers?: string[];
  /** Bytes before the request: a PROXY protocol header. */
  prefix?: Uint8Array;
  path?: string;
}

/** One GET through the gateway on a connection of its own. */
async function get(request: Request): Promise<RawResponse> {
  const connection = await RawConnection.open(proxyPort, "127.0.0.1", request.from);
  try {
    if (request.prefix) connection.write(Buffer.from(request.prefix));
    connection.write(
      `GET ${origin.url}${
        request.path ?? "/ip"
      } HTTP/1.1\r\nHost: ${origin.host}:${origin.port}\r\n` +
        (request.login ? `Proxy-Authorization: ${basicAuth(request.login)}\r\n` : "") +
        (request.headers ?? []).map((line) => `${line}\r\n`).join("") +
        "Connection: close\r\n\r\n",
    );
    return await connection.readResponse();
  } finally {
    connection.destroy();
  }
}

const exit = (response: RawResponse) => {
  expect(response.status, response.body.toString()).toBe(200);
  return (JSON.parse(response.body.toString()) as { ip: string }).ip;
};

/** A CONNECT to the origin, then a GET of /ip inside the tunnel: the exit, or the refusal. */
async function connectThrough(request: Request): Promise<{ status: number; exit?: string }> {
  const connection = await RawConnection.open(proxyPort, "127.0.0.1", request.from);
  try {
    const authority = `${origin.host}:${origin.port}`;
    connection.write(
      `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n` +
        (request.login ? `Proxy-Authorization: ${basicAuth(request.login)}\r\n` : "") +
        (request.headers ?? []).map((line) => `${line}\r\n`).join("") + "\r\n",
    );
    await connection.waitUntil(() => connection.buffered.includes("\r\n\r\n"));
    const end = connection.buffered.indexOf("\r\n\r\n");
    const status = Number(connection.buffered.subarray(0, end).toString("latin1").split(" ")[1]);
    if (status !== 200) return { status };
    await connection.take(end + 4);
    connection.write(`GET /ip HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`);
    return { status, exit: exit(await connection.readResponse()) };
  } finally {
    connection.destroy();
  }
}

/**
 * A SOCKS5 greeting offering `methods` (after `prefix`), then username/password when chosen,
 * then CONNECT to the origin and a GET of /ip through it. What the gateway answered at each step.
 */
async function socks(
  options: { from?: string; prefix?: Uint8Array; methods: number[]; login?: string },
): Promise<
  { method?: number; authStatus?: number; reply?: number; exit?: string; closed?: boolean }
> {
  const connection = await RawConnection.open(socksPort, "127.0.0.1", options.from);
  try {
    if (options.prefix) connection.write(Buffer.from(options.prefix));
    connection.write(Buffer.from([5, options.methods.length, ...options.methods]));
    await connection.waitUntil(() => connection.buffered.length >= 2 || connection.ended);
    if (connection.buffered.length < 2) return { closed: true };
    const [, method] = await connection.take(2);
    let authStatus: number | undefined;
    if (method === 2) {
      const [user, pass] = options.login!.split(":").map((part) => Buffer.from(part));
      connection.write(
        Buffer.concat([Buffer.from([1, user.length]), user, Buffer.from([pass.length]), pass]),
      );
      [, authStatus] = await connection.take(2);
      if (authStatus !== 0) return { method, authStatus };
    } else if (method !== 0) return { method };
    const address = Buffer.from(origin.host.split(".").map(Number));
    const port = Buffer.from([origin.port >> 8, origin.port & 0xff]);
    connection.write(Buffer.concat([Buffer.from([5, 1, 0, 1]), address, port]));
    const head = await connection.take(10);
    if (head[1] !== 0) return { method, authStatus, reply: head[1] };
    connection.write(
      `GET /ip HTTP/1.1\r\nHost: ${origin.host}:${origin.port}\r\nConnection: close\r\n\r\n`,
    );
    return { method, authStatus, reply: 0, exit: exit(await connection.readResponse()) };
  } finally {
    connection.destroy();
  }
}

const failures = (kind: string) =>
  gateway.metric(`octoprox_gateway_failures_total{kind="${kind}"}`);

describe("a project's allowed blocks", () => {
  it("refuse a client from elsewhere with 403 before any upstream is dialled", async () => {
    const dialled = plain.connectionsSeen;
    const counted = await failures("client_address_denied");
    const refused = await get({ from: "127.0.0.6", login: FENCED });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("proxy-status")?.[0]).toMatch(/error=http_request_denied/);
    expect(refused.body.toString()).toContain("Client address not allowed for this project");
    expect((await connectThrough({ from: "127.0.0.6", login: FENCED })).status).toBe(403);
    expect(await socks({ from: "127.0.0.6", methods: [2], login: FENCED })).toEqual({
      method: 2,
      authStatus: 1,
    });
    // The gateway's own loopback address is no exception.
    expect((await get({ login: FENCED })).status).toBe(403);
    expect(plain.connectionsSeen).toBe(dialled);
    expect(await failures("client_address_denied")).toBe(counted + 4);

    // From inside the list the same credentials are served, through that upstream.
    expect(exit(await get({ from: "127.0.0.5", login: FENCED }))).toBe("127.0.0.1");
    expect(plain.connectionsSeen).toBeGreaterThan(dialled);
    expect((await socks({ from: "127.0.0.5", methods: [2], login: FENCED })).reply).toBe(0);
  });
});

describe("password-less access and header options", () => {
  it("serves a client without credentials by its address, X-Octoprox-Country choosing the exit", async () => {
    for (let i = 0; i < 3; i++) {
      expect(exit(await get({ from: "127.0.0.7", headers: ["X-Octoprox-Country: DE"] })))
        .toBe("127.0.0.2");
      expect(exit(await get({ from: "127.0.0.7", headers: ["x-octoprox-country: us"] })))
        .toBe("127.0.0.3");
    }
    expect(
      await connectThrough({ from: "127.0.0.7", headers: ["X-Octoprox-Country: DE"] }),
    ).toEqual({ status: 200, exit: "127.0.0.2" });
    // Without an option it is served by either exit; from elsewhere it needs credentials.
    expect(["127.0.0.2", "127.0.0.3"]).toContain(exit(await get({ from: "127.0.0.7" })));
    const stranger = await get({ from: "127.0.0.8", headers: ["X-Octoprox-Country: DE"] });
    expect(stranger.status).toBe(407);
  });

  it("routes header options as username options, beside a password too", async () => {
    for (const [country, exitAddress] of [["de", "127.0.0.2"], ["us", "127.0.0.3"]]) {
      const byUsername = exit(
        await get({ from: "127.0.0.9", login: `keyless-cc-${country}:keyless-pass` }),
      );
      const byHeader = exit(
        await get({
          from: "127.0.0.9",
          login: KEYLESS,
          headers: [`X-Octoprox-Country: ${country}`],
        }),
      );
      expect([byUsername, byHeader]).toEqual([exitAddress, exitAddress]);
    }
    const clash = await get({
      login: "keyless-cc-us:keyless-pass",
      headers: ["X-Octoprox-Country: de"],
    });
    expect(clash.status).toBe(400);
    expect(clash.body.toString()).toMatch(/X-Octoprox-Country conflicts with the username's -cc-/);
  });

  it("keeps every X-Octoprox field from the upstream and the origin", async () => {
    const seen = de.requests.length;
    const answer = await get({
      from: "127.0.0.7",
      path: "/headers",
      headers: [
        "X-Octoprox-Country: DE",
        "X-Octoprox-Session: s-1",
        "X-Octoprox-Session-Time: 5",
        "X-Octoprox-City:",
        "X-Kept: yes",
      ],
    });
    expect(answer.status).toBe(200);
    const received = (JSON.parse(answer.body.toString()) as { headers: Record<string, string> })
      .headers;
    expect(received["x-kept"]).toBe("yes");
    expect(Object.keys(received).filter((name) => name.startsWith("x-octoprox"))).toEqual([]);
    const upstreamSaw = de.requests.slice(seen);
    expect(upstreamSaw).toHaveLength(1);
    expect(upstreamSaw[0].headers).toContain("x-kept");
    expect(upstreamSaw[0].headers!.filter((name) => name.startsWith("x-octoprox"))).toEqual([]);
  });

  it("refuses an option header written wrong with 400 naming it, before any upstream", async () => {
    const dialled = de.connectionsSeen + us.connectionsSeen;
    const cases: [string[], RegExp][] = [
      [["X-Octoprox-Country: deu"], /^X-Octoprox-Country must be a two-letter/],
      [["X-Octoprox-State: ny"], /^X-Octoprox-State and X-Octoprox-City need a country/],
      [["X-Octoprox-Session-Time: 0"], /^X-Octoprox-Session-Time must be whole minutes/],
      [["X-Octoprox-Region: eu"], /^X-Octoprox-Region is not an Octoprox option header/],
    ];
    for (const [headers, reason] of cases) {
      const answer = await get({ from: "127.0.0.7", headers });
      expect(answer.status, headers.join()).toBe(400);
      expect(answer.headers.get("proxy-status")?.[0]).toMatch(/error=http_request_error/);
      expect(answer.body.toString()).toMatch(reason);
    }
    expect(de.connectionsSeen + us.connectionsSeen).toBe(dialled);
  });

  it("takes SOCKS5's no-authentication method by address, and only there", async () => {
    const byAddress = await socks({ from: "127.0.0.7", methods: [0] });
    expect(byAddress).toMatchObject({ method: 0, reply: 0 });
    expect(["127.0.0.2", "127.0.0.3"]).toContain(byAddress.exit);
    // A client offering both with credentials configured gets username/password.
    expect(await socks({ from: "127.0.0.7", methods: [0, 2], login: "keyless-cc-us:keyless-pass" }))
      .toMatchObject({ method: 2, authStatus: 0, exit: "127.0.0.3" });
    expect(await socks({ from: "127.0.0.8", methods: [0] })).toEqual({ method: 0xff });
  });
});

describe("the PROXY protocol", () => {
  const source = (address: string) => ({ address, port: 50_000, family: 4 as const });
  const gatewayEnd = () => ({ address: "127.0.0.1", port: proxyPort, family: 4 as const });

  it("takes the client's address from a trusted balancer's header, v1 and v2", async () => {
    for (const encode of [encodeProxyV1, encodeProxyV2]) {
      const allowed = await get({
        prefix: encode(source("127.0.0.5"), gatewayEnd()),
        login: FENCED,
      });
      expect(exit(allowed)).toBe("127.0.0.1");
      const refused = await get({
        prefix: encode(source("127.0.0.6"), gatewayEnd()),
        login: FENCED,
      });
      expect(refused.status).toBe(403);
      // The header's address selects the password-less project too.
      const byAddress = await get({
        prefix: encode(source("127.0.0.7"), gatewayEnd()),
        headers: ["X-Octoprox-Country: US"],
      });
      expect(exit(byAddress)).toBe("127.0.0.3");
    }
    const v6 = encodeProxyV2(
      { address: "::ffff:127.0.0.5", port: 1, family: 6 },
      { address: "::1", port: proxyPort, family: 6 },
    );
    expect(exit(await get({ prefix: v6, login: FENCED }))).toBe("127.0.0.1");
  });

  it("takes the balancer itself as the client for LOCAL, UNKNOWN and no header", async () => {
    for (const prefix of [encodeProxyV2(), encodeProxyV1(), undefined]) {
      expect((await get({ prefix, login: FENCED })).status).toBe(403);
      expect(exit(await get({ prefix, login: KEYLESS, headers: ["X-Octoprox-Country: DE"] })))
        .toBe("127.0.0.2");
    }
  });

  it("names the client on the SOCKS5 listener too", async () => {
    const header = encodeProxyV2(source("127.0.0.7"), gatewayEnd());
    expect(await socks({ prefix: header, methods: [0] })).toMatchObject({ method: 0, reply: 0 });
    const fenced = encodeProxyV1(source("127.0.0.6"), gatewayEnd());
    expect(await socks({ prefix: fenced, methods: [2], login: FENCED })).toEqual({
      method: 2,
      authStatus: 1,
    });
  });

  it("refuses a header from an untrusted address: 400 and closed, SOCKS5 closed unanswered", async () => {
    const dialled = plain.connectionsSeen + de.connectionsSeen + us.connectionsSeen;
    for (const encode of [encodeProxyV1, encodeProxyV2]) {
      const connection = await RawConnection.open(proxyPort, "127.0.0.1", "127.0.0.5");
      connection.write(Buffer.from(encode(source("127.0.0.5"), gatewayEnd())));
      connection.write(
        `GET ${origin.url}/ip HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${
          basicAuth(FENCED)
        }\r\n\r\n`,
      );
      const answer = await connection.readResponse();
      expect(answer.status).toBe(400);
      expect(answer.body.toString()).toContain("PROXY protocol header from an address not trusted");
      await connection.readToEnd();
      expect(connection.ended).toBe(true);
      connection.destroy();
    }
    const header = encodeProxyV2(source("127.0.0.7"), gatewayEnd());
    expect(await socks({ from: "127.0.0.7", prefix: header, methods: [0] })).toEqual({
      closed: true,
    });
    expect(plain.connectionsSeen + de.connectionsSeen + us.connectionsSeen).toBe(dialled);
    // One line per peer, though 127.0.0.5 sent two.
    const peers = () =>
      gateway.lines().filter((line) => line.msg === "PROXY protocol header refused")
        .map((line) => line.peer).sort();
    await waitUntil(() => peers().length === 2, { message: "both refusals logged" });
    expect(peers()).toEqual(["127.0.0.5", "127.0.0.7"]);
  });

  it("refuses a malformed header even from a trusted balancer", async () => {
    const answer = await get({
      prefix: Uint8Array.from(Buffer.from("PROXY TCP4 127.0.0.5 nowhere 1 2\r\n")),
      login: FENCED,
    });
    expect(answer.status).toBe(400);
    expect(answer.body.toString()).toContain("PROXY v1 TCP4 address is not IPv4");
    const otherVersion = encodeProxyV2(source("127.0.0.7"), gatewayEnd());
    otherVersion[12] = 0x31;
    expect(await socks({ prefix: otherVersion, methods: [0] })).toEqual({ closed: true });
  });
});

describe("strict mode", () => {
  const open = () => ({
    projects: [{
      id: "wide-open",
      username: "wideopen",
      password: "wide-pass",
      passwordlessCidrs: ["0.0.0.0/0"],
    }],
    connectors: [{
      id: "c-open",
      projectId: "wide-open",
      proxies: [{ id: "open-x", scheme: "http" as const, host: plain.host, port: plain.port }],
    }],
  });

  it("stops a gateway listening beyond loopback whose first feed has a project open to anyone", async () => {
    const strictBed = await feedBed();
    try {
      await strictBed.lead();
      await publishFeed(strictBed, open());
      const strict = await startFeedGateway(strictBed, { OCTOPROX_GATEWAY_HOST: "0.0.0.0" });
      const code = await new Promise<number | null>((resolve) => {
        if (strict.child.exitCode !== null) resolve(strict.child.exitCode);
        else strict.child.once("exit", resolve);
      });
      expect(code).toBe(1);
      const fatal = strict.lines().filter((line) => line.level === "fatal");
      expect(fatal).toHaveLength(1);
      expect(fatal[0]).toMatchObject({
        msg: "Refusing to start: a project can be used without a password from any address " +
          "(strict mode: the gateway listens beyond loopback)",
        projects: "wide-open (wide-open)",
        host: "0.0.0.0",
      });
      expect(strict.lines().map((line) => line.msg)).not.toContain("Proxy listener bound");
    } finally {
      await strictBed.close();
    }
  });

  it("turns a later open project's password-less access off, logged once; its password still works", async () => {
    const strictBed = await feedBed();
    let strict: FeedGateway | undefined;
    try {
      ({ gateway: strict } = await startLoopbackGateway(strictBed, spec(), {
        OCTOPROX_GATEWAY_HOST: "0.0.0.0",
      }));
      const port = await strict.proxyPort();
      await publishApplied(strictBed, strict, open());
      // Another project changes the projects; the open one, still there, is not logged again.
      await publishApplied(strictBed, strict, {
        projects: [...open().projects, spec().projects[0]],
        connectors: [...open().connectors, spec().connectors[0]],
      });
      const request = async (login?: string) => {
        const connection = await RawConnection.open(port);
        connection.write(
          `GET ${origin.url}/ip HTTP/1.1\r\nHost: x\r\n` +
            (login ? `Proxy-Authorization: ${basicAuth(login)}\r\n` : "") +
            "Connection: close\r\n\r\n",
        );
        const answer = await connection.readResponse();
        connection.destroy();
        return answer;
      };
      const refused = await request();
      expect(refused.status).toBe(403);
      expect(refused.body.toString()).toContain("(strict mode)");
      expect((await request("wideopen:wide-pass")).status).toBe(200);
      const warned = strict.lines().filter((line) => line.msg.startsWith("Strict mode:"));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({ level: "warn", projects: "wide-open (wide-open)" });
    } finally {
      expect(await strict?.stop()).toBe(0);
      await strictBed.close();
    }
  });

  it("a bad OCTOPROX_TRUSTED_PROXIES stops the gateway at start, naming it", async () => {
    const env = gatewayEnv({ OCTOPROX_TRUSTED_PROXIES: "10.0.0.0/8, 10.0.0.300" });
    const child = spawn(DENO_BIN, gatewayRunArgs(env), {
      cwd: ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    let stdout = "";
    child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.stdout!.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code).toBe(2);
    expect(stderr.trim().split("\n")).toEqual([
      "octoprox-gateway: OCTOPROX_TRUSTED_PROXIES must be a comma-separated list of CIDR blocks " +
      "or addresses such as 10.0.0.5,10.1.0.0/16",
    ]);
    expect(stdout).toBe("");
  });
});
