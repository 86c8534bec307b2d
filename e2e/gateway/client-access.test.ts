/**
 * Who may use the gateway, end to end: a real control plane (role all), two real gateways
 * behind Debian's HAProxy (`send-proxy-v2`, the gateways trusting only it), two tinyproxy exits
 * leaving from 127.0.0.2 and .3, and clients binding 127.0.0.5-.9 as their own addresses:
 *
 * - behind HAProxy, a project's allowed blocks see the client's real address on both gateways
 *   (127.0.0.5 served, 127.0.0.6 refused with 403), not HAProxy's;
 * - a PROXY header from an untrusted address is refused, and a client's own header behind
 *   HAProxy's is no header at all;
 * - password-less access: a client from a listed address with no credentials routes, with
 *   X-Octoprox-Country choosing the exit (Node and curl's --proxy-header, plain and through a
 *   CONNECT tunnel, directly and through HAProxy), and no X-Octoprox field reaches the origin;
 * - strict mode: a gateway listening beyond loopback refuses to start on a feed with a project
 *   open to anyone (one stored before the api refused such lists), naming it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { encodeProxyV2 } from "../../shared/proxy-protocol/proxy-header.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { RawConnection } from "../../testkit/clients/raw-http.ts";
import { spawnCommand } from "../../testkit/processes.ts";
import { DENO_BIN, gatewayRunArgs } from "../../scripts/gateway-command.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Haproxy, startHaproxy } from "../../testkit/upstreams/haproxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  basicAuth,
  type Credentials,
  exitOf,
  viaProxy,
} from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import {
  createRoutedProject,
  proxyStatusError,
  type RoutedProject,
} from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];
const RELAYED = 'octoprox_gateway_requests_total{kind="http",outcome="relayed",status="200"}';
const DENIED = 'octoprox_gateway_failures_total{kind="client_address_denied"}';

let cluster: Cluster;
let origin: Origin;
let tinyproxies: Tinyproxy[];
let gateways: Gateway[];
let haproxy: Haproxy;
/** Allowed from 127.0.0.5 only; its one exit is 127.0.0.2. */
let fenced: RoutedProject;
/** Password-less from 127.0.0.7; exits DE (127.0.0.2) and US (127.0.0.3). */
let keyless: RoutedProject;

beforeAll(async () => {
  [cluster, origin, ...tinyproxies] = await Promise.all([
    Cluster.create(),
    startOrigin(),
    ...EXITS.map((bindAddress) => startTinyproxy({ bindAddress })),
  ]);
  await cluster.start("all");
  // HAProxy reaches the gateways from 127.0.0.1: the one peer they take a PROXY header from.
  gateways = await Promise.all(
    [0, 1].map(() => cluster.startGateway({ env: { OCTOPROX_TRUSTED_PROXIES: "127.0.0.1/32" } })),
  );
  haproxy = await startHaproxy({ servers: gateways.map((gateway) => gateway.proxyPort) });

  [fenced, keyless] = await Promise.all([
    createRoutedProject(cluster, [tinyproxies[0].url]),
    createRoutedProject(cluster, tinyproxies.map((t) => t.url)),
  ]);
  const edits = await Promise.all([
    cluster.request("PATCH", `/api/v1/projects/${fenced.projectId}`, {
      allowed_cidrs: ["127.0.0.5/32"],
    }),
    cluster.request("PATCH", `/api/v1/projects/${keyless.projectId}`, {
      passwordless_cidrs: ["127.0.0.7/32"],
    }),
    ...keyless.proxyIds.map((id, index) =>
      cluster.request("PATCH", `/api/v1/projects/${keyless.projectId}/proxies/${id}`, {
        country: ["DE", "US"][index],
      })
    ),
  ]);
  expect(edits.map((edit) => edit.status)).toEqual([200, 200, 200, 200]);
  // Every edit has reached both gateways once each serves the last of them.
  for (const gateway of gateways) {
    await cluster.until(async () => {
      const refused = await viaProxy(gateway.proxyPort, fenced.credentials, ipUrl(), {
        localAddress: "127.0.0.6",
      });
      const us = await viaProxy(gateway.proxyPort, null, ipUrl(), {
        localAddress: "127.0.0.7",
        headers: { "X-Octoprox-Country": "US" },
      });
      return refused.status === 403 && us.status === 200 && exitOf(us) === EXITS[1];
    }, { timeoutMs: 20_000, message: `${gateway.instance} to apply the access edits` });
  }
});

