/**
 * The provider emulator's self-test, through Node's fetch and read by the answer parser: it hands
 * out its exits `per_call` at a time with their lifetime (in JSON, text and CSV, `ttl_seconds`
 * or `expires_at` in each form), leases them until they expire and then hands them out again,
 * runs dry when every exit is leased, and answers as told: empty, duplicates only, 500, 429 with
 * Retry-After, slowly, more than a call should, or 401 without its key. It counts calls, calls in
 * flight and the most at once, and proxies served. Real tinyproxy exits it hands out carry a
 * request to an echo origin; over HTTPS it answers the egress guard.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type AnswerSpec,
  classifyFetch,
  FetchKind,
  parseAnswer,
} from "../../control/provider-api/answer.ts";
import { egressRequest } from "../../control/egress/guard.ts";
import { type Echo, startEcho } from "../../testkit/upstreams/echo.ts";
import {
  PROVIDER_EMULATOR_JSON,
  type ProviderEmulator,
  type ProviderEmulatorOptions,
  type ProviderExit,
  startProviderEmulator,
} from "../../testkit/upstreams/provider-emulator.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { waitUntil } from "../../testkit/wait.ts";

const exit = (n: number, extra: Partial<ProviderExit> = {}): ProviderExit => ({
  host: `198.51.100.${n}`,
  port: 8000 + n,
  username: `user${n}`,
  password: `pass${n}`,
  country: n % 2 === 0 ? "US" : "DE",
  ...extra,
});
const EXITS = Array.from({ length: 6 }, (_, i) => exit(i + 1));

const SPECS: Record<"json" | "text" | "csv", AnswerSpec> = {
  json: { format: "json", ...PROVIDER_EMULATOR_JSON, defaultScheme: "http", safetyMarginMs: 0 },
  text: { format: "text", defaultScheme: "http", defaultTtlSeconds: 30, safetyMarginMs: 0 },
  csv: { format: "csv", defaultScheme: "http", safetyMarginMs: 0 },
};

const emulators: ProviderEmulator[] = [];
afterEach(async () => {
  await Promise.all(emulators.splice(0).map((emulator) => emulator.close()));
});

async function emulator(options: ProviderEmulatorOptions = {}): Promise<ProviderEmulator> {
  const started = await startProviderEmulator({ exits: EXITS, perCall: 2, ...options });
  emulators.push(started);
  return started;
}

/** One call, its body read by the parser with the format's spec at `nowMs`. */
async function fetchProxies(
  provider: ProviderEmulator,
  format: keyof typeof SPECS = "json",
  nowMs = Date.now(),
  init: RequestInit & { query?: string } = {},
) {
  const response = await fetch(`${provider.fetchUrl}${init.query ?? ""}`, init);
  const body = await response.text();
  return { response, answer: parseAnswer(body, SPECS[format], nowMs) };
}

