/**
 * OCTOPROX_DESTINATION_RESOLUTION=gateway, piece by piece: the guard pins a target to the one
 * address it checked (`pin`), the destination step hands that address on as the request's
 * `dialTarget`, and what goes to the upstream names it: the forwarded head's absolute URI (the
 * client's Host kept), CONNECT's `ip:port`, SOCKS5's address types, plain SOCKS4. The setting
 * itself, and the SOCKS5 reply for a name that does not resolve.
 */
import { describe, expect, it } from "vitest";
import type { Refusal, Target } from "../../shared/routing/contract.ts";
import {
  createDestinationGuard,
  type GuardOptions,
} from "../../shared/routing/destination-guard.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { encodeUpstreamRequestHead } from "../../gateway/net/http/heads.ts";
import { parseAbsoluteTarget, parseRequestHead } from "../../gateway/net/http/parse.ts";
import { AdmissionStage } from "../../gateway/base/admission.ts";
import { Admission, AdmissionTicket } from "../../gateway/net/session/admission-pipeline.ts";
import { admissionSteps } from "../../gateway/net/session/admission-steps.ts";
import { socksReplyForRefusal } from "../../gateway/net/tunnel/socks5-replies.ts";
import { createClientHandshake } from "../../shared/proxy-protocol/handshake.ts";
import { Socks5Reply } from "../../shared/proxy-protocol/socks5.ts";
import { parseGatewaySettings, SettingsError } from "../../shared/settings.ts";
import { basic, feed, section, verifyPassword } from "../../testkit/gateway/feed-fixtures.ts";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** A resolver answering `answers` for every name, counting its calls. */
function resolver(answers: Record<string, string[]>) {
  const calls: string[] = [];
  return {
    calls,
    resolve: (host: string) => {
      calls.push(host);
      return Promise.resolve(answers[host] ?? []);
    },
  };
}

function pinning(options: GuardOptions = {}) {
  const guard = createDestinationGuard({ resolution: "gateway", ...options });
  return (host: string, port = 80) => Promise.resolve(guard.pin!({ host, port }));
}

describe("the guard's pin (gateway resolution)", () => {
  it("pins a name to its first IPv4 address, else its first IPv6 one", async () => {
    const dns = resolver({
      "dual.test": ["2001:db8::7", "203.0.113.7", "203.0.113.8"],
      "six.test": ["2001:DB8:0:0::9", "2001:db8::10"],
    });
    const pin = pinning({ resolve: dns.resolve });
    expect(await pin("dual.test", 8080)).toEqual({ host: "203.0.113.7", port: 8080 });
    expect(await pin("six.test", 443)).toEqual({ host: "2001:db8::9", port: 443 });
  });

  it("refuses a name when any address it got is forbidden (a mixed answer pins nothing)", async () => {
    const dns = resolver({ "mixed.test": ["203.0.113.7", "10.0.0.5"] });
    const pin = pinning({ resolve: dns.resolve });
    expect(await pin("mixed.test")).toMatchObject({
      status: 403,
      proxyStatus: "destination_ip_prohibited",
      reason: expect.stringContaining("mixed.test resolves to 10.0.0.5"),
    });
  });

  it("refuses a name without an address (502 dns_error), and asks again next time", async () => {
    const dns = resolver({});
    const pin = pinning({ resolve: dns.resolve });
    for (let round = 0; round < 2; round++) {
      expect(await pin("nowhere.test")).toMatchObject({
        status: 502,
        proxyStatus: "dns_error",
        rejection: "destination_prohibited",
      });
    }
    expect(dns.calls).toEqual(["nowhere.test", "nowhere.test"]);
    // A resolver that fails is the same: nothing checked, nothing sent.
    const failing = pinning({ resolve: () => Promise.reject(new Error("SERVFAIL")) });
    expect(await failing("broken.test")).toMatchObject({ status: 502 });
  });

  it("keeps the pinned address for the cache's while: one lookup, the same address", async () => {
    let nowMs = 0;
    const answers: Record<string, string[]> = { "turns.test": ["203.0.113.7"] };
    const dns = resolver(answers);
    const pin = pinning({ resolve: dns.resolve, nowMs: () => nowMs, cacheMs: 1_000 });
    expect(await pin("turns.test")).toEqual({ host: "203.0.113.7", port: 80 });
    answers["turns.test"] = ["127.0.0.3"];
    expect(await pin("turns.test")).toEqual({ host: "203.0.113.7", port: 80 });
    expect(dns.calls).toHaveLength(1);
    nowMs = 1_001;
    // Past it, the new answer is checked like the first: refused, never sent on.
    expect(await pin("turns.test")).toMatchObject({ status: 403 });
  });

  it("sends literals in their plain form, and checks them as the upstream would read them", async () => {
    const pin = pinning();
    expect(await pin("3405803783")).toEqual({ host: "203.0.113.7", port: 80 });
    expect(await pin("203.0.113.7")).toEqual({ host: "203.0.113.7", port: 80 });
    expect(await pin("[2001:DB8::7]")).toEqual({ host: "2001:db8::7", port: 80 });
    expect(await pin("2130706433")).toMatchObject({ status: 403 });
    expect(await pin("::ffff:10.0.0.1")).toMatchObject({ status: 403 });
    // localhost is 127.0.0.1 without a lookup; an allowed block lets it through, pinned.
    expect(await pin("localhost")).toMatchObject({ status: 403 });
    const allowing = pinning({ allowCidrs: ["127.0.0.1/32"] });
    expect(await allowing("api.localhost", 81)).toEqual({ host: "127.0.0.1", port: 81 });
  });

  it("leaves upstream resolution's check as it was: a name that does not resolve passes", async () => {
    const guard = createDestinationGuard({ resolve: () => Promise.resolve([]) });
    expect(guard.resolution).toBe("upstream");
    expect(await guard.check({ host: "nowhere.test", port: 80 })).toBeUndefined();
  });
});

