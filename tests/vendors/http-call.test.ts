/**
 * A descriptor's HTTP calls against the vendor emulator's API (HTTPS on 127.0.0.1, the test CA,
 * the loopback allowance): a listing followed over its pages and refused when a page leaves
 * the host or the caps are passed, the token flow cached per credential and renewed after its
 * TTL, the credential check passing and failing, and how a call is rendered.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  authToken,
  renderCall,
  runCall,
  TokenCache,
  validateCredential,
} from "../../control/egress/http-call.ts";
import { EgressRefusedError, errorChainText, VendorCallError } from "../../shared/errors.ts";
import {
  type Descriptor,
  type DescriptorInput,
  parseDescriptor,
} from "../../shared/vendors/descriptor.ts";
import { startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  startVendorApi,
  type VendorApi,
  type VendorApiProxy,
} from "../../testkit/upstreams/vendor-emulator.ts";

const API_KEY = "key-0123456789";
let api: VendorApi;
/** An API whose next links point at another host (localhost rather than 127.0.0.1). */
let strayApi: VendorApi;

const proxy = (n: number): VendorApiProxy => ({
  proxy_address: `198.51.100.${n}`,
  port: 8000 + n,
  username: `user${n}`,
  password: `pass${n}`,
  country_code: n % 2 === 0 ? "US" : "DE",
});
const FIVE = [1, 2, 3, 4, 5].map(proxy);

function descriptor(base: string, extra: Partial<DescriptorInput> = {}): Descriptor {
  const input: DescriptorInput = {
    id: "vendor-test",
    name: "Vendor test",
    credential_fields: [{ key: "api_key", label: "API key", type: "password", secret: true }],
    proxy_types: [{
      id: "list",
      name: "List",
      mode: "list",
      call: {
        url: `${base}/proxies`,
        headers: { Authorization: "Bearer {auth.token}" },
        items: "results",
        next_url: "next",
      },
      item: {
        host: "{item.proxy_address}",
        port: "{item.port}",
        username: "{item.username}",
        password: "{item.password}",
        country: "{item.country_code}",
      },
    }],
    auth: {
      call: {
        method: "POST",
        url: `${base}/auth/token`,
        body: { api_key: "{credential.api_key}" },
      },
      token_path: "token",
      ttl_seconds: 60,
    },
    validation: {
      call: { url: `${base}/me`, params: { api_key: "{credential.api_key}" } },
      success: "active",
      error_message: "the API key was refused",
    },
    ...extra,
  };
  const parsed = parseDescriptor(input);
  if (!parsed.ok) throw new Error(parsed.issues.join("; "));
  return parsed.descriptor;
}

const options = () => ({ allowLoopback: true, ca: api.ca });
const credential = { api_key: API_KEY };

beforeAll(async () => {
  api = await startVendorApi({ apiKey: API_KEY });
  const port = Number(new URL(api.url).port);
  strayApi = await startVendorApi({
    apiKey: API_KEY,
    nextBase: `https://localhost:${port}`,
  });
});

afterAll(async () => {
  await Promise.all([api?.close(), strayApi?.close()]);
});

beforeEach(() => {
  api.setProxies(FIVE);
  api.setActive(true);
});

/** A fresh cache's token for the credential, and the list call's context with it. */
async function listContext(on: VendorApi, d: Descriptor) {
  const token = await authToken(d, { credential }, new TokenCache(), {
    allowLoopback: true,
    ca: on.ca,
  });
  return { credential, auth: { token } };
}

