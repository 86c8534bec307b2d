/**
 * The tunnel resolver on a real UDP socket under Deno (testkit/gateway/fixture/dns.ts), asked by
 * a real stub (Node's c-ares resolver) and by hand-made datagrams:
 *
 * - A answers come from the fake-IP block, one address per name, the same through two resolver
 *   processes sharing the mapping, one of them over Redis's HTTP protocol;
 * - AAAA and other types answer empty (NOERROR, no record), Firefox's canary name NXDOMAIN;
 * - a malformed query is answered FORMERR, a datagram that is not a query gets nothing, and the
 *   resolver goes on answering.
 */
import dgram from "node:dgram";
import { Resolver } from "node:dns/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { type FixtureDns, startFixtureDns } from "../../testkit/gateway/fixture-dns.ts";
import { startUpstashRest, type UpstashRest } from "../../testkit/upstreams/upstash-rest.ts";

const TOKEN = "dns-test-token";
let prefix: string;
let tcp: FixtureDns;
let http: FixtureDns;
let rest: UpstashRest;

beforeAll(async () => {
  prefix = testPrefix();
  rest = await startUpstashRest({ redisUrl: TEST_REDIS_URL, token: TOKEN });
  [tcp, http] = await Promise.all([
    startFixtureDns({ redisUrl: TEST_REDIS_URL, prefix }),
    startFixtureDns({ redisUrl: rest.url, redisToken: TOKEN, prefix }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([tcp, http].map((server) => server?.stop().catch(() => undefined)));
  await rest?.close();
  if (prefix) await deletePrefix(TEST_REDIS_URL, prefix);
});

function stub(server: FixtureDns): Resolver {
  const resolver = new Resolver({ timeout: 2_000, tries: 2 });
  resolver.setServers([`127.0.0.1:${server.port}`]);
  return resolver;
}

/** Sends one datagram and waits for one answer (or none within `timeoutMs`). */
function exchange(
  port: number,
  datagram: Uint8Array,
  timeoutMs = 1_000,
): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const socket = dgram.createSocket("udp4");
    const timer = setTimeout(() => {
      socket.close();
      resolve(undefined);
    }, timeoutMs);
    socket.once("message", (message) => {
      clearTimeout(timer);
      socket.close();
      resolve(message);
    });
    socket.send(datagram, port, "127.0.0.1");
  });
}

describe("the tunnel resolver on a socket", () => {
  it("answers A from the fake-IP block, one address per name, across two resolvers", async () => {
    const [a, b] = [stub(tcp), stub(http)];
    const shop = await a.resolve4("shop.example.test");
    expect(shop).toHaveLength(1);
    expect(shop[0]).toMatch(/^198\.(18|19)\.\d+\.\d+$/);
    expect(await b.resolve4("SHOP.example.test")).toEqual(shop);
    const news = await b.resolve4("news.example.test");
    expect(news).not.toEqual(shop);
    expect(await a.resolve4("news.example.test")).toEqual(news);
    const withTtl = await a.resolve4("shop.example.test", { ttl: true });
    expect(withTtl).toEqual([{ address: shop[0], ttl: 1 }]);
  });

  it("answers other types empty, and Firefox's canary name NXDOMAIN", async () => {
    const a = stub(tcp);
    await expect(a.resolve6("shop.example.test")).rejects.toMatchObject({ code: "ENODATA" });
    await expect(a.resolveSrv("_xmpp._tcp.example.test")).rejects.toMatchObject({
      code: "ENODATA",
    });
    await expect(a.resolve4("use-application-dns.net")).rejects.toMatchObject({
      code: "ENOTFOUND",
    });
  });

  it("answers a malformed query FORMERR, ignores what is not a query, and answers on", async () => {
    // Two questions: the header is read, the query is not one it answers.
    const twoQuestions = new Uint8Array([0xab, 0xcd, 1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1]);
    const formErr = await exchange(tcp.port, twoQuestions);
    expect(formErr?.readUInt16BE(0)).toBe(0xabcd);
    expect((formErr?.readUInt16BE(2) ?? 0) & 0x800f).toBe(0x8001);
    // Too short for a header, and a response rather than a query: no answer.
    expect(await exchange(tcp.port, new Uint8Array([1, 2, 3]), 300)).toBeUndefined();
    const response = new Uint8Array([
      0,
      1,
      0x81,
      0x80,
      0,
      1,
      0,
      0,
      0,
      0,
      0,
      0,
      1,
      0x61,
      0,
      0,
      1,
      0,
      1,
    ]);
    expect(await exchange(tcp.port, response, 300)).toBeUndefined();
    expect(await stub(tcp).resolve4("after.example.test")).toHaveLength(1);
    const { samples } = await tcp.stop();
    const count = (answer: string) =>
      samples.find((s) =>
        s.name === "octoprox_gateway_tunnel_dns_queries_total" && s.labels === `answer="${answer}"`
      )
        ?.value;
    expect(count("malformed")).toBe(1);
    expect(count("dropped")).toBe(2);
    expect(count("nxdomain")).toBeGreaterThanOrEqual(1);
    expect(count("address")).toBeGreaterThanOrEqual(4);
  });
});
