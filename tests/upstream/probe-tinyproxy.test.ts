/** Probes through real tinyproxy processes, each leaving from its own loopback address. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probe } from "../../control/upstream/index.ts";
import { UpstreamHandshakeError } from "../../shared/proxy-protocol/errors.ts";
import type { UpstreamProxy } from "../../shared/proxy-protocol/types.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

const auth = { username: "alice", password: "s3cret" };
let origin: Origin;
let secureOrigin: Origin;
let open: Tinyproxy;
let guarded: Tinyproxy;

beforeAll(async () => {
  [origin, secureOrigin, open, guarded] = await Promise.all([
    startOrigin(),
    startOrigin({ tls: true }),
    startTinyproxy({ bindAddress: "127.0.0.2" }),
    startTinyproxy({ bindAddress: "127.0.0.3", auth }),
  ]);
});

afterAll(async () => {
  await Promise.all([origin?.close(), secureOrigin?.close(), open?.close(), guarded?.close()]);
});

describe("probe through tinyproxy", () => {
  it("reaches the origin and reports each instance's bind address as the exit", async () => {
    const first = await probe({ proxy: open.proxy, url: `${origin.url}/ip`, timeoutMs: 5_000 });
    expect(first.ok).toBe(true);
    expect(first.status).toBe(200);
    expect(first.exitIp).toBe("127.0.0.2");
    const second = await probe({ proxy: guarded.proxy, url: `${origin.url}/ip`, timeoutMs: 5_000 });
    expect(second.exitIp).toBe("127.0.0.3");
    expect(second.latencyMs).toBeGreaterThan(0);
  });

  it("tunnels to an https origin by name (CONNECT), with auth", async () => {
    const result = await probe({
      proxy: guarded.proxy,
      url: `https://localhost:${secureOrigin.port}/echo`,
      timeoutMs: 5_000,
      targetTls: { ca: secureOrigin.ca },
    });
    expect(result.ok).toBe(true);
    expect(result.exitIp).toBe("127.0.0.3");
  });

  it("reads chunked bodies and non-2xx answers", async () => {
    const chunked = await probe({
      proxy: open.proxy,
      url: `${origin.url}/chunked`,
      timeoutMs: 5_000,
    });
    expect(Buffer.from(chunked.body).toString()).toBe("hello chunked world");
    const missing = await probe({
      proxy: open.proxy,
      url: `${origin.url}/status/503`,
      timeoutMs: 5_000,
    });
    expect(missing.ok).toBe(false);
    expect(missing.status).toBe(503);
  });

  it("without credentials fails with 407; a wrong password is refused too", async () => {
    const bare = { ...guarded.proxy, username: undefined, password: undefined };
    const wrong = { ...guarded.proxy, password: "nope" };
    const https = `https://localhost:${secureOrigin.port}/ip`;
    const failure = (proxy: UpstreamProxy, url: string) =>
      probe({ proxy, url, timeoutMs: 5_000, targetTls: { ca: secureOrigin.ca } }).then(
        (result) => result,
        (caught: unknown) => caught,
      );
    for (const url of [`${origin.url}/ip`, https]) {
      const error = await failure(bare, url);
      expect(error).toBeInstanceOf(UpstreamHandshakeError);
      expect((error as UpstreamHandshakeError).status).toBe(407);
    }
    // tinyproxy 1.11.1 answers a wrong password with 401 (later versions: 407). Through a
    // tunnel that is a handshake error with the status; forwarded, a non-2xx answer.
    const tunneled = await failure(wrong, https);
    expect(tunneled).toBeInstanceOf(UpstreamHandshakeError);
    expect([401, 407]).toContain((tunneled as UpstreamHandshakeError).status);
    expect((tunneled as Error).message).not.toContain("nope");
    const forwarded = await failure(wrong, `${origin.url}/ip`);
    if (forwarded instanceof UpstreamHandshakeError) expect(forwarded.status).toBe(407);
    else expect(forwarded).toMatchObject({ ok: false, status: 401 });
  });
});

describe("probe bodies", () => {
  it("reads close-delimited bodies, plain and inside TLS", async () => {
    for (const base of [origin.url, `https://localhost:${secureOrigin.port}`]) {
      const result = await probe({
        proxy: open.proxy,
        url: `${base}/close`,
        timeoutMs: 5_000,
        targetTls: { ca: secureOrigin.ca },
      });
      expect(Buffer.from(result.body).toString(), base).toBe("until close");
    }
  });

  it("keeps at most maxBodyBytes", async () => {
    const result = await probe({
      proxy: open.proxy,
      url: `${origin.url}/bytes/200000`,
      timeoutMs: 5_000,
      maxBodyBytes: 1000,
    });
    expect(result.body.length).toBe(1000);
    expect(result.bodyTruncated).toBe(true);
  });
});