describe("normal answers", () => {
  it("hands out per_call exits at a time with their TTL, then runs dry", async () => {
    const provider = await emulator({ ttlSeconds: 120 });
    const before = Date.now();
    const first = await fetchProxies(provider);
    expect(first.response.status).toBe(200);
    expect(first.response.headers.get("content-type")).toBe("application/json");
    expect(first.answer.proxies).toEqual([
      expect.objectContaining({
        scheme: "http",
        host: "198.51.100.1",
        port: 8001,
        username: "user1",
        password: "pass1",
        country: "DE",
      }),
      expect.objectContaining({ host: "198.51.100.2", country: "US" }),
    ]);
    for (const proxy of first.answer.proxies) {
      expect(proxy.expiresAtMs).toBeGreaterThanOrEqual(before + 119_000);
      expect(proxy.expiresAtMs).toBeLessThanOrEqual(Date.now() + 121_000);
    }
    const second = await fetchProxies(provider);
    expect(second.answer.proxies.map((p) => p.host)).toEqual(["198.51.100.3", "198.51.100.4"]);
    const third = await fetchProxies(provider, "json", Date.now(), { query: "?count=5" });
    expect(third.answer.proxies.map((p) => p.host)).toEqual(["198.51.100.5", "198.51.100.6"]);
    const dry = await fetchProxies(provider);
    expect(classifyFetch({ answer: dry.answer }, new Set()).kind).toBe(FetchKind.empty);
    expect(provider.calls).toBe(4);
    expect(provider.served).toBe(6);
    expect(provider.handedOut.map((lease) => lease.call)).toEqual([1, 1, 2, 2, 3, 3]);
    expect(provider.answered.normal).toBe(4);
  });

  it("hands an exit out again once its lease is over, and on releaseAll", async () => {
    let now = Date.parse("2030-01-01T00:00:00Z");
    const provider = await emulator({
      exits: EXITS.slice(0, 2),
      ttlSeconds: 60,
      nowMs: () => now,
    });
    expect((await fetchProxies(provider, "json", now)).answer.proxies).toHaveLength(2);
    expect((await fetchProxies(provider, "json", now)).answer.proxies).toHaveLength(0);
    now += 60_000;
    const again = await fetchProxies(provider, "json", now);
    expect(again.answer.proxies.map((p) => [p.host, p.expiresAtMs - now])).toEqual([
      ["198.51.100.1", 60_000],
      ["198.51.100.2", 60_000],
    ]);
    provider.releaseAll();
    expect((await fetchProxies(provider, "json", now)).answer.proxies).toHaveLength(2);
    provider.addExits([exit(9)]);
    expect((await fetchProxies(provider, "json", now)).answer.proxies.map((p) => p.host))
      .toEqual(["198.51.100.9"]);
  });

  it("writes expires_at as ISO 8601, epoch seconds or epoch milliseconds", async () => {
    const now = Date.parse("2030-01-01T00:00:00Z");
    const provider = await emulator({
      expiry: "expires_at",
      ttlSeconds: 90,
      nowMs: () => now,
      exits: Array.from({ length: 9 }, (_, i) => exit(i + 1)),
    });
    for (const form of ["iso", "epoch_seconds", "epoch_ms"] as const) {
      provider.configure({ expiresAtForm: form });
      for (const format of ["json", "csv"] as const) {
        provider.configure({ format });
        const { response, answer } = await fetchProxies(provider, format, now);
        expect(response.status).toBe(200);
        expect(answer.proxies.map((p) => p.expiresAtMs), `${form} ${format}`).toEqual(
          answer.proxies.map(() => now + 90_000),
        );
      }
    }
  });

  it("answers text lines and quoted CSV the parser reads back exactly", async () => {
    const tricky = [
      exit(1, { password: 'p,a"s:s' }),
      exit(2, { scheme: "socks5", password: "p@ss word" }),
      exit(3, { username: undefined, password: undefined }),
    ];
    for (const format of ["text", "csv"] as const) {
      const provider = await emulator({ exits: tricky, perCall: 3, format, ttlSeconds: 30 });
      const { response, answer } = await fetchProxies(provider, format);
      expect(response.headers.get("content-type")).toBe(
        format === "text" ? "text/plain" : "text/csv",
      );
      expect(answer.counts.invalid, format).toBe(0);
      expect(answer.proxies.map((p) => [p.scheme, p.username, p.password]), format).toEqual([
        ["http", "user1", 'p,a"s:s'],
        ["socks5", "user2", "p@ss word"],
        ["http", null, null],
      ]);
      expect(answer.proxies.map((p) => p.country)).toEqual(
        format === "csv" ? ["DE", "US", "DE"] : [null, null, null],
      );
    }
  });
});

