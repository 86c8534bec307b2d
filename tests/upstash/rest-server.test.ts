/** The Upstash REST stand-in (testkit/upstreams/upstash-rest.ts) with the real @upstash/redis. */
import { Redis as Upstash } from "@upstash/redis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deletePrefix, TEST_REDIS_URL, testPrefix } from "../../testkit/stores.ts";
import { startUpstashRest, type UpstashRest } from "../../testkit/upstreams/upstash-rest.ts";
import { waitUntil } from "../../testkit/wait.ts";

const TOKEN = "test-token-0123456789";
const prefix = testPrefix();
let server: UpstashRest;
let direct: Redis;
/** The client's defaults: answers parsed as JSON where they look it, commands auto-pipelined
 * (sent to /pipeline in batches). */
let client: Upstash;
/** Answers as the strings Redis holds, one request per command (to /). */
let rawClient: Upstash;

const key = (name: string) => `${prefix}${name}`;

function upstash(
  options: { token?: string; automaticDeserialization?: boolean; autoPipelining?: boolean } = {},
): Upstash {
  return new Upstash({
    url: server.url,
    token: options.token ?? TOKEN,
    enableTelemetry: false,
    automaticDeserialization: options.automaticDeserialization ?? true,
    enableAutoPipelining: options.autoPipelining ?? true,
  });
}

/** A request as the client would send it, for what the client does not expose. */
async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() as unknown };
}

beforeAll(async () => {
  server = await startUpstashRest({ redisUrl: TEST_REDIS_URL, token: TOKEN });
  direct = new Redis(TEST_REDIS_URL);
  client = upstash();
  rawClient = upstash({ automaticDeserialization: false, autoPipelining: false });
});

afterAll(async () => {
  await server?.close();
  await server?.close(); // safe twice
  await deletePrefix(TEST_REDIS_URL, prefix);
  direct?.disconnect();
});

