/**
 * Vendor connectors on the request path: a dynamic-sessions row rendered per request, and a
 * country an "All countries" session pool lacks asked of the workers and waited for.
 */
import { describe, expect, it } from "vitest";
import { CoreRouter } from "../../shared/routing/router.ts";
import type { Allocation, Refusal } from "../../shared/routing/contract.ts";
import { sessionIdFor } from "../../shared/vendors/session-id.ts";
import { builtinDescriptors } from "../../shared/vendors/registry.ts";
import type { ConnectorSection } from "../../shared/feed/models.ts";
import {
  client,
  connector,
  feed,
  proxy,
  section,
  target,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

const OXYLABS_CREDENTIAL = { username: "acme", password: "s3cret" };

function vendorSection(
  id: string,
  config: Record<string, unknown>,
  rows: ConnectorSection["proxies"],
  countries: string[] = [],
): ConnectorSection {
  return {
    ...section(connector(id, { kind: "vendor", provider: "oxylabs", countries }), rows),
    config,
    credential: OXYLABS_CREDENTIAL,
  };
}

const isAllocation = (answer: Allocation | Refusal): answer is Allocation => "upstream" in answer;

describe("dynamic sessions", () => {
  const gatewayRow = proxy("gw", {
    host: "pr.oxylabs.io",
    port: 7777,
    username: "customer-acme",
    password: "s3cret",
  });
  const router = () => {
    const r = new CoreRouter({ verifyPassword });
    r.apply(feed([vendorSection("dyn", { session_mode: "dynamic" }, [gatewayRow], ["DE", "US"])]));
    return r;
  };

  it("renders the client's session, hashed with the project, and its country", async () => {
    const a = await router().acquire(
      client({ user: "shop", country: "DE", sessionId: "42" }),
      target(),
    );
    const b = await router().acquire(
      client({ user: "shop", country: "DE", sessionId: "42" }),
      target(),
    );
    if (!isAllocation(a) || !isAllocation(b)) throw new Error("refused");
    const spec = builtinDescriptors().get("oxylabs")!.descriptor.proxy_types[0].session_id!;
    const vendorSession = sessionIdFor("p1", "42", {
      length: spec.length!,
      alphabet: spec.alphabet!,
      prefix: spec.prefix ?? "",
    });
    expect(a.upstream.username).toBe(`customer-acme-cc-DE-sessid-${vendorSession}-sesstime-10`);
    expect(b.upstream.username).toBe(a.upstream.username);
    expect(a.upstream.password).toBe("s3cret");
    expect(a.upstream.host).toBe("pr.oxylabs.io");
    a.release({ ok: true });
    b.release({ ok: true });
  });

  it("serves only its declared countries, and states it can write", async () => {
    const r = router();
    expect(isAllocation(await r.acquire(client({ user: "shop", country: "FR" }), target()))).toBe(
      false,
    );
    const state = await r.acquire(client({ user: "shop", country: "US", state: "NY" }), target());
    if (!isAllocation(state)) throw new Error("refused");
    expect(state.upstream.username).toContain("-st-us_new_york");
    expect(
      isAllocation(await r.acquire(client({ user: "shop", country: "US", state: "ZZ" }), target())),
    )
      .toBe(false);
  });
});

describe("on-demand country groups", () => {
  const generic = proxy("g0", {
    host: "pr.oxylabs.io",
    port: 7777,
    username: "customer-acme-sessid-a",
  });
  const fr = proxy("fr0", {
    host: "pr.oxylabs.io",
    port: 7777,
    username: "customer-acme-cc-FR-sessid-b",
    country: "FR",
  });

  it("asks for the group once, and serves the request from the snapshot that carries it", async () => {
    const asked: string[] = [];
    const r = new CoreRouter({
      verifyPassword,
      provision: { ask: (key) => (asked.push(key), Promise.resolve(true)) },
    });
    r.apply(feed([vendorSection("pool", {}, [generic])]));
    const first = r.acquire(client({ user: "shop", country: "FR" }), target());
    const second = r.acquire(client({ user: "shop", country: "FR" }), target());
    expect(first).toBeInstanceOf(Promise);
    // A worker provisioned the group; its rows are checked and the feed carries them.
    r.apply(feed([vendorSection("pool", {}, [generic, fr])]));
    for (const answer of [await first, await second]) {
      if (!isAllocation(answer)) throw new Error(`refused: ${JSON.stringify(answer)}`);
      expect(answer.upstream.proxyId).toBe("fr0");
      answer.release({ ok: true });
    }
    expect(asked).toEqual(["pool:FR"]);
  });

  it("answers at once when Redis takes no ask", async () => {
    // A wait far longer than the test's own timeout: only an answer at once passes.
    const r = new CoreRouter({
      verifyPassword,
      provisionWaitMs: 3_600_000,
      provision: { ask: () => Promise.reject(new Error("down")) },
    });
    r.apply(feed([vendorSection("pool", {}, [generic])]));
    const answer = await r.acquire(client({ user: "shop", country: "FR" }), target());
    expect(isAllocation(answer)).toBe(false);
  });

  it("refuses as before when no group arrives within the wait", async () => {
    const r = new CoreRouter({
      verifyPassword,
      provisionWaitMs: 50,
      provision: { ask: () => Promise.resolve(true) },
    });
    r.apply(feed([vendorSection("pool", {}, [generic])]));
    const answer = await r.acquire(client({ user: "shop", country: "FR" }), target());
    // The answer a gateway that asks nobody gives: the country is not served.
    const plain = new CoreRouter({ verifyPassword });
    plain.apply(feed([vendorSection("pool", {}, [generic])]));
    const unserved = await plain.acquire(client({ user: "shop", country: "FR" }), target());
    expect(isAllocation(answer)).toBe(false);
    expect(answer).toEqual(unserved);
  });

  it("never asks for a pool that declares its countries, or a dynamic one", () => {
    const asked: string[] = [];
    const r = new CoreRouter({
      verifyPassword,
      provision: { ask: (key) => (asked.push(key), Promise.resolve(true)) },
    });
    r.apply(feed([
      vendorSection("declared", {}, [generic], ["DE"]),
      vendorSection("dyn", { session_mode: "dynamic" }, [proxy("gw")], ["DE"]),
    ]));
    const answer = r.acquire(client({ user: "shop", country: "FR" }), target());
    expect(answer).not.toBeInstanceOf(Promise);
    expect(asked).toEqual([]);
  });
});
