/**
 * The egress guard against real servers on 127.0.0.1 (the loopback allowance, the test CA):
 * what it refuses before connecting (schemes, credentials in URLs, internal and metadata
 * addresses and names, loopback without the allowance), what it refuses of an answer
 * (redirects, oversized bodies), its deadline and signal, the system trust store when no CA is
 * given, and the host check an admin's save runs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkEgressHost, egressRequest } from "../../control/egress/guard.ts";
import {
  EgressRefusedError,
  errorChainText,
  ErrorCode,
  VendorCallError,
} from "../../shared/errors.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { waitUntil } from "../../testkit/wait.ts";

let origin: Origin;
let plain: Origin;

beforeAll(async () => {
  [origin, plain] = await Promise.all([startOrigin({ tls: true }), startOrigin()]);
});

afterAll(async () => {
  await Promise.all([origin?.close(), plain?.close()]);
});

/** What the call rejected with (it must reject). */
async function refusal(url: string, options: Parameters<typeof egressRequest>[1] = {}) {
  const error = await egressRequest(url, options).then(
    () => {
      throw new Error(`${url} was not refused`);
    },
    (error: unknown) => error,
  );
  return error as Error;
}

const trusted = () => ({ allowLoopback: true, ca: origin.ca });

describe("the egress guard", () => {
  it("makes an HTTPS call to an admitted address and answers status and body", async () => {
    const answer = await egressRequest(`${origin.url}/ip`, trusted());
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body.toString())).toEqual({ ip: "127.0.0.1" });
  });

  it("answers a non-2xx status for its caller to judge", async () => {
    const answer = await egressRequest(`${origin.url}/status/503`, trusted());
    expect(answer.status).toBe(503);
  });

  it("refuses every scheme but HTTPS, without connecting", async () => {
    const before = plain.requests;
    const error = await refusal(`${plain.url}/ip`, { allowLoopback: true });
    expect(error).toBeInstanceOf(EgressRefusedError);
    expect((error as EgressRefusedError).code).toBe(ErrorCode.egressRefused);
    expect(error.message).toMatch(/HTTPS only/);
    expect(plain.requests).toBe(before);
  });

  it("refuses credentials in the URL", async () => {
    const error = await refusal(`https://user:pw@127.0.0.1:${origin.port}/ip`, trusted());
    expect(error).toBeInstanceOf(EgressRefusedError);
    expect(error.message).not.toContain("pw");
  });

  const internal = [
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "carrier-grade NAT"],
    ["169.254.1.1", "link-local"],
    ["169.254.169.254", "cloud metadata"],
    ["0.0.0.0", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["[fd00:ec2::254]", "cloud metadata"],
    ["[fe80::1]", "link-local"],
    ["[fc00::1]", "private"],
    ["[::]", "unspecified"],
    ["[::ffff:10.0.0.1]", "private"],
  ] as const;

  for (const [host, kind] of internal) {
    it(`refuses ${host} (${kind}), with the loopback allowance too`, async () => {
      const error = await refusal(`https://${host}:${origin.port}/ip`, trusted());
      expect(error).toBeInstanceOf(EgressRefusedError);
      expect(error.message).toContain(kind);
    });
  }

  it("refuses loopback literals without the allowance", async () => {
    // 0x7f.1 is 127.0.0.1 as URLs (and inet_aton) read it.
    for (const host of ["127.0.0.1", "127.9.9.9", "[::1]", "0x7f.1"]) {
      const error = await refusal(`https://${host}:${origin.port}/ip`, { ca: origin.ca });
      expect(error, host).toBeInstanceOf(EgressRefusedError);
      expect(error.message, host).toContain("loopback");
    }
  });

  it("refuses a name that resolves to loopback (localhost) without the allowance", async () => {
    const before = origin.requests;
    const error = await refusal(`https://localhost:${origin.port}/ip`, { ca: origin.ca });
    expect(error).toBeInstanceOf(EgressRefusedError);
    expect(error.message).toMatch(/loopback address \(localhost resolves to it\)/);
    expect(origin.requests).toBe(before);
  });

  it("refuses the metadata names whatever they resolve to", async () => {
    for (const host of ["metadata.google.internal", "metadata", "METADATA.google.internal."]) {
      const error = await refusal(`https://${host}/computeMetadata/v1/`, trusted());
      expect(error, host).toBeInstanceOf(EgressRefusedError);
      expect(error.message, host).toContain("cloud metadata");
    }
  });

  it("names host and path in its errors, never the query", async () => {
    const error = await refusal("https://10.0.0.8/v1/list?api_key=SECRET-KEY", trusted());
    expect(error.message).toContain("10.0.0.8/v1/list");
    expect(errorChainText(error)).not.toContain("SECRET-KEY");
    const failed = await refusal(`${origin.url}/status/302?token=SECRET-TOKEN`, trusted());
    expect(errorChainText(failed)).not.toContain("SECRET-TOKEN");
  });

  it("refuses a redirect, naming its status", async () => {
    const error = await refusal(`${origin.url}/status/302`, trusted());
    expect(error).toBeInstanceOf(EgressRefusedError);
    expect(error.message).toMatch(/redirect \(302\)/);
  });

  it("refuses an answer larger than maxBytes, declared or not", async () => {
    const declared = await refusal(`${origin.url}/bytes/2048`, { ...trusted(), maxBytes: 1024 });
    expect(declared).toBeInstanceOf(EgressRefusedError);
    expect(declared.message).toMatch(/more than 1024 bytes/);
    // /close has no length: the guard counts what arrives.
    const streamed = await refusal(`${origin.url}/close`, { ...trusted(), maxBytes: 4 });
    expect(streamed).toBeInstanceOf(EgressRefusedError);
    const whole = await egressRequest(`${origin.url}/bytes/1024`, {
      ...trusted(),
      maxBytes: 1024,
    });
    expect(whole.body.length).toBe(1024);
  });

  it("gives up at its deadline", async () => {
    const started = Date.now();
    const error = await refusal(`${origin.url}/hang`, { ...trusted(), timeoutMs: 300 });
    expect(error).toBeInstanceOf(VendorCallError);
    expect(error.message).toMatch(/did not answer within 300 ms/);
    expect((error as VendorCallError).status).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("stops when its signal is aborted", async () => {
    const controller = new AbortController();
    const before = origin.requests;
    const pending = egressRequest(`${origin.url}/hang`, {
      ...trusted(),
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await waitUntil(() => origin.requests > before, { message: "the hanging request to arrive" });
    controller.abort();
    const error = await pending;
    expect(error).toBeInstanceOf(VendorCallError);
    expect((error as Error).message).toMatch(/cancelled/);
  });

  it("trusts the system store when no CA is given: the test CA is not in it", async () => {
    const error = await refusal(`${origin.url}/ip`, { allowLoopback: true });
    expect(error).toBeInstanceOf(VendorCallError);
    expect(errorChainText(error)).toMatch(/certificate/i);
  });
});

describe("checkEgressHost (an admin saving a descriptor)", () => {
  it("takes a vendor's name, resolved only at call time", () => {
    expect(checkEgressHost("api.vendor.example")).toBeUndefined();
    expect(checkEgressHost("203.0.113.7")).toBeUndefined();
  });

  it("refuses internal literals, local names and the metadata names", () => {
    for (
      const host of [
        "10.0.0.1",
        "169.254.169.254",
        "[fd00:ec2::254]",
        "127.0.0.1",
        "2130706433",
        "localhost",
        "api.localhost",
        "db.internal",
        "printer.local",
        "metadata.google.internal",
        "metadata",
        "",
      ]
    ) {
      expect(checkEgressHost(host), host).toEqual(expect.any(String));
    }
  });

  it("admits loopback with the allowance, and nothing else it refuses", () => {
    expect(checkEgressHost("127.0.0.1", { allowLoopback: true })).toBeUndefined();
    expect(checkEgressHost("localhost", { allowLoopback: true })).toBeUndefined();
    expect(checkEgressHost("10.0.0.1", { allowLoopback: true })).toEqual(expect.any(String));
    expect(checkEgressHost("metadata", { allowLoopback: true })).toEqual(expect.any(String));
  });
});
