/**
 * The e2e clusters' secrets scan (testkit/secrets-scan.ts) finds what it must: a secret a
 * request sent or an answer handed out, in clear in a log line, an error answer, a /metrics text
 * or any Redis key or value (every type), raw, percent-encoded or as a Basic credential; and
 * names the secret, never its value. A key that must be nowhere but its file (the TLS
 * interception CA's) is found as a PEM line, its DER or its private number in any form, in a
 * successful answer, a sealed feed section and a database row too.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createPrivateKey } from "node:crypto";
import { Redis } from "ioredis";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { deriveFeedKeys, seal } from "../../shared/feed/codec.ts";
import { createCa } from "../../shared/tls/ca.ts";
import { SecretsScan } from "../../testkit/secrets-scan.ts";
import {
  createTestDatabase,
  deletePrefix,
  TEST_REDIS_URL,
  type TestDatabase,
  testPrefix,
} from "../../testkit/stores.ts";

let redis: Redis;
let prefix: string;
let server: Server;
let metricsText = "";

beforeAll(async () => {
  redis = new Redis(TEST_REDIS_URL);
  prefix = testPrefix();
  server = createServer((_, response) => response.end(metricsText));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  redis?.disconnect();
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  await deletePrefix(TEST_REDIS_URL, prefix);
});

function member(stdout: string[], stderr: string[] = []) {
  return {
    instance: "p1",
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stdout,
    stderr,
    alive: () => true,
  };
}

describe("the secrets scan", () => {
  test("finds nothing where no secret is", async () => {
    const scan = new SecretsScan();
    scan.add("JWT", "jwt-secret-value-1");
    scan.noteRequest("POST", "/api/v1/projects", { name: "p", password: "project-pass-1" });
    // A descriptor's credential field is named by a short `key`: a name, not a secret.
    scan.noteRequest("POST", "/api/v1/providers", {
      descriptor: { credential_fields: [{ key: "api_token", label: "API token" }] },
    });
    metricsText = "octoprox_up 1\n";
    await redis.set(`${prefix}clean`, "nothing here");
    const m = member(['{"msg":"started","field":"api_token"}']);
    await scan.readMetrics([m]);
    expect(await scan.scan({ members: [m], redis, prefix })).toEqual([]);
  });

  test("finds a CA key wherever it is but its file: answers, the feed, the database", async () => {
    const { keyPem } = await createCa();
    const other = await createCa();
    const scan = new SecretsScan();
    scan.addFileOnly("the CA key", keyPem);
    const lines = keyPem.split("\n").filter((line) => line && !line.startsWith("-----"));
    const d = (createPrivateKey(keyPem).export({ format: "jwk" }) as { d: string }).d;
    const hex = Buffer.from(d, "base64url").toString("hex");
    // A successful answer (not only errors), the PEM quoted in JSON.
    scan.noteAnswer("GET", "/api/v1/config", 200, JSON.stringify({ pem: keyPem }), {});
    // The answer of another CA's key, and its certificate: neither is this key.
    scan.noteAnswer("GET", "/api/v1/projects/ca-certificate", 200, other.keyPem, {});
    // A sealed feed section, opened with the cluster's keys.
    const feed = await deriveFeedKeys("i".repeat(64));
    const sealed = await seal(feed, JSON.stringify({ note: lines[1] }));
    await redis.hset(`${prefix}feed:sections`, "global", Buffer.from(sealed));
    await redis.set(`${prefix}plain`, `d=${hex}`);
    let database: TestDatabase | undefined;
    const sql = await createTestDatabase().then((created) => {
      database = created;
      return postgres(created.url, { max: 1, onnotice: () => {} });
    });
    try {
      await sql`create table settings (id int, value text)`;
      await sql`insert into settings values (1, 'fine'), (2, ${`der:${lines.join("")}`})`;
      const m = member([`{"msg":"loaded","d":"${d}"}`]);
      const findings = await scan.scan({ members: [m], redis, prefix, feed, database: sql });
      const seen = findings.map((f) => `${f.secret} | ${f.form} | ${f.where}`).sort();
      expect(seen).toEqual([
        "the CA key | PEM line | GET /api/v1/config answer 200",
        "the CA key | PEM line | Postgres table settings row 2",
        "the CA key | PEM line | the feed's section global (opened)",
        "the CA key | private d (base64url) | p1 stdout line 1",
        "the CA key | private d (hex) | Redis key plain",
      ]);
    } finally {
      await sql.end();
      await database?.drop();
    }
  });

  test("finds each secret where it is in clear, by name", async () => {
    const scan = new SecretsScan();
    scan.add("OCTOPROX_JWT_SECRET", "jwt-secret-value-2");
    scan.noteRequest("POST", "/api/v1/projects", {
      name: "p",
      username: "user-a",
      password: "pass/word:2",
    });
    scan.noteRequest("POST", "/api/v1/projects/0b8f35a2-2f6e-4c4c-9d59-4b1a6e6d1c01/proxies", {
      url: "http://up-user:up%40pass-3@1.2.3.4:8080",
    });
    scan.noteAnswer("POST", "/api/v1/tokens", 201, "", { id: "x", token: "oxp_handed-out-4" });
    scan.noteAnswer("POST", "/api/v1/projects", 422, '{"error":"bad jwt-secret-value-2"}', {});
    scan.noteAnswer("POST", "/api/v1/projects/x/distribution-keys", 201, "", {
      key: "oxd_distribution-key-value-5",
    });
    metricsText = 'octoprox_x{user="up@pass-3"} 1\n';
    await redis.hset(`${prefix}hash`, "f", "oxp_handed-out-4");
    await redis.rpush(`${prefix}list`, "pass%2Fword%3A2");
    await redis.xadd(
      `${prefix}stream`,
      "*",
      "auth",
      Buffer.from("user-a:pass/word:2").toString("base64"),
    );
    await redis.zadd(`${prefix}zset`, 1, "oxd_distribution-key-value-5");
    await redis.sadd(`${prefix}set-jwt-secret-value-2`, "nothing");
    const m = member(['{"msg":"login","token":"oxp_handed-out-4"}'], ["Error: jwt-secret-value-2"]);
    await scan.readMetrics([m]);
    const findings = await scan.scan({ members: [m], redis, prefix });
    const seen = findings.map((f) => `${f.secret} | ${f.form} | ${f.where}`).sort();
    expect(seen).toEqual([
      "OCTOPROX_JWT_SECRET | raw | POST /api/v1/projects answer 422",
      "OCTOPROX_JWT_SECRET | raw | Redis key set-jwt-secret-value-2 (its name)",
      "OCTOPROX_JWT_SECRET | raw | p1 stderr line 1",
      "POST /api/v1/projects body.password | basic | Redis key stream",
      "POST /api/v1/projects body.password | percent-encoded | Redis key list",
      "POST /api/v1/projects/:id/proxies body.url (proxy URL password) | raw | p1 /metrics",
      "POST /api/v1/projects/x/distribution-keys answer.key | raw | Redis key zset",
      "POST /api/v1/tokens answer.token | raw | Redis key hash",
      "POST /api/v1/tokens answer.token | raw | p1 stdout line 1",
    ]);
    for (const finding of findings) {
      expect(JSON.stringify(finding)).not.toMatch(/pass\/word|up@pass|handed-out/);
    }
  });
});