describe("runCall", () => {
  it("follows the pages and answers every page's items in order", async () => {
    const d = descriptor(api.url);
    const before = api.counts.proxies;
    const items = await runCall(d.proxy_types[0].call!, await listContext(api, d), options());
    expect(items).toEqual(FIVE);
    expect(api.counts.proxies - before).toBe(3);
  });

  it("reads a list the test changed since", async () => {
    const d = descriptor(api.url);
    api.setProxies([proxy(9)]);
    const items = await runCall(d.proxy_types[0].call!, await listContext(api, d), options());
    expect(items).toEqual([proxy(9)]);
  });

  it("refuses a next page on another host, after reading only the first", async () => {
    strayApi.setProxies(FIVE);
    const d = descriptor(strayApi.url);
    const context = await listContext(strayApi, d);
    const before = strayApi.counts.proxies;
    const error = await runCall(d.proxy_types[0].call!, context, {
      allowLoopback: true,
      ca: strayApi.ca,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EgressRefusedError);
    expect((error as Error).message).toMatch(/next page is on another host \(localhost:\d+\)/);
    expect(strayApi.counts.proxies - before).toBe(1);
  });

  it("refuses a list past its page cap or its item cap rather than cut it short", async () => {
    const d = descriptor(api.url);
    const context = await listContext(api, d);
    const call = d.proxy_types[0].call!;
    const pages = await runCall(call, context, { ...options(), maxPages: 2 }).catch((e) => e);
    expect(pages).toBeInstanceOf(VendorCallError);
    expect((pages as Error).message).toMatch(/past 2 pages/);
    const items = await runCall(call, context, { ...options(), maxItems: 3 }).catch((e) => e);
    expect(items).toBeInstanceOf(VendorCallError);
    expect((items as Error).message).toMatch(/more than 3 items/);
  });

  it("answers a refused call's status: a list without a token is a 401", async () => {
    const d = descriptor(api.url);
    const error = await runCall(
      d.proxy_types[0].call!,
      { credential, auth: { token: "stale" } },
      options(),
    )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorCallError);
    expect((error as VendorCallError).status).toBe(401);
  });

  it("refuses an answer the items expression finds no list in", async () => {
    const d = descriptor(api.url);
    const call = { ...d.proxy_types[0].call!, items: "next" };
    const error = await runCall(call, await listContext(api, d), options()).catch((e) => e);
    expect(error).toBeInstanceOf(VendorCallError);
    expect((error as Error).message).toMatch(/found no list/);
  });

  it("reads a whole answer as the items when the call names none (a port pool's exits)", async () => {
    const exits = [
      { ip: "203.0.113.1", port: 10001, country: "US" },
      { ip: "203.0.113.2", port: 10002, country: "DE" },
    ];
    api.setExits(exits);
    const call = {
      method: "GET" as const,
      url: `${api.url}/exits`,
      headers: { "X-Api-Key": "{credential.api_key}" },
    };
    expect(await runCall(call, { credential }, options())).toEqual(exits);
  });
});

describe("authToken", () => {
  it("fetches a token once per credential and keeps it for its TTL", async () => {
    let now = 1_000_000;
    const cache = new TokenCache({ nowMs: () => now });
    const d = descriptor(api.url);
    const before = api.counts.token;
    const [first, concurrent] = await Promise.all([
      authToken(d, { credential }, cache, options()),
      authToken(d, { credential }, cache, options()),
    ]);
    expect(first).toMatch(/^tok_/);
    expect(concurrent).toBe(first);
    now += 59_999;
    expect(await authToken(d, { credential }, cache, options())).toBe(first);
    expect(api.counts.token - before).toBe(1);
    expect(cache.size).toBe(1);

    now += 1;
    const renewed = await authToken(d, { credential }, cache, options());
    expect(renewed).toMatch(/^tok_/);
    expect(renewed).not.toBe(first);
    expect(api.counts.token - before).toBe(2);
  });

  it("keeps one token per credential, and forgets one when told", async () => {
    const cache = new TokenCache();
    const d = descriptor(api.url);
    const other = { api_key: API_KEY, note: "another connector's credential" };
    const a = await authToken(d, { credential }, cache, options());
    const b = await authToken(d, { credential: other }, cache, options());
    expect(b).not.toBe(a);
    expect(cache.size).toBe(2);
    cache.forget(d, credential);
    expect(await authToken(d, { credential }, cache, options())).not.toBe(a);
  });

  it("renews a token the vendor ended early once the caller forgets it", async () => {
    const cache = new TokenCache();
    const d = descriptor(api.url);
    const call = d.proxy_types[0].call!;
    const token = await authToken(d, { credential }, cache, options());
    api.revokeTokens();
    const refused = await runCall(call, { credential, auth: { token } }, options())
      .catch((e: unknown) => e);
    expect((refused as VendorCallError).status).toBe(401);
    cache.forget(d, credential);
    const renewed = await authToken(d, { credential }, cache, options());
    expect(await runCall(call, { credential, auth: { token: renewed } }, options()))
      .toEqual(FIVE);
  });

  it("refuses a wrong key with the vendor's status, and caches nothing", async () => {
    const cache = new TokenCache();
    const d = descriptor(api.url);
    const error = await authToken(d, { credential: { api_key: "wrong" } }, cache, options())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorCallError);
    expect((error as VendorCallError).status).toBe(401);
    expect(cache.size).toBe(0);
  });

  it("answers undefined for a descriptor without a token flow", async () => {
    const d = descriptor(api.url, { auth: undefined });
    expect(await authToken(d, { credential }, new TokenCache(), options())).toBeUndefined();
  });
});

