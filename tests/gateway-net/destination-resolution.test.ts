/**
 * DNS rebinding between the gateway's lookup and the upstream's (OCTOPROX_DESTINATION_RESOLUTION).
 * A DNS server of the test's own answers each name's A lookups in turn: first an allowed address
 * (127.0.0.2, let through by OCTOPROX_DESTINATION_ALLOW_CIDRS), then a forbidden one (127.0.0.3,
 * loopback), then allowed again, and so on. Two listeners on the same port stand for them and
 * count what reaches them. The gateway (the fixture entry with the real guard, pointed at that
 * server) sends requests through real upstreams: Debian's tinyproxy for HTTP and CONNECT, and our
 * own proxy (testkit/upstreams/fault-proxy.ts, resolving names through the same server) for SOCKS5 and
 * for the limit. A hosts file of the fixtures' own stands for /etc/hosts: names the DNS server
 * does not know, which an upstream on the same machine resolves through it.
 *
 * `gateway` mode: the gateway resolves once, checks, and sends the upstream the address; the
 * forbidden listener is never reached, over HTTP, CONNECT and SOCKS5. `upstream` mode (the
 * default): the gateway checks its own lookup and sends the name on; an upstream with a resolver
 * of its own resolves it again and reaches the forbidden listener. That is the mode's limit,
 * documented here as it behaves.
 */
import dgram from "node:dgram";
import { Resolver } from "node:dns/promises";
import { readFile } from "node:fs/promises";
import http from "node:http";
import type net from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FaultProxy, startFaultProxy } from "../../testkit/upstreams/fault-proxy.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { freePort } from "../../testkit/ports.ts";
import { parseHostsFile } from "../../shared/routing/hosts-file.ts";
import { DnsRcode, DnsType, readQuery, writeAnswer } from "../../shared/dns/message.ts";
import { parseIPv4 } from "../../shared/net/ip.ts";
import {
  CREDENTIALS,
  type FixtureUpstream,
  startGateway,
  type TestGateway,
} from "../../testkit/gateway/fixture-gateway.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { ROOT } from "../../testkit/processes.ts";

const ALLOWED = "127.0.0.2";
const FORBIDDEN = "127.0.0.3";

/** A DNS server answering A lookups of any name under `.rebind.test` by turns. */
interface RebindingDns {
  port: number;
  /** A lookups per name so far. */
  lookups(name: string): number;
  close(): Promise<void>;
}