describe("upstash REST stand-in", () => {
  it("round-trips strings, binary-looking and unicode values", async () => {
    const pipelinedBefore = server.requests["/pipeline"] ?? 0;
    expect(await client.set(key("auto"), "ü")).toBe("OK");
    expect(await client.get(key("auto"))).toBe("ü");
    expect(server.requests["/pipeline"]).toBeGreaterThan(pipelinedBefore);
    const values = [
      "plain",
      "héllo 🌍 日本語",
      "\u0000\u0001\u00ff binary-looking",
      "T0s=", // looks like base64
      "OK",
      "123",
      '{"a":1}',
      "",
    ];
    for (const [i, value] of values.entries()) {
      expect(await rawClient.set(key(`s${i}`), value)).toBe("OK");
      expect(await rawClient.get(key(`s${i}`))).toBe(value);
      expect(await direct.get(key(`s${i}`))).toBe(value);
    }
    expect(await client.get(key("s5"))).toBe(123);
    expect(await client.get(key("s6"))).toEqual({ a: 1 });
    expect(await client.get(key("missing"))).toBeNull();
    expect(await client.incr(key("counter"))).toBe(1);
    expect(await rawClient.mget(key("s0"), key("s1"), key("missing"))).toEqual([
      "plain",
      "héllo 🌍 日本語",
      null,
    ]);
  });

  it("answers bytes that are not UTF-8 base64-encoded when asked", async () => {
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x41]);
    await direct.set(key("bytes"), bytes);
    const encoded = await post("/", ["GET", key("bytes")], { "upstash-encoding": "base64" });
    expect(encoded).toEqual({ status: 200, body: { result: bytes.toString("base64") } });
    const nested = await post("/", ["MGET", key("bytes"), key("missing")], {
      "upstash-encoding": "base64",
    });
    expect(nested.body).toEqual({ result: [bytes.toString("base64"), null] });
    const ok = await post("/", ["SET", key("ok"), "x"], { "upstash-encoding": "base64" });
    expect(ok.body).toEqual({ result: "OK" });
    const plain = await post("/", ["GET", key("ok")]);
    expect(plain.body).toEqual({ result: "x" });
  });

  it("round-trips hashes", async () => {
    expect(await rawClient.hset(key("h"), { name: "ünï", n: "7", bin: "\u0000x" })).toBe(3);
    expect(await rawClient.hget(key("h"), "name")).toBe("ünï");
    expect(await rawClient.hgetall(key("h"))).toEqual(["name", "ünï", "n", "7", "bin", "\u0000x"]);
    expect(await client.hgetall(key("h"))).toEqual({ name: "ünï", n: 7, bin: "\u0000x" });
    expect(await client.hincrby(key("h"), "n", 3)).toBe(10);
  });

  it("round-trips sorted sets", async () => {
    expect(
      await rawClient.zadd(key("z"), { score: 2, member: "b" }, { score: 1.5, member: "ä" }),
    ).toBe(2);
    expect(await rawClient.zrange(key("z"), 0, -1)).toEqual(["ä", "b"]);
    expect(await client.zrange(key("z"), 0, -1, { withScores: true })).toEqual(["ä", 1.5, "b", 2]);
    const withScores = await post("/", ["ZRANGE", key("z"), 0, -1, "WITHSCORES"]);
    expect(withScores.body).toEqual({ result: ["ä", "1.5", "b", "2"] }); // RESP2: scores as strings
    expect(await client.zscore(key("z"), "b")).toBe(2);
    expect(await client.zcard(key("z"))).toBe(2);
  });

  it("round-trips streams", async () => {
    const id = await rawClient.xadd(key("x"), "*", { field: "välue", other: "1" });
    expect(id).toMatch(/^\d+-\d+$/);
    expect(await rawClient.xlen(key("x"))).toBe(1);
    const range = await rawClient.xrange(key("x"), "-", "+");
    expect(range).toEqual([[id, ["field", "välue", "other", "1"]]]);
    expect(await client.xrange(key("x"), "-", "+")).toEqual({ [id]: { field: "välue", other: 1 } });
    const read = await post("/", ["XREAD", "COUNT", 1, "STREAMS", key("x"), "0"]);
    expect(read).toEqual({
      status: 200,
      body: { result: [[key("x"), [[id, ["field", "välue", "other", "1"]]]]] },
    });
  });

  it("answers a pipeline in order, a failed item with its error and the others' results", async () => {
    const p = rawClient.pipeline();
    p.set(key("p1"), "one");
    p.incr(key("p1"));
    p.get(key("p1"));
    p.rpush(key("pl"), "a", "b");
    const before = server.requests["/pipeline"] ?? 0;
    const results = await p.exec({ keepErrors: true });
    expect(server.requests["/pipeline"]).toBe(before + 1);
    expect(results.map((r) => r.result)).toEqual(["OK", undefined, "one", 2]);
    expect(results[1].error).toMatch(/not an integer/);
    expect(results[0].error).toBeUndefined();
    // Without keepErrors the client throws on the failed item.
    const failing = rawClient.pipeline();
    failing.get(key("p1"));
    failing.incr(key("p1"));
    await expect(failing.exec()).rejects.toThrow(/Command 2 \[ incr \] failed/);
  });

  it("answers a multi-exec in order, as Redis runs a transaction", async () => {
    const results = await client.multi()
      .set(key("m"), 5)
      .incr(key("m"))
      .get(key("m"))
      .exec();
    expect(results).toEqual(["OK", 6, 6]);
    expect(server.requests["/multi-exec"]).toBeGreaterThanOrEqual(1);
    // A run-time error is that item's; the others are applied.
    const runtime = await post("/multi-exec", [
      ["SET", key("m2"), "text"],
      ["INCR", key("m2")],
      ["GET", key("m2")],
    ]);
    expect(runtime.status).toBe(200);
    const items = runtime.body as { result?: unknown; error?: string }[];
    expect(items[0]).toEqual({ result: "OK" });
    expect(items[1].error).toMatch(/not an integer/);
    expect(items[2]).toEqual({ result: "text" });
    // A queue-time error discards the whole transaction.
    const aborted = await post("/multi-exec", [["SET", key("m3"), "v"], ["NOSUCHCOMMAND"]]);
    expect(aborted.status).toBe(400);
    expect((aborted.body as { error: string }).error).toMatch(/EXECABORT/);
    expect(await direct.exists(key("m3"))).toBe(0);
  });

  it("falls back from EVALSHA to EVAL for a script Redis does not know", async () => {
    // One request per command, to count them; the prefix makes the script's SHA new to Redis.
    const unpipelined = upstash({ autoPipelining: false });
    const script = unpipelined.createScript<string>(
      `-- ${prefix}\nredis.call("SET", KEYS[1], ARGV[1]); return redis.call("GET", KEYS[1])`,
    );
    const before = server.requests["/"] ?? 0;
    expect(await script.exec([key("lua")], ["from-lua"])).toBe("from-lua");
    expect(server.requests["/"]).toBe(before + 2); // EVALSHA refused (NOSCRIPT), then EVAL
    expect(await script.exec([key("lua")], ["again"])).toBe("again");
    expect(server.requests["/"]).toBe(before + 3); // now cached: EVALSHA alone
    expect(await client.eval("return ARGV[1]", [], ["direct"])).toBe("direct");
    // And through the auto-pipelined client, whose EVALSHA goes to /pipeline.
    const again = client.createScript<string>(`-- ${prefix} pipelined\nreturn ARGV[1]`);
    expect(await again.exec([], ["piped"])).toBe("piped");
  });

  it("serves the path form", async () => {
    const set = await fetch(`${server.url}/set/${encodeURIComponent(key("path"))}/v%2Fslash`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(await set.json()).toEqual({ result: "OK" });
    const posted = await fetch(`${server.url}/set/${encodeURIComponent(key("body"))}?EX=100`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: "posted value",
    });
    expect(await posted.json()).toEqual({ result: "OK" });
    expect(await direct.get(key("path"))).toBe("v/slash");
    expect(await direct.get(key("body"))).toBe("posted value");
    expect(await direct.ttl(key("body"))).toBeGreaterThan(0);
    const got = await fetch(`${server.url}/get/${encodeURIComponent(key("path"))}?_token=${TOKEN}`);
    expect(await got.json()).toEqual({ result: "v/slash" });
  });

  it("refuses blocking commands and reports Redis errors with 400", async () => {
    const blpop = await post("/", ["BLPOP", key("list"), 1]);
    expect(blpop.status).toBe(400);
    expect((blpop.body as { error: string }).error).toMatch(/not available/);
    const xread = await post("/", ["XREAD", "BLOCK", 100, "STREAMS", key("x"), "$"]);
    expect(xread.status).toBe(400);
    const wrongType = await post("/", ["HGET", key("s0"), "f"]);
    expect(wrongType.status).toBe(400);
    expect((wrongType.body as { error: string }).error).toMatch(/^WRONGTYPE/);
    await expect(client.hget(key("s0"), "f")).rejects.toThrow(/WRONGTYPE/);
  });

  it("refuses a wrong or missing token", async () => {
    await expect(upstash({ token: "wrong" }).get(key("s0"))).rejects.toThrow(/Unauthorized/);
    const missing = await fetch(server.url, { method: "POST", body: '["PING"]' });
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({ error: "Unauthorized" });
  });

  it("holds requests while paused and answers them after", async () => {
    const before = server.total;
    server.pause(true);
    const pending = client.get(key("s0"));
    await waitUntil(() => server.total > before, { message: "the held request to arrive" });
    server.pause(false);
    expect(await pending).toBe("plain");
  });

  it("lets the client go on after a restart on the same port", async () => {
    await client.set(key("r"), "before");
    const { port } = server;
    await server.restart();
    expect(server.port).toBe(port);
    expect(await client.get(key("r"))).toBe("before");
    await client.set(key("r"), "after");
    expect(await direct.get(key("r"))).toBe("after");
  });
});