describe("modes", () => {
  it("answers empty, as a provider with nothing to give", async () => {
    for (const format of ["json", "text", "csv"] as const) {
      const provider = await emulator({ format });
      provider.setMode({ kind: "empty" });
      const { response, answer } = await fetchProxies(provider, format);
      expect(response.status).toBe(200);
      expect(answer.counts.entries, format).toBe(0);
      expect(classifyFetch({ answer }, new Set()).kind).toBe(FetchKind.empty);
      expect(provider.answered.empty).toBe(1);
      expect(provider.handedOut).toHaveLength(0);
    }
  });

  it("answers duplicates only: proxies handed out before, with a new lifetime", async () => {
    let now = Date.parse("2030-01-01T00:00:00Z");
    const provider = await emulator({ ttlSeconds: 60, nowMs: () => now });
    const first = await fetchProxies(provider, "json", now);
    const owned = new Set(first.answer.proxies.map((p) => p.key));
    now += 10_000;
    provider.setMode({ kind: "duplicates" });
    const again = await fetchProxies(provider, "json", now);
    expect(again.answer.proxies.map((p) => p.key).sort()).toEqual([...owned].sort());
    expect(again.answer.proxies.every((p) => p.expiresAtMs === now + 60_000)).toBe(true);
    const result = classifyFetch({ answer: again.answer }, owned);
    expect(result.kind).toBe(FetchKind.duplicateOnly);
    expect(result.counts).toMatchObject({ owned: 2, new: 0 });
    expect(provider.handedOut).toHaveLength(2);
    expect(provider.served).toBe(4);
  });

  it("answers 500, and 429 with Retry-After", async () => {
    const provider = await emulator();
    provider.setMode({ kind: "error" });
    const failed = await fetch(provider.fetchUrl);
    expect(failed.status).toBe(500);
    await failed.text();
    provider.setMode({ kind: "error", status: 503 });
    expect((await fetch(provider.fetchUrl)).status).toBe(503);
    provider.setMode({ kind: "rate_limited", retryAfterSeconds: 7 });
    const limited = await fetch(provider.fetchUrl);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("7");
    expect(provider.answered).toMatchObject({ error: 2, rate_limited: 1, normal: 0 });
    expect(provider.handedOut).toHaveLength(0);
  });

  it("answers more proxies than a call should (oversupply)", async () => {
    const provider = await emulator({ perCall: 2 });
    provider.setMode({ kind: "oversupply", count: 5 });
    const { answer } = await fetchProxies(provider);
    expect(answer.proxies).toHaveLength(5);
    expect(provider.served).toBe(5);
  });

  it("answers queued modes one call each, then the standing one", async () => {
    const provider = await emulator();
    provider.queue({ kind: "empty" }, { kind: "error" }, { kind: "rate_limited" });
    const statuses: number[] = [];
    for (let call = 0; call < 4; call++) {
      const response = await fetch(provider.fetchUrl);
      statuses.push(response.status);
      await response.text();
    }
    expect(statuses).toEqual([200, 500, 429, 200]);
    expect(provider.answered).toMatchObject({ empty: 1, error: 1, rate_limited: 1, normal: 1 });
  });

  it("answers slowly; a caller that gives up is no longer in flight", async () => {
    const provider = await emulator();
    provider.setMode({ kind: "slow", delayMs: 60_000 });
    await expect(fetch(provider.fetchUrl, { signal: AbortSignal.timeout(100) })).rejects.toThrow();
    await waitUntil(() => provider.inFlight === 0, { message: "the aborted call to leave" });
    expect(provider.calls).toBe(1);
    expect(provider.handedOut).toHaveLength(0);
    provider.setMode({ kind: "normal", delayMs: 30 });
    const started = performance.now();
    const { answer } = await fetchProxies(provider);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    expect(answer.proxies).toHaveLength(2);
  });

  it("refuses calls without its API key (401), from any of the three places", async () => {
    const provider = await emulator({ apiKey: "k-123" });
    expect((await fetch(provider.fetchUrl)).status).toBe(401);
    expect((await fetch(`${provider.fetchUrl}?api_key=wrong`)).status).toBe(401);
    const bearer = { headers: { Authorization: "Bearer k-123" } };
    expect((await fetch(provider.fetchUrl, bearer)).status).toBe(200);
    const header = { headers: { "X-Api-Key": "k-123" } };
    expect((await fetch(provider.fetchUrl, header)).status).toBe(200);
    expect((await fetch(`${provider.fetchUrl}?api_key=k-123`)).status).toBe(200);
    expect(provider.answered).toMatchObject({ unauthorized: 2, normal: 3 });
    expect(provider.calls).toBe(5);
  });

  it("takes POST calls and records what each call sent", async () => {
    const provider = await emulator();
    const response = await fetch(`${provider.fetchUrl}?count=1`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-trace": "t1" },
      body: JSON.stringify({ want: 1 }),
    });
    expect(response.status).toBe(200);
    expect(provider.requests.at(-1)).toMatchObject({
      method: "POST",
      url: "/proxies?count=1",
      headers: expect.objectContaining({ "x-trace": "t1" }),
      body: '{"want":1}',
    });
    expect((await fetch(`${provider.url}/other`)).status).toBe(404);
    expect(provider.calls).toBe(1);
  });
});