async function startRebindingDns(): Promise<RebindingDns> {
  const socket = dgram.createSocket("udp4");
  const counts = new Map<string, number>();
  /** The answer of each query id, so a resent query is answered the same (not a new turn). */
  const answered = new Map<string, string>();
  socket.on("message", (query, peer) => {
    const read = readQuery(query);
    if (!read.ok) return;
    const { header, question, questionBytes } = read;
    const { name } = question;
    let address: string | undefined;
    if (question.type === DnsType.a && name.endsWith(".rebind.test")) {
      const key = `${peer.address}:${peer.port}:${header.id}:${name}`;
      address = answered.get(key);
      if (address === undefined) {
        const turn = counts.get(name) ?? 0;
        counts.set(name, turn + 1);
        address = turn % 2 === 0 ? ALLOWED : FORBIDDEN;
        answered.set(key, address);
      }
    }
    // NXDOMAIN for a name not ours; TTL 0 on an answer: nothing may keep it.
    const answer = writeAnswer({
      id: header.id,
      queryFlags: header.flags,
      rcode: name.endsWith(".rebind.test") ? DnsRcode.noError : DnsRcode.nxDomain,
      questionBytes,
      ...(address === undefined ? {} : { a: { address: parseIPv4(address)!, ttlSeconds: 0 } }),
    });
    socket.send(answer, peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return {
    port: socket.address().port,
    lookups: (name) => counts.get(name) ?? 0,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

/** A plain HTTP origin on one address that counts the connections reaching it. */
interface CountingOrigin {
  connections: number;
  /** The Host fields of the requests it answered. */
  hosts: string[];
  close(): Promise<void>;
}

function startCountingOrigin(host: string, port: number, label: string): Promise<CountingOrigin> {
  const state: CountingOrigin = {
    connections: 0,
    hosts: [],
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((request, response) => {
    state.hosts.push(request.headers.host ?? "");
    response.setHeader("Connection", "close");
    response.end(label);
  });
  server.on("connection", (_socket: net.Socket) => {
    state.connections++;
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve(state));
  });
}

let dns: RebindingDns;
let allowed: CountingOrigin;
let forbidden: CountingOrigin;
let originPort: number;
let tinyproxy: Tinyproxy;
/** Our own proxy, resolving names through the test's DNS server (a proxy's own resolver). */
let ownProxy: FaultProxy;

beforeAll(async () => {
  dns = await startRebindingDns();
  // The same port on both addresses: a name's answer alone decides which one a request reaches.
  for (let attempt = 1;; attempt++) {
    originPort = await freePort(ALLOWED);
    try {
      allowed = await startCountingOrigin(ALLOWED, originPort, "allowed");
      forbidden = await startCountingOrigin(FORBIDDEN, originPort, "forbidden");
      break;
    } catch (error) {
      await allowed?.close();
      if (attempt >= 5) throw error;
    }
  }
  tinyproxy = await startTinyproxy();
  const resolver = new Resolver({ timeout: 2_000, tries: 1 });
  resolver.setServers([`127.0.0.1:${dns.port}`]);
  ownProxy = await startFaultProxy({
    resolve: async (name) => (await resolver.resolve4(name).catch(() => []))[0],
  });
});

afterAll(async () => {
  await ownProxy?.close();
  await tinyproxy?.close();
  await forbidden?.close();
  await allowed?.close();
  await dns?.close();
});

function upstreamOf(id: string, proxy: { host: string; port: number }, scheme: "http" | "socks5") {
  return { id, scheme, host: proxy.host, port: proxy.port } satisfies FixtureUpstream;
}

async function gatewayWith(
  resolution: "upstream" | "gateway",
  upstream: FixtureUpstream,
  env: Record<string, string> = {},
): Promise<{ gateway: TestGateway; socksPort: number }> {
  const gateway = await startGateway({
    upstreams: [upstream],
    env: {
      FIXTURE_NAMESERVER: `127.0.0.1:${dns.port}`,
      OCTOPROX_DESTINATION_RESOLUTION: resolution,
      OCTOPROX_DESTINATION_ALLOW_CIDRS: `${ALLOWED}/32`,
      ...env,
    },
  });
  const socks = await gateway.waitForLine((line) => line.msg === "SOCKS5 listener bound");
  return { gateway, socksPort: Number(socks.port) };
}

const login = `${CREDENTIALS.username}:${CREDENTIALS.password}`;

/** A plain HTTP request through the gateway's HTTP listener (`tunnel`: through CONNECT). */
function viaHttp(gateway: TestGateway, url: string, tunnel = false) {
  return curl([...(tunnel ? ["-p"] : []), "-x", gateway.proxyUrl, url]);
}

/** The status a GET of `url` through the gateway's HTTP listener gets. */
async function statusVia(gateway: TestGateway, url: string): Promise<string> {
  return (await curl(["-x", gateway.proxyUrl, "-o", "/dev/null", "-w", "%{http_code}", url]))
    .stdout;
}

function viaSocks(socksPort: number, url: string) {
  return curl(["--socks5-hostname", `127.0.0.1:${socksPort}`, "--proxy-user", login, url]);
}

describe("OCTOPROX_DESTINATION_RESOLUTION=gateway", () => {
  it("says so at start, and sends tinyproxy the checked address: HTTP and CONNECT never reach the forbidden listener", async () => {
    const { gateway } = await gatewayWith("gateway", upstreamOf("tiny", tinyproxy, "http"));
    try {
      const started = await gateway.waitForLine((line) =>
        line.destination_resolution !== undefined
      );
      expect(started.destination_resolution).toBe("gateway");
      const logBefore = (await tinyproxy.log()).length;
      const before = forbidden.connections;
      const hostsBefore = allowed.hosts.length;
      for (
        const [name, tunnel] of [["http.gw.rebind.test", false], [
          "connect.gw.rebind.test",
          true,
        ]] as const
      ) {
        // Twice each: the second request is answered from what the first lookup checked (or,
        // past the guard's cache, from a new lookup it checks again); never the forbidden one.
        for (let round = 0; round < 2; round++) {
          const result = await viaHttp(gateway, `http://${name}:${originPort}/`, tunnel);
          expect(result.stdout, result.stderr).toBe("allowed");
        }
        // The gateway looked the name up once; tinyproxy had nothing to look up.
        expect(dns.lookups(name)).toBe(1);
      }
      expect(forbidden.connections).toBe(before);
      // The gateway sent the client's Host with the address's URI, but tinyproxy writes Host from
      // the URI (as RFC 9112 section 3.2.2 has a proxy do): the origin saw the address for plain
      // HTTP. Inside the CONNECT tunnel the client's own Host went through untouched.
      expect(allowed.hosts.slice(hostsBefore)).toEqual([
        `${ALLOWED}:${originPort}`,
        `${ALLOWED}:${originPort}`,
        `connect.gw.rebind.test:${originPort}`,
        `connect.gw.rebind.test:${originPort}`,
      ]);
      const log = (await tinyproxy.log()).slice(logBefore);
      expect(log).toContain(`${ALLOWED}:${originPort}`);
      expect(log).not.toContain("rebind.test");
    } finally {
      await gateway.stop();
    }
  });

  it("sends a SOCKS5 upstream the address (IPv4 address type), and HTTP and CONNECT through it too", async () => {
    const { gateway, socksPort } = await gatewayWith(
      "gateway",
      upstreamOf("own", ownProxy, "socks5"),
    );
    try {
      const before = forbidden.connections;
      const seen = ownProxy.requests.length;
      const name = "socks.gw.rebind.test";
      for (let round = 0; round < 2; round++) {
        const result = await viaSocks(socksPort, `http://${name}:${originPort}/`);
        expect(result.stdout, result.stderr).toBe("allowed");
      }
      const forwarded = await viaHttp(gateway, `http://http-socks.gw.rebind.test:${originPort}/`);
      expect(forwarded.stdout, forwarded.stderr).toBe("allowed");
      expect(forbidden.connections).toBe(before);
      expect(dns.lookups(name)).toBe(1);
      // Our proxy, which would resolve a name by itself (and get the forbidden answer), was sent
      // the checked address every time; the forwarded request kept the client's Host.
      const requests = ownProxy.requests.slice(seen);
      expect(requests.map((request) => [request.protocol, request.host])).toEqual([
        ["socks5", ALLOWED],
        ["socks5", ALLOWED],
        ["socks5", ALLOWED],
      ]);
      expect(allowed.hosts.at(-1)).toBe(`http-socks.gw.rebind.test:${originPort}`);
    } finally {
      await gateway.stop();
    }
  });

  it("refuses a name whose only address is forbidden, and one that does not resolve", async () => {
    const { gateway, socksPort } = await gatewayWith(
      "gateway",
      upstreamOf("tiny", tinyproxy, "http"),
    );
    try {
      const before = forbidden.connections;
      const name = "second.gw.rebind.test";
      // Burn the allowed turn without the gateway: its own first lookup then gets the forbidden.
      const resolver = new Resolver();
      resolver.setServers([`127.0.0.1:${dns.port}`]);
      expect(await resolver.resolve4(name)).toEqual([ALLOWED]);
      const refused = await statusVia(gateway, `http://${name}:${originPort}/`);
      expect(refused).toBe("403");
      const missing = await statusVia(gateway, `http://nowhere.example.test:${originPort}/`);
      expect(missing).toBe("502");
      // SOCKS5: host unreachable (4) for the name without an address; curl says so.
      const socks = await viaSocks(socksPort, `http://nowhere.example.test:${originPort}/`);
      expect(socks.code).not.toBe(0);
      expect(socks.stderr).toMatch(/\(4\)|[Hh]ost unreachable/);
      expect(forbidden.connections).toBe(before);
    } finally {
      await gateway.stop();
    }
  });
});

describe("OCTOPROX_DESTINATION_RESOLUTION=upstream (the default): the limit", () => {
  it("says so at start, and an upstream resolving the name itself reaches what the guard never saw", async () => {
    const { gateway, socksPort } = await gatewayWith(
      "upstream",
      upstreamOf("own", ownProxy, "socks5"),
    );
    try {
      const started = await gateway.waitForLine((line) =>
        line.destination_resolution !== undefined
      );
      expect(started.destination_resolution).toBe("upstream");
      const before = forbidden.connections;
      const seen = ownProxy.requests.length;
      // The gateway's lookup answers the allowed address, so the guard lets the name through;
      // the upstream, sent the name, looks it up again and gets the forbidden one.
      const socks = await viaSocks(socksPort, `http://socks.up.rebind.test:${originPort}/`);
      expect(socks.stdout, socks.stderr).toBe("forbidden");
      const forwarded = await viaHttp(gateway, `http://http.up.rebind.test:${originPort}/`);
      expect(forwarded.stdout, forwarded.stderr).toBe("forbidden");
      expect(dns.lookups("socks.up.rebind.test")).toBe(2);
      expect(dns.lookups("http.up.rebind.test")).toBe(2);
      expect(forbidden.connections).toBe(before + 2);
      expect(ownProxy.requests.slice(seen).map((request) => request.host)).toEqual([
        "socks.up.rebind.test",
        "http.up.rebind.test",
      ]);
    } finally {
      await gateway.stop();
    }
  });

  it("hands tinyproxy the name, which it resolves with its own resolver", async () => {
    const { gateway } = await gatewayWith("upstream", upstreamOf("tiny", tinyproxy, "http"));
    try {
      const name = "tiny.up.rebind.test";
      const result = await viaHttp(gateway, `http://${name}:${originPort}/`, true);
      // tinyproxy asks the system's resolver, which knows nothing of the name: the gateway's
      // check said nothing about where tinyproxy would have gone.
      expect(result.stdout).not.toBe("allowed");
      expect(dns.lookups(name)).toBe(1);
      expect(await tinyproxy.log()).toContain(`${name}:${originPort}`);
    } finally {
      await gateway.stop();
    }
  });
});

describe("the hosts file (the fixtures' own here, /etc/hosts in a gateway)", () => {
  const hostsFile = join(ROOT, "testkit", "gateway", "fixture", "hosts");

  it("upstream mode: a name only the hosts file maps inward is refused, though DNS does not know it", async () => {
    // An upstream on the same machine, resolving through the same hosts file.
    const hosts = parseHostsFile(await readFile(hostsFile, "utf8"));
    const sameMachine = await startFaultProxy({
      resolve: (name) => Promise.resolve(hosts.get(name.toLowerCase().replace(/\.$/, ""))?.[0]),
    });
    const { gateway, socksPort } = await gatewayWith(
      "upstream",
      upstreamOf("same", sameMachine, "socks5"),
      { FIXTURE_HOSTS_FILE: hostsFile },
    );
    try {
      const before = forbidden.connections;
      for (const name of ["inward.hosts.test", "INWARD.Hosts.test.", "inward-alias.hosts.test"]) {
        const refused = await statusVia(gateway, `http://${name}:${originPort}/`);
        expect(refused, name).toBe("403");
        const socks = await viaSocks(socksPort, `http://${name}:${originPort}/`);
        expect(socks.code, name).not.toBe(0);
        expect(socks.stderr, name).toMatch(/\(2\)|not allowed/);
      }
      expect(sameMachine.requests).toEqual([]);
      expect(forbidden.connections).toBe(before);
      // Asked directly, that upstream does reach the name's address: the refusal was the guard's.
      const direct = await curl([
        "--socks5-hostname",
        `${sameMachine.host}:${sameMachine.port}`,
        `http://inward.hosts.test:${originPort}/`,
      ]);
      expect(direct.stdout).toBe("forbidden");
    } finally {
      await gateway.stop();
      await sameMachine.close();
    }
  });

  it("gateway mode: a name the hosts file gives is sent on as its address", async () => {
    const { gateway } = await gatewayWith("gateway", upstreamOf("tiny", tinyproxy, "http"), {
      FIXTURE_HOSTS_FILE: hostsFile,
    });
    try {
      const result = await viaHttp(gateway, `http://allowed.hosts.test:${originPort}/`);
      expect(result.stdout, result.stderr).toBe("allowed");
    } finally {
      await gateway.stop();
    }
  });
});