afterEach((context) => {
  if (context.task.result?.state === "fail") {
    cluster.dump();
    console.error(`--- haproxy:\n${haproxy?.output()}`);
  }
});

afterAll(async () => {
  await haproxy?.close();
  await cluster?.close();
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
});

const ipUrl = () => `${origin.url}/ip`;

/** Each gateway's value of `series`. */
const each = (series: string) => Promise.all(gateways.map((gateway) => gateway.metric(series)));

describe("behind HAProxy", () => {
  it("the CIDR rule sees the real client address on both gateways", async () => {
    const relayed = await each(RELAYED);
    for (let i = 0; i < 4; i++) {
      const answer = await viaProxy(haproxy.port, fenced.credentials, ipUrl(), {
        localAddress: "127.0.0.5",
      });
      expect(exitOf(answer)).toBe(EXITS[0]);
    }
    // Round robin: each gateway served two, each seeing 127.0.0.5.
    expect((await each(RELAYED)).map((value, index) => value - relayed[index])).toEqual([2, 2]);

    const denied = await each(DENIED);
    for (let i = 0; i < 4; i++) {
      const answer = await viaProxy(haproxy.port, fenced.credentials, ipUrl(), {
        localAddress: "127.0.0.6",
      });
      expect(answer.status).toBe(403);
      expect(proxyStatusError(answer.headers["proxy-status"])).toBe("http_request_denied");
      expect(answer.body.trim()).toBe("Client address not allowed for this project");
    }
    expect((await each(DENIED)).map((value, index) => value - denied[index])).toEqual([2, 2]);
    // HAProxy's own address, which the gateways see as the peer, is not what they judged.
    const direct = await viaProxy(gateways[0].proxyPort, fenced.credentials, ipUrl());
    expect(direct.status).toBe(403);
  });

  it("a PROXY header from an untrusted address is refused, and one behind HAProxy's is none", async () => {
    const claim = encodeProxyV2(
      { address: "127.0.0.5", port: 40_000, family: 4 },
      { address: "127.0.0.1", port: gateways[0].proxyPort, family: 4 },
    );
    const send = async (port: number) => {
      const connection = await RawConnection.open(port, "127.0.0.1", "127.0.0.6");
      try {
        connection.write(Buffer.from(claim));
        connection.write(
          `GET ${ipUrl()} HTTP/1.1\r\nHost: ${origin.host}:${origin.port}\r\n` +
            `Proxy-Authorization: ${basicAuth(fenced.credentials)}\r\nConnection: close\r\n\r\n`,
        );
        const answer = await connection.readResponse();
        await connection.readToEnd();
        return answer;
      } finally {
        connection.destroy();
      }
    };
    for (const gateway of gateways) {
      const refused = await send(gateway.proxyPort);
      expect(refused.status).toBe(400);
      expect(refused.body.toString()).toContain(
        "PROXY protocol header from an address not trusted to send one",
      );
    }
    // Through HAProxy the gateway takes HAProxy's header (127.0.0.6); the client's own follows
    // it as the start of its request, which is no HTTP request.
    for (let i = 0; i < 2; i++) expect((await send(haproxy.port)).status).toBe(400);
    const logged = gateways.flatMap((gateway) =>
      gateway.logs().filter((line) => line.msg === "PROXY protocol header refused")
    );
    expect(logged.map((line) => line.peer)).toEqual(["127.0.0.6", "127.0.0.6"]);
  });
});