describe("counts", () => {
  it("counts calls in flight at once while held, and the most seen", async () => {
    const provider = await emulator({ exits: Array.from({ length: 20 }, (_, i) => exit(i + 1)) });
    const release = provider.hold();
    const pending = Array.from({ length: 5 }, () => fetchProxies(provider));
    await provider.whenInFlight(5);
    expect(provider.inFlight).toBe(5);
    expect(provider.handedOut).toHaveLength(0);
    release();
    const answers = await Promise.all(pending);
    const keys = answers.flatMap(({ answer }) => answer.proxies.map((p) => p.key));
    expect(new Set(keys).size).toBe(10);
    expect(provider.maxInFlight).toBe(5);
    await waitUntil(() => provider.inFlight === 0, { message: "the calls to end" });
    await fetchProxies(provider);
    expect(provider.maxInFlight).toBe(5);
    provider.resetCounts();
    expect([provider.calls, provider.maxInFlight, provider.served]).toEqual([0, 0, 0]);
    await fetchProxies(provider);
    expect([provider.calls, provider.maxInFlight, provider.served]).toEqual([1, 1, 2]);
    expect(provider.answered.normal).toBe(1);
  });
});

describe("real exits", () => {
  let echo: Echo;
  const proxies: Tinyproxy[] = [];

  beforeAll(async () => {
    echo = await startEcho();
    for (const bindAddress of ["127.0.0.2", "127.0.0.3"]) {
      proxies.push(
        await startTinyproxy({ bindAddress, auth: { username: "exit", password: "exit-pw" } }),
      );
    }
  });

  afterAll(async () => {
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await echo?.close();
  });

  it("hands out tinyproxy exits a request leaves through", async () => {
    const provider = await emulator({
      exits: proxies.map((proxy) => ({ ...proxy.proxy, country: "NL" })),
      perCall: 2,
    });
    const { answer } = await fetchProxies(provider);
    expect(answer.proxies).toHaveLength(2);
    const seen: string[] = [];
    for (const proxy of answer.proxies) {
      expect(proxy.country).toBe("NL");
      const credentials = { username: proxy.username ?? "", password: proxy.password ?? "" };
      seen.push(exitOf(await viaProxy(proxy.port, credentials, echo.url)));
    }
    expect(seen).toEqual(["127.0.0.2", "127.0.0.3"]);
  });
});

describe("TLS", () => {
  it("answers the egress guard over HTTPS with the test CA", async () => {
    const provider = await emulator({ tls: true });
    expect(provider.fetchUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/proxies$/);
    const answer = await egressRequest(provider.fetchUrl, {
      allowLoopback: true,
      ca: provider.ca,
      timeoutMs: 5_000,
    });
    expect(answer.status).toBe(200);
    expect(parseAnswer(answer.body, SPECS.json, Date.now()).proxies).toHaveLength(2);
  });
});
