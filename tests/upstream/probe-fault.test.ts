/** Probes through our fault proxy in every scheme, and each of its failures. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probe, type ProbeOptions, type ProbeResult } from "../../control/upstream/index.ts";
import { ErrorCode } from "../../shared/errors.ts";
import {
  HandshakeFailure,
  UpstreamConnectError,
  UpstreamError,
  UpstreamFirstByteError,
  UpstreamHandshakeError,
  UpstreamIdleError,
  UpstreamRefusedError,
} from "../../shared/proxy-protocol/errors.ts";
import type { UpstreamProxy, UpstreamScheme } from "../../shared/proxy-protocol/types.ts";
import {
  FaultMode,
  type FaultProxy,
  startFaultProxy,
} from "../../testkit/upstreams/fault-proxy.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { refusingAddress } from "../../testkit/ports.ts";
import { waitUntil } from "../../testkit/wait.ts";

const auth = { username: "bob", password: "pa:ss@w0rd" };
let origin: Origin;
let secureOrigin: Origin;
/** Working proxies that require credentials, leaving from 127.0.0.4 and 127.0.0.5. */
let good: FaultProxy;
let goodTls: FaultProxy;
/** Proxies whose mode each test sets. */
let faulty: FaultProxy;
let faultyTls: FaultProxy;

beforeAll(async () => {
  [origin, secureOrigin, good, goodTls, faulty, faultyTls] = await Promise.all([
    startOrigin(),
    startOrigin({ tls: true }),
    startFaultProxy({ auth, bindAddress: "127.0.0.4" }),
    startFaultProxy({ auth, bindAddress: "127.0.0.5", tls: true }),
    startFaultProxy(),
    startFaultProxy({ tls: true }),
  ]);
});

afterAll(async () => {
  await Promise.all(
    [origin, secureOrigin, good, goodTls, faulty, faultyTls].map((server) => server?.close()),
  );
});

/** The probe's result, or what it rejected with. */
function attempt(options: ProbeOptions): Promise<ProbeResult | unknown> {
  return probe({ targetTls: { ca: secureOrigin.ca }, ...options }).then(
    (result) => result,
    (error: unknown) => error,
  );
}

interface Case {
  name: string;
  proxy: UpstreamProxy;
  url: string;
  tls?: { ca?: string };
  /** An absolute-form request rather than a tunnel. */
  forward: boolean;
}

/** One case per scheme and path through `plain`/`secure` (the same mode on both). */
function cases(plain: FaultProxy, secure: FaultProxy, credentials?: typeof auth | null): Case[] {
  const http = `http://localhost:${origin.port}/ip`;
  const https = `https://localhost:${secureOrigin.port}/ip`;
  const tls = { ca: secure.ca };
  const through = (proxy: FaultProxy, scheme: UpstreamScheme) => proxy.proxy(scheme, credentials);
  return [
    { name: "http forward", proxy: through(plain, "http"), url: http, forward: true },
    { name: "http CONNECT", proxy: through(plain, "http"), url: https, forward: false },
    { name: "https forward", proxy: through(secure, "https"), url: http, tls, forward: true },
    { name: "https CONNECT", proxy: through(secure, "https"), url: https, tls, forward: false },
    { name: "socks4", proxy: through(plain, "socks4"), url: http, forward: false },
    { name: "socks4 to https", proxy: through(plain, "socks4"), url: https, forward: false },
    { name: "socks5", proxy: through(plain, "socks5"), url: http, forward: false },
    { name: "socks5 to https", proxy: through(plain, "socks5"), url: https, forward: false },
  ];
}

async function settle(...proxies: FaultProxy[]): Promise<void> {
  await waitUntil(() => proxies.every((proxy) => proxy.connectionsOpen === 0), {
    timeoutMs: 5_000,
    message: "fault proxy connections to close",
  });
}

