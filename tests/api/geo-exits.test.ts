/**
 * The exit reads over what the ingest wrote (real Postgres and Redis): the observation log newest
 * first, filtered and paged by cursor without overlap; each connector's claims against where its
 * exits were seen; every exit, paged and filtered by country; provider accuracy per connector and
 * claimed country.
 * Viewers read them; a bad query is a 422 naming its field.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ingestObservations } from "../../control/geo/observation-ingest.ts";
import type { Observation } from "../../shared/geo/observation-wire.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let vendorish: string;
let fixed: string;
let proxyId: string;
const BASE = Date.UTC(2026, 10, 2, 8);

beforeAll(async () => {
  h = await startHarness();
  projectId = (await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Seen", username: "seen" },
  })).body.id;
  const connector = async (name: string, countries: string[]) =>
    (await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.editor,
      body: { name, kind: "static", countries },
    })).body.id as string;
  vendorish = await connector("claims", ["DE", "FR"]);
  fixed = await connector("fixed", []);
  proxyId = (await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: vendorish, url: "http://u:p@10.0.0.1:8080" },
  })).body.id;

  const seen = (
    connectorId: string,
    ip: string,
    seconds: number,
    country: string | null,
    claimed: string | null,
    more: Partial<Observation> = {},
  ): Observation => ({
    observedAt: BASE + seconds * 1000,
    ip,
    projectId,
    connectorId,
    proxyId: null,
    source: "health",
    country,
    region: null,
    city: null,
    asn: null,
    claimedCountry: claimed,
    sources: country === null ? [] : ["shipped"],
    ...more,
  });
  await ingestObservations(h.deps, [
    seen(vendorish, "203.0.113.1", 1, "DE", "DE", { proxyId }),
    seen(vendorish, "203.0.113.2", 2, "DE", "DE", { proxyId }),
    seen(vendorish, "203.0.113.3", 3, "US", "FR", { proxyId }),
    seen(vendorish, "203.0.113.4", 4, null, "FR", { proxyId }),
    seen(fixed, "198.51.100.1", 5, "NL", null, { region: "NL-NH", city: "Amsterdam", asn: 1 }),
  ]);
});

afterAll(async () => {
  await h?.close();
});

async function get(path: string) {
  const answer = await h.request("GET", path, { token: h.tokens.viewer });
  expect(answer.status, answer.text).toBe(200);
  return answer.body;
}

describe("the observation log", () => {
  test("newest first, filtered, paged by cursor without overlap", async () => {
    const all = await get("/api/v1/geo/observations");
    expect(all.items.map((o: { ip: string }) => o.ip)).toEqual([
      "198.51.100.1",
      "203.0.113.4",
      "203.0.113.3",
      "203.0.113.2",
      "203.0.113.1",
    ]);
    expect(all.next_cursor).toBeNull();
    expect(all.items[4]).toMatchObject({
      observed_at: new Date(BASE + 1000).toISOString(),
      project_id: projectId,
      connector_id: vendorish,
      proxy_id: proxyId,
      source: "health",
      country: "DE",
      claimed_country: "DE",
      // The proxy's first sighting on an exit new to the connector.
      hand_out: true,
    });

    const pages: string[] = [];
    let cursor = "";
    for (let i = 0; i < 5; i++) {
      const page = await get(`/api/v1/geo/observations?limit=2${cursor}`);
      pages.push(...page.items.map((o: { ip: string }) => o.ip));
      if (page.next_cursor === null) break;
      cursor = `&cursor=${page.next_cursor}`;
    }
    expect(pages).toEqual(all.items.map((o: { ip: string }) => o.ip));

    const ips = async (query: string) =>
      (await get(`/api/v1/geo/observations?${query}`)).items.map((o: { ip: string }) => o.ip);
    expect(await ips(`connector_id=${fixed}`)).toEqual(["198.51.100.1"]);
    expect(await ips(`proxy_id=${proxyId}&limit=1`)).toEqual(["203.0.113.4"]);
    expect(await ips("ip=203.0.113.2")).toEqual(["203.0.113.2"]);
    expect(await ips(`project_id=${projectId}`)).toHaveLength(5);
  });
});

describe("exits and provider accuracy", () => {
  test("each connector's claims against where its exits were seen", async () => {
    const { items } = await get(`/api/v1/geo/exits?project_id=${projectId}`);
    expect(items.map((c: { connector_name: string }) => c.connector_name)).toEqual([
      "claims",
      "fixed",
    ]);
    expect(items[0]).toMatchObject({
      connector_id: vendorish,
      project_name: "Seen",
      claimed_countries: ["DE", "FR"],
      seen_countries: [{ country: "DE", exits: 2 }, { country: "US", exits: 1 }, {
        country: null,
        exits: 1,
      }],
      exits: 4,
      observations: 4,
      exits_judged: 3,
      exits_matching: 2,
      accuracy: 2 / 3,
      first_seen_at: new Date(BASE + 1000).toISOString(),
      last_seen_at: new Date(BASE + 4000).toISOString(),
    });
    expect(items[1]).toMatchObject({ claimed_countries: [], exits_judged: 0, accuracy: null });
  });

  test("every exit, last seen first, filtered and paged", async () => {
    const page = await get(`/api/v1/geo/exits/ips?project_id=${projectId}&page_size=2`);
    expect(page.total).toBe(5);
    expect(page.items.map((e: { ip: string }) => e.ip)).toEqual(["198.51.100.1", "203.0.113.4"]);
    expect(page.items[0]).toEqual({
      ip: "198.51.100.1",
      connector_id: fixed,
      connector_name: "fixed",
      project_id: projectId,
      country: "NL",
      region: "NL-NH",
      city: "Amsterdam",
      asn: 1,
      sources: ["shipped"],
      claimed_country: null,
      first_seen_at: new Date(BASE + 5000).toISOString(),
      last_seen_at: new Date(BASE + 5000).toISOString(),
      observations: 1,
      hand_outs: 0,
    });
    const second = await get(`/api/v1/geo/exits/ips?connector_id=${vendorish}&page=2&page_size=3`);
    expect(second.items.map((e: { ip: string }) => e.ip)).toEqual(["203.0.113.1"]);
    const german = await get(`/api/v1/geo/exits/ips?project_id=${projectId}&country=de`);
    expect(german.total).toBe(2);
    expect(german.items.map((e: { ip: string }) => e.ip)).toEqual(["203.0.113.2", "203.0.113.1"]);
  });

  test("accuracy per connector and per claimed country", async () => {
    const { items } = await get(`/api/v1/geo/accuracy?connector_id=${vendorish}`);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({
      exits_judged: 3,
      exits_matching: 2,
      accuracy: 2 / 3,
      by_country: [
        { claimed_country: "DE", exits_judged: 2, exits_matching: 2, accuracy: 1 },
        { claimed_country: "FR", exits_judged: 1, exits_matching: 0, accuracy: 0 },
      ],
    });
  });
});

describe("bad queries and access", () => {
  test.each([
    ["/api/v1/geo/observations?project_id=nope", "query.project_id"],
    ["/api/v1/geo/observations?connector_id=1", "query.connector_id"],
    ["/api/v1/geo/observations?proxy_id=x", "query.proxy_id"],
    ["/api/v1/geo/observations?ip=999.1.1.1", "query.ip"],
    ["/api/v1/geo/observations?limit=0", "query.limit"],
    ["/api/v1/geo/observations?limit=501", "query.limit"],
    ["/api/v1/geo/observations?cursor=yesterday", "query.cursor"],
    ["/api/v1/geo/exits?project_id=p", "query.project_id"],
    ["/api/v1/geo/exits/ips?page_size=1001", "query.page_size"],
    ["/api/v1/geo/exits/ips?page=0", "query.page"],
    ["/api/v1/geo/exits/ips?country=Germany", "query.country"],
    ["/api/v1/geo/accuracy?connector_id=c", "query.connector_id"],
  ])("%s is a 422 naming %s", async (path, field) => {
    const answer = await h.request("GET", path, { token: h.tokens.viewer });
    expect(answer.status, answer.text).toBe(422);
    expect(JSON.stringify(answer.body)).toContain(field);
  });

  test("a caller without a token is refused", async () => {
    for (const path of ["observations", "exits", "exits/ips", "accuracy"]) {
      expect((await h.request("GET", `/api/v1/geo/${path}`)).status).toBe(401);
    }
  });
});