describe("the destination step", () => {
  function admissionWith(resolution: "upstream" | "gateway") {
    const router = new CoreRouter({ verifyPassword });
    router.apply(feed([section("c", ["x"])]));
    const guard = createDestinationGuard({
      resolution,
      resolve: () => Promise.resolve(["203.0.113.7"]),
    });
    return new Admission(admissionSteps({ router, guard }));
  }

  it("sets the request's dialTarget to the checked address in gateway mode only", async () => {
    const target: Target = { host: "shop.test", port: 80 };
    const ticket = new AdmissionTicket({ hostname: "198.51.100.7", port: 40_000 });

    const gateway = admissionWith("gateway");
    ticket.begin("http", basic("shop"), target);
    expect(await gateway.run(ticket, AdmissionStage.request)).toBeUndefined();
    expect(ticket.dialTarget).toEqual({ host: "203.0.113.7", port: 80 });
    expect(ticket.target).toBe(target);
    // The next request on the session starts without it.
    ticket.begin("connect", basic("shop"), { host: "10.0.0.1", port: 443 });
    expect(ticket.dialTarget).toBeUndefined();
    expect(await gateway.run(ticket, AdmissionStage.request)).toMatchObject({ status: 403 });
    expect(ticket.dialTarget).toBeUndefined();

    const upstream = admissionWith("upstream");
    ticket.begin("http", basic("shop"), target);
    expect(await upstream.run(ticket, AdmissionStage.request)).toBeUndefined();
    expect(ticket.dialTarget).toBeUndefined();
  });
});