describe("validateCredential", () => {
  it("passes a credential the vendor takes", async () => {
    const before = api.counts.me;
    await validateCredential(descriptor(api.url), credential, options());
    expect(api.counts.me - before).toBe(1);
  });

  it("refuses a wrong key with the descriptor's message and the vendor's status", async () => {
    const d = descriptor(api.url, { auth: undefined });
    const error = await validateCredential(d, { api_key: "wrong-SECRET" }, options())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorCallError);
    expect((error as Error).message).toBe("the API key was refused (the vendor answered 401)");
    expect((error as VendorCallError).status).toBe(401);
    // The key travelled in the query: no message of the chain shows it.
    expect(errorChainText(error)).not.toContain("wrong-SECRET");
  });

  it("refuses when the token flow refuses the key", async () => {
    const error = await validateCredential(descriptor(api.url), { api_key: "wrong" }, options())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorCallError);
    expect((error as VendorCallError).status).toBe(401);
    expect((error as Error).message).toMatch(/^the API key was refused/);
  });

  it("tells a vendor in trouble (5xx) from a refused credential", async () => {
    const origin = await startOrigin({ tls: true });
    try {
      const d = descriptor(api.url, {
        auth: undefined,
        validation: { call: { url: `${origin.url}/status/503` }, error_message: "refused" },
      });
      const error = await validateCredential(d, credential, { allowLoopback: true, ca: origin.ca })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(VendorCallError);
      expect((error as VendorCallError).status).toBe(503);
      expect((error as Error).message).toMatch(/\/status\/503 answered 503$/);
    } finally {
      await origin.close();
    }
  });

  it("refuses a 2xx answer whose success expression is false", async () => {
    api.setActive(false);
    const error = await validateCredential(descriptor(api.url), credential, options())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VendorCallError);
    expect((error as Error).message).toBe("the API key was refused (the vendor answered 200)");
  });
});

describe("renderCall", () => {
  it("renders URL, headers, parameters and the body's strings with real values", () => {
    const rendered = renderCall({
      method: "POST",
      url: "https://api.vendor.example/v1/{connector.zone}/list",
      headers: { "X-Key": "{credential.api_key}" },
      params: { country: "{connector.country|lower}" },
      body: { key: "{credential.api_key}", nested: { zone: "{connector.zone}", n: 3 } },
    }, { credential, connector: { zone: "z1", country: "US" } });
    expect(rendered).toEqual({
      method: "POST",
      url: "https://api.vendor.example/v1/z1/list?country=us",
      headers: { "X-Key": API_KEY, "content-type": "application/json" },
      body: JSON.stringify({ key: API_KEY, nested: { zone: "z1", n: 3 } }),
    });
  });

  it("refuses a value that moves the call to another host", () => {
    expect(() =>
      renderCall(
        { method: "GET", url: "https://api.vendor.example:{connector.port}/" },
        { connector: { port: "443@evil.example" } },
      )
    ).toThrow(EgressRefusedError);
  });
});