describe("password-less access", () => {
  const country = (code: string) => ({ "X-Octoprox-Country": code });

  it("routes a client from a listed address with no credentials, X-Octoprox-Country choosing the exit", async () => {
    for (const port of [gateways[0].proxyPort, gateways[1].proxyPort, haproxy.port]) {
      for (const [code, exit] of [["DE", EXITS[0]], ["us", EXITS[1]]]) {
        const answer = await viaProxy(port, null, ipUrl(), {
          localAddress: "127.0.0.7",
          headers: country(code),
        });
        expect(exitOf(answer), `${code} through ${port}`).toBe(exit);
      }
    }
    // From an address no project lists, credentials are required.
    const stranger = await viaProxy(haproxy.port, null, ipUrl(), {
      localAddress: "127.0.0.8",
      headers: country("DE"),
    });
    expect(stranger.status).toBe(407);
  });

  it("works with curl's --proxy-header, plain and through a CONNECT tunnel", async () => {
    for (const port of [gateways[0].proxyPort, haproxy.port]) {
      for (const [code, exit] of [["DE", EXITS[0]], ["US", EXITS[1]]]) {
        for (const tunnel of [[], ["--proxytunnel"]]) {
          const result = await curl([
            "-x",
            `http://127.0.0.1:${port}`,
            "--interface",
            "127.0.0.7",
            "--proxy-header",
            `X-Octoprox-Country: ${code}`,
            ...tunnel,
            ipUrl(),
          ]);
          expect(result.stderr, `${code} ${tunnel.join("")} via ${port}`).toBe("");
          expect(JSON.parse(result.stdout).ip).toBe(exit);
        }
      }
    }
  });

  it("keeps every X-Octoprox field from the origin, with or without a password", async () => {
    const withPassword: Credentials = keyless.credentials;
    for (const credentials of [null, withPassword]) {
      const answer = await viaProxy(haproxy.port, credentials, `${origin.url}/headers`, {
        localAddress: "127.0.0.7",
        headers: { ...country("DE"), "X-Octoprox-Session": "s-9", "X-Kept": "yes" },
      });
      expect(answer.status).toBe(200);
      const received = (JSON.parse(answer.body) as { headers: Record<string, string> }).headers;
      expect(received["x-kept"]).toBe("yes");
      expect(Object.keys(received).filter((name) => name.startsWith("x-octoprox"))).toEqual([]);
    }
    const bad = await viaProxy(haproxy.port, null, ipUrl(), {
      localAddress: "127.0.0.7",
      headers: country("germany"),
    });
    expect(bad.status).toBe(400);
    expect(bad.body.trim()).toBe(
      "X-Octoprox-Country must be a two-letter ISO 3166-1 code, such as US",
    );
  });
});

describe("strict mode", () => {
  it("a gateway listening beyond loopback refuses to start on a project open to anyone, naming it", async () => {
    // A project stored before the api refused such lists: written to Postgres directly.
    const created = await cluster.request("POST", "/api/v1/projects", {
      name: "legacy-open",
      username: "legacyopen",
    });
    expect(created.status).toBe(201);
    await cluster.sql`update projects set passwordless_cidrs = '["0.0.0.0/0"]'::jsonb
      where id = ${created.body.id}`;
    // Any edit compiles every project; the loopback gateways then serve it to anyone.
    const touched = await cluster.request("PATCH", `/api/v1/projects/${fenced.projectId}`, {
      description: "compiles the feed again",
    });
    expect(touched.status).toBe(200);
    await cluster.until(async () => {
      const answer = await viaProxy(gateways[0].proxyPort, null, ipUrl(), {
        localAddress: "127.0.0.9",
      });
      return answer.status !== 407;
    }, { message: "the feed to carry the open project" });

    const strictEnv = cluster.gatewayEnv("e2e-gateway-strict", {
      env: { OCTOPROX_GATEWAY_HOST: "0.0.0.0" },
    });
    const strict = spawnCommand(DENO_BIN, gatewayRunArgs(strictEnv), strictEnv);
    const exit = await strict.exited;
    expect(exit.code).toBe(1);
    const lines = strict.stdout.filter(Boolean).map((line) => JSON.parse(line));
    const fatal = lines.filter((line) => line.level === "fatal");
    expect(fatal).toEqual([expect.objectContaining({
      msg: "Refusing to start: a project can be used without a password from any address " +
        "(strict mode: the gateway listens beyond loopback)",
      projects: `legacy-open (${created.body.id})`,
    })]);
    expect(lines.map((line) => line.msg)).not.toContain("Proxy listener bound");
  });
});