describe("what the upstream is sent", () => {
  const head = parseRequestHead(
    new TextEncoder().encode(
      "GET http://shop.test:8080/cart?id=1 HTTP/1.1\r\nHost: shop.test:8080\r\nAccept: */*\r\n\r\n",
    ),
  );
  const target = parseAbsoluteTarget(head.target);

  it("a forwarded request: the address in the absolute URI, the client's Host kept", () => {
    const v4 = text(
      encodeUpstreamRequestHead(head, target, {
        form: "absolute",
        uriAuthority: "203.0.113.7:8080",
      }),
    );
    expect(v4).toMatch(
      /^GET http:\/\/203\.0\.113\.7:8080\/cart\?id=1 HTTP\/1\.1\r\nHost: shop\.test:8080\r\n/,
    );
    const v6 = text(
      encodeUpstreamRequestHead(head, target, {
        form: "absolute",
        uriAuthority: "[2001:db8::7]:8080",
      }),
    );
    expect(v6).toMatch(
      /^GET http:\/\/\[2001:db8::7\]:8080\/cart\?id=1 HTTP\/1\.1\r\nHost: shop\.test:8080\r\n/,
    );
    // Inside a SOCKS tunnel (already to the address) the origin form and Host are unchanged.
    const origin = text(
      encodeUpstreamRequestHead(head, target, { form: "origin", uriAuthority: "203.0.113.7:8080" }),
    );
    expect(origin).toMatch(/^GET \/cart\?id=1 HTTP\/1\.1\r\nHost: shop\.test:8080\r\n/);
    // Without a pinned address, as before: the client's authority in both.
    const plain = text(encodeUpstreamRequestHead(head, target, { form: "absolute" }));
    expect(plain).toMatch(
      /^GET http:\/\/shop\.test:8080\/cart\?id=1 HTTP\/1\.1\r\nHost: shop\.test:8080\r\n/,
    );
  });

  it("CONNECT to ip:port, IPv6 in brackets", () => {
    const proxy = { scheme: "http" as const, host: "127.0.0.1", port: 3128 };
    expect(text(createClientHandshake(proxy, { host: "203.0.113.7", port: 443 }).start()))
      .toMatch(/^CONNECT 203\.0\.113\.7:443 HTTP\/1\.1\r\nHost: 203\.0\.113\.7:443\r\n/);
    expect(text(createClientHandshake(proxy, { host: "2001:db8::7", port: 443 }).start()))
      .toMatch(/^CONNECT \[2001:db8::7\]:443 HTTP\/1\.1\r\n/);
  });

  it("SOCKS5 with the IPv4 or IPv6 address type, SOCKS4 without its 4a name", () => {
    const socks5 = { scheme: "socks5" as const, host: "127.0.0.1", port: 1080 };
    const connectOf = (host: string) => {
      const handshake = createClientHandshake(socks5, { host, port: 443 });
      handshake.start();
      // The no-authentication method chosen: the CONNECT request follows.
      return handshake.push(Uint8Array.of(5, 0)).write!;
    };
    expect([...connectOf("203.0.113.7")]).toEqual([5, 1, 0, 1, 203, 0, 113, 7, 1, 187]);
    const v6 = connectOf("2001:db8::7");
    expect([...v6.subarray(0, 4)]).toEqual([5, 1, 0, 4]);
    expect([...v6.subarray(4, 20)]).toEqual([
      0x20,
      0x01,
      0x0d,
      0xb8,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      0,
      7,
    ]);
    const socks4 = createClientHandshake(
      { scheme: "socks4", host: "127.0.0.1", port: 1080, username: "u" },
      { host: "203.0.113.7", port: 80 },
    );
    expect([...socks4.start()]).toEqual([4, 1, 0, 80, 203, 0, 113, 7, 117, 0]);
  });

  it("a SOCKS5 client hears host unreachable for a name the gateway could not resolve", () => {
    const unresolved: Refusal = { status: 502, proxyStatus: "dns_error", reason: "" };
    expect(socksReplyForRefusal(unresolved)).toBe(Socks5Reply.hostUnreachable);
    expect(socksReplyForRefusal({ ...unresolved, proxyStatus: "destination_unavailable" }))
      .toBe(Socks5Reply.networkUnreachable);
  });
});

describe("OCTOPROX_DESTINATION_RESOLUTION", () => {
  const base = {
    OCTOPROX_REDIS_URL: "redis://127.0.0.1:6379",
    OCTOPROX_INTERNAL_SECRET: "x".repeat(32),
  };

  it("is upstream by default, takes gateway, and names itself when wrong", () => {
    expect(parseGatewaySettings(base).destinationResolution).toBe("upstream");
    expect(
      parseGatewaySettings({ ...base, OCTOPROX_DESTINATION_RESOLUTION: "Gateway" })
        .destinationResolution,
    ).toBe("gateway");
    expect(() => parseGatewaySettings({ ...base, OCTOPROX_DESTINATION_RESOLUTION: "both" }))
      .toThrow(SettingsError);
    expect(() => parseGatewaySettings({ ...base, OCTOPROX_DESTINATION_RESOLUTION: "both" }))
      .toThrow(/^OCTOPROX_DESTINATION_RESOLUTION must be one of upstream, gateway$/);
  });
});
