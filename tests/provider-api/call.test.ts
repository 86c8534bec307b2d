/**
 * A provider_api connector's fetch call against the provider emulator over TLS, through the
 * egress guard (its CA trusted, loopback admitted as the tests' settings do): the method, URL,
 * query, headers, JSON body and each auth rendered with the credential and `{count}`; a
 * non-2xx answer as an error with its status (and a 429's Retry-After in seconds); the deadline,
 * the signal and the guard's refusals; and no error message that holds the query, a header or
 * the answer.
 */
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  callProvider,
  fetchProvider,
  providerEgress,
  renderFetchCall,
  retryAfterSeconds,
} from "../../control/provider-api/fetch/call.ts";
import {
  type FetchConfig,
  FetchSchema,
  type ProviderApiConfigInput,
} from "../../control/provider-api/config.ts";
import { EgressRefusedError, VendorCallError } from "../../shared/errors.ts";
import { parseControlSettings } from "../../shared/settings.ts";
import {
  type ProviderEmulator,
  startProviderEmulator,
} from "../../testkit/upstreams/provider-emulator.ts";

const API_KEY = "pk-test-9d2e41";
const CREDENTIAL = { api_key: API_KEY, user: "acct", password: "p@ss:word" };

let provider: ProviderEmulator;

beforeAll(async () => {
  provider = await startProviderEmulator({
    tls: true,
    exits: Array.from({ length: 50 }, (_, i) => ({ host: `198.51.100.${i + 1}`, port: 9000 })),
    perCall: 3,
  });
});

afterAll(async () => {
  await provider?.close();
});

function fetchConfig(fields: Partial<ProviderApiConfigInput["fetch"]> = {}): FetchConfig {
  return v.parse(FetchSchema, {
    url: provider.fetchUrl,
    params: { count: "{count}" },
    ...fields,
  });
}

const egress = () => ({ allowLoopback: true, ca: provider.ca });

/** The last call the emulator received. */
const lastCall = () => provider.requests[provider.requests.length - 1];

describe("rendering", () => {
  it("renders the URL's query, headers and a JSON body with the credential and count", async () => {
    const fetch = fetchConfig({
      method: "POST",
      params: { count: "{count}", user: "{credential.user|upper}", fixed: "a b&c" },
      headers: { "X-Client": "octoprox", "X-Account": "{credential.user}" },
      body: { want: "{count}", filters: [{ who: "{credential.user}" }], keep: 7 },
    });
    const answer = await fetchProvider(fetch, CREDENTIAL, 3, egress());
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body.toString("utf8")).data.proxies).toHaveLength(3);
    const call = lastCall();
    expect(call.method).toBe("POST");
    const url = new URL(call.url, "https://provider");
    expect(url.pathname).toBe("/proxies");
    expect(Object.fromEntries(url.searchParams)).toEqual({
      count: "3",
      user: "ACCT",
      fixed: "a b&c",
    });
    expect(call.headers["x-client"]).toBe("octoprox");
    expect(call.headers["x-account"]).toBe("acct");
    expect(call.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(call.body)).toEqual({
      want: "3",
      filters: [{ who: "acct" }],
      keep: 7,
    });
  });

  it("sends each auth: none, bearer, basic, an API key in a header or the query", () => {
    const render = (auth: unknown) =>
      renderFetchCall(
        fetchConfig({ auth: auth as FetchConfig["auth"], headers: { authorization: "x" } }),
        CREDENTIAL,
        5,
      );
    expect(render({ type: "none" }).headers).toEqual({ authorization: "x" });
    expect(render({ type: "bearer", token: "{credential.api_key}" }).headers).toEqual({
      Authorization: `Bearer ${API_KEY}`,
    });
    expect(
      render({ type: "basic", username: "{credential.user}", password: "{credential.password}" })
        .headers.Authorization,
    ).toBe(`Basic ${Buffer.from("acct:p@ss:word").toString("base64")}`);
    const header = render({ type: "api_key", value: "{credential.api_key}", header: "X-Key" });
    expect(header.headers["X-Key"]).toBe(API_KEY);
    expect(render({ type: "api_key", value: "{credential.api_key}" }).headers["X-Api-Key"])
      .toBe(API_KEY);
    const query = render({ type: "api_key", value: "{credential.api_key}", query: "api_key" });
    expect(new URL(query.url).searchParams.get("api_key")).toBe(API_KEY);
    expect(new URL(query.url).searchParams.get("count")).toBe("5");
  });

  it("reaches a provider that requires its key, with each way of sending it", async () => {
    const keyed = await startProviderEmulator({
      tls: true,
      apiKey: API_KEY,
      exits: [{ host: "198.51.100.200", port: 9000 }],
    });
    try {
      const url = keyed.fetchUrl;
      const auths = [
        { type: "bearer", token: "{credential.api_key}" },
        { type: "api_key", value: "{credential.api_key}" },
        { type: "api_key", value: "{credential.api_key}", query: "api_key" },
      ];
      for (const auth of auths) {
        const answer = await fetchProvider(
          v.parse(FetchSchema, { url, auth }),
          CREDENTIAL,
          1,
          { allowLoopback: true, ca: keyed.ca },
        );
        expect(answer.status, JSON.stringify(auth)).toBe(200);
      }
      const refused = await fetchProvider(v.parse(FetchSchema, { url }), CREDENTIAL, 1, {
        allowLoopback: true,
        ca: keyed.ca,
      }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(VendorCallError);
      expect((refused as VendorCallError).status).toBe(401);
      expect(keyed.answered.unauthorized).toBe(1);
    } finally {
      await keyed.close();
    }
  });

  it("refuses a rendered URL that left the host the config wrote", () => {
    const fetch = { ...fetchConfig(), url: "https://provider.example{credential.api_key}/x" };
    expect(() => renderFetchCall(fetch, { api_key: ".evil.example" }, 1)).toThrow(
      EgressRefusedError,
    );
  });
});

