/**
 * The echo: the caller's address, the nonce repeated, and where the databases in force place the
 * address, answered alike before the app (the fast path) and by the app (any other query).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../control/api/app.ts";
import { HttpServer } from "../../control/core/http-server.ts";
import { echoFastGets } from "../../control/api/routes/public.ts";
import { EchoPlaces } from "../../control/geo/echo-places.ts";
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { GeoStack } from "../../shared/geo/stack.ts";
import { captureLogger } from "../../testkit/logger.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";

let stack = new GeoStack([openGeofeed("exits", "127.0.0.0/8,DE,DE-BE,Berlin,")]);
let reads = 0;
const places = new EchoPlaces({
  source: {
    current: () => {
      reads++;
      return Promise.resolve({ stack });
    },
  },
  logger: captureLogger().logger,
  refreshMs: 60_000,
});
let server: HttpServer;
let plain: Awaited<ReturnType<typeof listen>>;
let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness({ noUsers: true });
  const app = createApp({ ...h.deps, echoPlaces: places });
  plain = await listen(app);
  server = new HttpServer({
    app,
    host: "127.0.0.1",
    port: 0,
    fastGets: echoFastGets(places.placeOf),
  });
  await places.refresh();
  await server.start();
});

afterAll(async () => {
  await server?.stop();
  await plain?.close();
  await h?.close();
});

/** The answer before the app (the fast path), checked to be the app's route's answer too. */
const ask = async (query: string) => {
  const fast = await fetch(`http://127.0.0.1:${server.port}/echo${query}`);
  const routed = await fetch(`http://127.0.0.1:${plain.port}/echo${query}`);
  expect([fast.status, routed.status]).toEqual([200, 200]);
  const answer = await fast.json();
  expect(await routed.json()).toEqual(answer);
  return answer;
};

describe("the echo", () => {
  it("answers the address, the nonce, and where the databases place the address", async () => {
    expect(await ask("?nonce=n-1")).toEqual({
      ip: "127.0.0.1",
      nonce: "n-1",
      country: "DE",
      region: "DE-BE",
      city: "Berlin",
      asn: null,
    });
    expect(await ask("")).toEqual({
      ip: "127.0.0.1",
      country: "DE",
      region: "DE-BE",
      city: "Berlin",
      asn: null,
    });
  });

  it("repeats no nonce that is not short printable text", async () => {
    expect(await ask(`?nonce=${"x".repeat(129)}`)).not.toHaveProperty("nonce");
    expect(await ask("?nonce=a%20b")).not.toHaveProperty("nonce");
  });

  it("answers the address alone where no database places it", async () => {
    stack = new GeoStack([openGeofeed("elsewhere", "198.51.100.0/24,FR,,,")]);
    await places.refresh();
    expect(await ask("?nonce=n-2")).toEqual({ ip: "127.0.0.1", nonce: "n-2" });
  });

  it("reads the databases again only when a refresh is due", () => {
    const before = reads;
    for (let i = 0; i < 100; i++) places.placeOf("127.0.0.1");
    expect(reads).toBe(before);
  });
});