describe("probe through the fault proxy", () => {
  it("works in every scheme with credentials, exits from the bind address", async () => {
    for (const test of cases(good, goodTls)) {
      const result = await attempt({
        proxy: test.proxy,
        url: test.url,
        timeoutMs: 5_000,
        tls: test.tls,
      });
      expect(result, test.name).toMatchObject({ ok: true, status: 200 });
      const expected = test.proxy.scheme === "https" ? "127.0.0.5" : "127.0.0.4";
      expect((result as ProbeResult).exitIp, test.name).toBe(expected);
      // The name went to the proxy unresolved.
      const seen = (test.proxy.scheme === "https" ? goodTls : good).requests.at(-1)!;
      expect(seen.host, test.name).toBe("localhost");
      expect(seen.username, test.name).toBe("bob");
    }
    await settle(good, goodTls);
  });

  it("a wrong password is a handshake error (407, SOCKS auth failure)", async () => {
    const wrong = { username: "bob", password: "wrong-secret" };
    for (const test of cases(good, goodTls, wrong)) {
      const error = await attempt({
        proxy: test.proxy,
        url: test.url,
        timeoutMs: 5_000,
        tls: test.tls,
      });
      if (test.proxy.scheme === "socks4") {
        // SOCKS4 carries a user id only: the right username passes.
        expect(error, test.name).toMatchObject({ ok: true });
        continue;
      }
      expect(error, test.name).toBeInstanceOf(UpstreamHandshakeError);
      const failure = error as UpstreamHandshakeError;
      expect(failure.code).toBe(ErrorCode.upstreamHandshake);
      expect(failure.message).not.toContain("wrong-secret");
      if (test.proxy.scheme === "socks5") {
        expect(failure.reason, test.name).toBe(HandshakeFailure.authFailed);
        expect(failure.replyCode, test.name).toBe(1);
      } else {
        expect(failure.reason, test.name).toBe(HandshakeFailure.authRequired);
        expect(failure.status, test.name).toBe(407);
      }
    }
    const socks4 = await attempt({
      proxy: good.proxy("socks4", { username: "mallory", password: "" }),
      url: `${origin.url}/ip`,
      timeoutMs: 5_000,
    });
    expect(socks4).toMatchObject({ reason: HandshakeFailure.authFailed, replyCode: 93 });
    await settle(good, goodTls);
  });

  it("hang: fails at the deadline in the phase it hung", async () => {
    faulty.setMode(FaultMode.hang);
    faultyTls.setMode(FaultMode.hang);
    const timeoutMs = 300;
    await Promise.all(
      cases(faulty, faultyTls).map(async (test) => {
        const started = performance.now();
        const error = await attempt({ proxy: test.proxy, url: test.url, timeoutMs, tls: test.tls });
        const elapsedMs = performance.now() - started;
        expect(elapsedMs, test.name).toBeGreaterThanOrEqual(timeoutMs - 5);
        expect(elapsedMs, test.name).toBeLessThan(timeoutMs + 1_000);
        expect((error as UpstreamError).timedOut, test.name).toBe(true);
        if (test.forward) {
          expect(error, test.name).toBeInstanceOf(UpstreamFirstByteError);
          expect((error as UpstreamError).code).toBe(ErrorCode.upstreamFirstByte);
        } else {
          expect(error, test.name).toBeInstanceOf(UpstreamHandshakeError);
          expect((error as UpstreamHandshakeError).reason).toBe(HandshakeFailure.timeout);
        }
      }),
    );
    await settle(faulty, faultyTls);
  });

  it("refuse: a reset is a connect or handshake error, at once", async () => {
    faulty.setMode(FaultMode.refuse);
    faultyTls.setMode(FaultMode.refuse);
    for (const test of cases(faulty, faultyTls)) {
      const started = performance.now();
      const error = await attempt({
        proxy: test.proxy,
        url: test.url,
        timeoutMs: 5_000,
        tls: test.tls,
      });
      expect(performance.now() - started).toBeLessThan(2_000);
      // The reset can land before or after the connect completes on our side.
      expect(
        error instanceof UpstreamConnectError || error instanceof UpstreamHandshakeError,
        `${test.name}: ${String(error)}`,
      ).toBe(true);
      expect((error as UpstreamError).timedOut).toBe(false);
    }
    await settle(faulty, faultyTls);
  });

  it("a closed port is UpstreamRefusedError", async () => {
    const error = await attempt({
      proxy: { scheme: "socks5", ...refusingAddress(origin.port) },
      url: `${origin.url}/ip`,
      timeoutMs: 2_000,
    });
    expect(error).toBeInstanceOf(UpstreamRefusedError);
    expect((error as UpstreamRefusedError).code).toBe(ErrorCode.upstreamRefused);
  });

  it("502: a handshake error with the status or reply code; forwarded, a non-2xx answer", async () => {
    faulty.setMode(FaultMode.status502);
    faultyTls.setMode(FaultMode.status502);
    for (const test of cases(faulty, faultyTls)) {
      const error = await attempt({
        proxy: test.proxy,
        url: test.url,
        timeoutMs: 5_000,
        tls: test.tls,
      });
      if (test.forward) {
        // A forwarding proxy's 502 looks like the target's: the check just fails.
        expect(error, test.name).toMatchObject({ ok: false, status: 502 });
      } else if (test.proxy.scheme === "socks5") {
        expect(error, test.name).toMatchObject({ reason: HandshakeFailure.rejected, replyCode: 1 });
      } else if (test.proxy.scheme === "socks4") {
        expect(error, test.name).toMatchObject({
          reason: HandshakeFailure.rejected,
          replyCode: 91,
        });
      } else {
        expect(error, test.name).toBeInstanceOf(UpstreamHandshakeError);
        expect(error, test.name).toMatchObject({ reason: HandshakeFailure.status, status: 502 });
      }
    }
    await settle(faulty, faultyTls);
  });

  it("407: a handshake error with the status, or the SOCKS auth failure", async () => {
    faulty.setMode(FaultMode.status407);
    faultyTls.setMode(FaultMode.status407);
    for (const credentials of [null, auth]) {
      for (const test of cases(faulty, faultyTls, credentials)) {
        const error = await attempt({
          proxy: test.proxy,
          url: test.url,
          timeoutMs: 5_000,
          tls: test.tls,
        });
        expect(error, test.name).toBeInstanceOf(UpstreamHandshakeError);
        if (test.proxy.scheme === "socks5") {
          expect(error, test.name).toMatchObject({
            reason: HandshakeFailure.authFailed,
            replyCode: credentials ? 1 : 0xff,
          });
        } else if (test.proxy.scheme === "socks4") {
          expect(error, test.name).toMatchObject({
            reason: HandshakeFailure.authFailed,
            replyCode: 93,
          });
        } else {
          expect(error, test.name).toMatchObject({
            reason: HandshakeFailure.authRequired,
            status: 407,
          });
        }
      }
    }
    await settle(faulty, faultyTls);
  });

  it("slow: still answers, late; a stall mid-answer is an idle error", async () => {
    faulty.setMode(FaultMode.slow);
    const slow = await attempt({
      proxy: faulty.proxy("socks5"),
      url: `${origin.url}/ip`,
      timeoutMs: 5_000,
    });
    expect(slow).toMatchObject({ ok: true, exitIp: "127.0.0.1" });
    expect((slow as ProbeResult).latencyMs).toBeGreaterThanOrEqual(45);
    faulty.setMode(FaultMode.pass);
    const stalled = await attempt({
      proxy: faulty.proxy("http"),
      url: `${origin.url}/slow?chunks=20&delayMs=150`,
      timeoutMs: 400,
    });
    expect(stalled).toBeInstanceOf(UpstreamIdleError);
    expect((stalled as UpstreamIdleError).timedOut).toBe(true);
    expect((stalled as UpstreamIdleError).code).toBe(ErrorCode.upstreamIdle);
    await settle(faulty);
  });

  it("drop-mid: a cut mid-answer is an idle error, not a timeout", async () => {
    faulty.setMode(FaultMode.dropMid);
    for (const scheme of ["http", "socks5"] as const) {
      const error = await attempt({
        proxy: faulty.proxy(scheme),
        url: `${origin.url}/bytes/100000`,
        timeoutMs: 5_000,
      });
      expect(error, scheme).toBeInstanceOf(UpstreamIdleError);
      expect((error as UpstreamIdleError).timedOut).toBe(false);
    }
    await settle(faulty);
  });

  it("an abort signal cuts a probe at once", async () => {
    faulty.setMode(FaultMode.hang);
    const controller = new AbortController();
    const before = faulty.connectionsSeen;
    const pending = attempt({
      proxy: faulty.proxy("http"),
      url: `${origin.url}/ip`,
      timeoutMs: 10_000,
      signal: controller.signal,
    });
    await waitUntil(() => faulty.connectionsSeen > before, { message: "the probe to connect" });
    controller.abort();
    const error = await pending;
    expect((error as Error).name).toBe("AbortError");
    const early = await attempt({
      proxy: faulty.proxy("http"),
      url: `${origin.url}/ip`,
      timeoutMs: 10_000,
      signal: AbortSignal.abort(),
    });
    expect((early as Error).name).toBe("AbortError");
    await settle(faulty);
  });
});
