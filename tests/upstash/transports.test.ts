/**
 * The gateway's Redis interface (shared/redis/contract.ts) over both transports, side by side on
 * one Redis: ioredis over TCP, and `@upstash/redis` over HTTP through the REST stand-in
 * (testkit/upstreams/upstash-rest.ts). Every command the gateway sends answers the same on both.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpRedis } from "../../gateway/redis/http.ts";
import { RestRequester } from "../../gateway/redis/rest-requester.ts";
import { connectRedis } from "../../gateway/redis/connection.ts";
import { registerScript, runScript } from "../../shared/lua/loader.ts";
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { RedisHttpError } from "../../shared/errors.ts";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { startUpstashRest, type UpstashRest } from "../../testkit/upstreams/upstash-rest.ts";

const TOKEN = "transport-token-0123456789";
const prefix = testPrefix();
let server: UpstashRest;
let direct: Redis;
let requester: RestRequester;
const transports: Record<"tcp" | "http", GatewayRedis> = {} as never;

beforeAll(async () => {
  server = await startUpstashRest({ redisUrl: TEST_REDIS_URL, token: TOKEN });
  direct = new Redis(TEST_REDIS_URL);
  transports.tcp = direct;
  requester = new RestRequester({ url: server.url, token: TOKEN, timeoutMs: 2_000 });
  transports.http = new HttpRedis(requester);
});

afterAll(async () => {
  await deletePrefix(TEST_REDIS_URL, prefix);
  direct.disconnect();
  await server.close();
});

describe.each(["tcp", "http"] as const)("the %s transport", (transport) => {
  const key = (name: string) => `${prefix}${transport}:${name}`;
  const redis = () => transports[transport];

  it("gets, sets with a life, and reads many", async () => {
    expect(await redis().get(key("none"))).toBeNull();
    expect(await redis().set(key("a"), "ä 1", "PX", 60_000)).toBe("OK");
    await redis().set(key("b"), "2", "EX", 60);
    expect(await redis().get(key("a"))).toBe("ä 1");
    expect(await redis().mget(key("a"), key("none"), key("b"))).toEqual(["ä 1", null, "2"]);
    const ttl = await direct.pttl(key("a"));
    expect(ttl).toBeGreaterThan(50_000);
  });

  it("reads a hash whole, and none as an empty record", async () => {
    await direct.hset(key("h"), { one: "1", two: "zwei" });
    expect(await redis().hgetall(key("h"))).toEqual({ one: "1", two: "zwei" });
    expect(await redis().hgetall(key("no-hash"))).toEqual({});
  });

  it("adds to a capped stream and reads after an id without blocking", async () => {
    const first = await redis().xadd(key("s"), "MAXLEN", "~", 100, "*", "site", "a.com", "n", "1");
    const second = await redis().xadd(key("s"), "MAXLEN", "~", 100, "*", "site", "b.com", "n", "2");
    expect(first).toMatch(/^\d+-\d+$/);
    const read = await redis().xread("COUNT", 10, "STREAMS", key("s"), first!);
    expect(read).toEqual([[key("s"), [[second, ["site", "b.com", "n", "2"]]]]]);
    expect(await redis().xread("COUNT", 10, "STREAMS", key("s"), second!)).toBeNull();
  });

  it("runs a script by its digest, sending the source once when Redis lacks it", async () => {
    const script = await registerScript(
      `echo_${transport}`,
      `-- KEYS[1]: a key\n-- ARGV[1]: a word\n-- Reply: the key, the word and a number\n` +
        `-- ${transport} ${prefix}\nreturn {KEYS[1], ARGV[1], 7}`,
    );
    expect(await runScript(redis(), script, [key("k")], ["wörd"])).toEqual([key("k"), "wörd", 7]);
    // Known now: by its digest alone.
    expect(await redis().evalsha(script.sha1, 1, key("k"), "x")).toEqual([key("k"), "x", 7]);
  });

  it("pipelines writes and answers each command's error in its place", async () => {
    await direct.set(key("text"), "not a hash");
    const replies = await redis().pipeline()
      .hset(key("p"), "f", "v")
      .hincrby(key("p"), "n", 5)
      .hincrby(key("text"), "n", 1)
      .pexpire(key("p"), 60_000)
      .expire(key("p"), 60)
      .exec();
    expect(replies).toHaveLength(5);
    expect(replies!.map(([error]) => error === null)).toEqual([true, true, false, true, true]);
    expect(replies![2][0]!.message).toMatch(/WRONGTYPE/);
    expect(replies![1][1]).toBe(5);
    expect(await direct.hgetall(key("p"))).toEqual({ f: "v", n: "5" });
    expect(await redis().pipeline().exec()).toEqual([]);
  });

  it("runs a transaction, bytes kept as bytes", async () => {
    const binary = new Uint8Array([0, 255, 128, 10, 0x4f, 0x4b, 0xc3]);
    await direct.hset(key("sections"), "bin", Buffer.from(binary), "ok", "OK");
    await direct.set(key("head"), "h1");
    const replies = await redis().multi()
      .get(key("head"))
      .hmgetBuffer(key("sections"), "bin", "ok", "none")
      .set(key("reg"), "r", "PX", 60_000)
      .sadd(key("index"), "a", "b")
      .srem(key("index"), "a")
      .del(key("reg"))
      .exec();
    expect(replies!.every(([error]) => error === null)).toBe(true);
    const [head, values] = replies!.map(([, value]) => value) as [string, (Uint8Array | null)[]];
    expect(head).toBe("h1");
    expect(new Uint8Array(values[0]!)).toEqual(binary);
    expect(new TextDecoder().decode(values[1]!)).toBe("OK");
    expect(values[2]).toBeNull();
    expect(await direct.smembers(key("index"))).toEqual(["b"]);
    expect(await direct.exists(key("reg"))).toBe(0);
  });
});

describe("the HTTP transport's failures", () => {
  it("refuses a wrong token without naming it", async () => {
    const wrong = new HttpRedis(
      new RestRequester({ url: server.url, token: "not-the-token-000", timeoutMs: 2_000 }),
    );
    const error = await wrong.get(`${prefix}x`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RedisHttpError);
    expect((error as RedisHttpError).status).toBe(401);
    expect(String((error as Error).message)).not.toContain("not-the-token");
  });

  it("gives up on an endpoint that does not answer within the request deadline", async () => {
    const slow = new HttpRedis(
      new RestRequester({ url: server.url, token: TOKEN, timeoutMs: 200 }),
    );
    server.pause(true);
    try {
      const started = performance.now();
      const error = await slow.get(`${prefix}x`).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedisHttpError);
      expect((error as RedisHttpError).status).toBeUndefined();
      expect(performance.now() - started).toBeLessThan(1_500);
    } finally {
      server.pause(false);
    }
  });

  it("counts requests and bytes for /metrics", async () => {
    const connection = connectRedis({
      redisUrl: server.url,
      redisToken: TOKEN,
      redisRequestTimeoutMs: 2_000,
    }, "unused");
    expect(connection.transport).toBe("http");
    expect(connection.blockingReader).toBeUndefined();
    await connection.redis.get(`${prefix}counted`);
    await connection.redis.pipeline().get(`${prefix}a`).get(`${prefix}b`).exec();
    const samples = connection.samples();
    const value = (name: string, labels: string) =>
      samples.find((s) => s.name === name && s.labels === labels)?.value;
    expect(value("octoprox_gateway_redis_http_requests_total", 'result="answered"')).toBe(2);
    expect(value("octoprox_gateway_redis_http_bytes_total", 'direction="sent"')).toBeGreaterThan(
      20,
    );
    expect(value("octoprox_gateway_redis_http_bytes_total", 'direction="received"'))
      .toBeGreaterThan(10);
  });
});