describe("answers and failures", () => {
  it("an error status is a VendorCallError with it, the query never in its message", async () => {
    const fetch = fetchConfig({
      auth: { type: "api_key", value: "{credential.api_key}", query: "api_key" },
    });
    provider.queue({ kind: "error", status: 503 }, { kind: "rate_limited", retryAfterSeconds: 42 });
    const failed = await fetchProvider(fetch, CREDENTIAL, 2, egress()).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(VendorCallError);
    expect(failed).toMatchObject({ status: 503, retryAfterSeconds: undefined });
    expect((failed as Error).message).toBe(
      `${new URL(provider.fetchUrl).host}/proxies answered 503`,
    );
    const limited = await fetchProvider(fetch, CREDENTIAL, 2, egress()).catch((e: unknown) => e);
    expect(limited).toMatchObject({ status: 429, retryAfterSeconds: 42 });
    for (const error of [failed, limited]) {
      const text = JSON.stringify({ message: (error as Error).message, ...(error as object) });
      expect(text).not.toContain(API_KEY);
      expect(text).not.toContain("api_key");
      expect(text).not.toContain("too many requests");
    }
  });

  it("the deadline and the signal end a call without a status", async () => {
    provider.queue({ kind: "slow", delayMs: 5_000 });
    const slow = await callProvider(renderFetchCall(fetchConfig(), CREDENTIAL, 1), {
      ...egress(),
      timeoutMs: 200,
    }).catch((e: unknown) => e);
    expect(slow).toBeInstanceOf(VendorCallError);
    expect((slow as VendorCallError).status).toBeUndefined();
    expect((slow as Error).message).toMatch(/did not answer within 200 ms$/);

    const release = provider.hold();
    const controller = new AbortController();
    const pending = callProvider(renderFetchCall(fetchConfig(), CREDENTIAL, 1), {
      ...egress(),
      timeoutMs: 10_000,
      signal: controller.signal,
    }).catch((e: unknown) => e);
    await provider.whenInFlight(1);
    controller.abort();
    const cancelled = await pending;
    release();
    expect(cancelled).toBeInstanceOf(VendorCallError);
    expect((cancelled as Error).message).toMatch(/was cancelled$/);
  });

  it("the guard refuses loopback unless allowed, and an untrusted certificate", async () => {
    const call = renderFetchCall(fetchConfig(), CREDENTIAL, 1);
    const loopback = await callProvider(call, { timeoutMs: 2000, ca: provider.ca })
      .catch((e: unknown) => e);
    expect(loopback).toBeInstanceOf(EgressRefusedError);
    const untrusted = await callProvider(call, { timeoutMs: 2000, allowLoopback: true })
      .catch((e: unknown) => e);
    expect(untrusted).toBeInstanceOf(VendorCallError);
    expect((untrusted as VendorCallError).status).toBeUndefined();
  });

  it("takes the guard's allowances from the process settings", async () => {
    const file = join(tmpdir(), `ox-provider-ca-${process.pid}.pem`);
    await writeFile(file, provider.ca ?? "");
    const settings = parseControlSettings({
      OCTOPROX_DATABASE_URL: "postgres://127.0.0.1/none",
      OCTOPROX_REDIS_URL: "redis://127.0.0.1:6379",
      OCTOPROX_INTERNAL_SECRET: "s".repeat(40),
      OCTOPROX_JWT_SECRET: "j".repeat(40),
      OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
      OCTOPROX_EGRESS_CA_FILE: file,
    });
    expect(providerEgress(settings)).toEqual({ allowLoopback: true, ca: provider.ca });
    const answer = await fetchProvider(fetchConfig(), CREDENTIAL, 1, providerEgress(settings));
    expect(answer.status).toBe(200);
  });

  it("reads Retry-After as seconds or an HTTP date", () => {
    const now = Date.parse("2030-01-01T00:00:00Z");
    expect(retryAfterSeconds("120", now)).toBe(120);
    expect(retryAfterSeconds("Tue, 01 Jan 2030 00:00:30 GMT", now)).toBe(30);
    expect(retryAfterSeconds("Mon, 31 Dec 2029 23:00:00 GMT", now)).toBe(0);
    expect(retryAfterSeconds("soon", now)).toBeUndefined();
    expect(retryAfterSeconds(undefined, now)).toBeUndefined();
  });
});
