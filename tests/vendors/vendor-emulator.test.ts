/**
 * The vendor emulator's self-test: each grammar reads its vendor's documented usernames (and
 * refuses what the vendor would not read), and a client through the emulator's proxy (curl, or
 * Node on a keep-alive connection), behind an origin that echoes the caller's address, leaves
 * from the exit its country and session name; a wrong password or an unparsable username is a
 * 407 or SOCKS5's auth failure.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  brightdata,
  decodo,
  exitFor,
  iproyal,
  netnut,
  oxylabs,
  soax,
  startVendorProxy,
  type VendorGrammar,
  type VendorProxy,
  type VendorRequest,
  webshare,
} from "../../testkit/upstreams/vendor-emulator.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { ClientConnection, exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { curl } from "../../testkit/clients/curl.ts";

describe("the grammars", () => {
  const cases: [VendorGrammar, string, string, VendorRequest][] = [
    [
      oxylabs,
      "customer-alice-cc-US-st-us_california-city-los_angeles-sessid-abc-sesstime-10",
      "pw",
      {
        account: "alice",
        country: "US",
        state: "california",
        city: "los_angeles",
        session: "abc",
        sessionMinutes: 10,
      },
    ],
    [oxylabs, "customer-alice", "pw", { account: "alice" }],
    [
      brightdata,
      "brd-customer-hl_1234-zone-residential-country-us-state-ny-city-newyork-session-abc",
      "pw",
      {
        account: "brd-customer-hl_1234-zone-residential",
        country: "US",
        state: "ny",
        city: "newyork",
        session: "abc",
      },
    ],
    [
      decodo,
      "user-bob-country-us-state-us_california-city-los_angeles-session-abc-sessionduration-10",
      "pw",
      {
        account: "bob",
        country: "US",
        state: "california",
        city: "los_angeles",
        session: "abc",
        sessionMinutes: 10,
      },
    ],
    [netnut, "carol-res-us-sid-123456", "pw", {
      account: "carol",
      country: "US",
      session: "123456",
    }],
    [netnut, "carol-res-any", "pw", { account: "carol" }],
    [netnut, "carol-res-uk", "pw", { account: "carol", country: "GB" }],
    [
      netnut,
      "carol-res_sc-us_california_los_angeles-sid-7",
      "pw",
      { account: "carol", country: "US", state: "california", city: "los_angeles", session: "7" },
    ],
    [
      soax,
      "package-123456-country-us-region-california-city-los_angeles-sessionid-abc-sessionlength-600",
      "pw",
      {
        account: "package-123456",
        country: "US",
        state: "california",
        city: "los_angeles",
        session: "abc",
        sessionMinutes: 10,
      },
    ],
    [
      iproyal,
      "dave",
      "pass_country-us_state-california_city-losangeles_session-abc12345_lifetime-10m",
      {
        account: "dave",
        country: "US",
        state: "california",
        city: "losangeles",
        session: "abc12345",
        sessionMinutes: 10,
      },
    ],
    [iproyal, "dave", "pa_ss", { account: "dave" }],
    [webshare, "erin-1", "pw", { account: "erin-1" }],
  ];
  for (const [grammar, username, password, expected] of cases) {
    it(`${grammar.name} reads ${username}:${password}`, () => {
      expect(grammar.parse(username, password)).toEqual(expected);
    });
  }

  it("iproyal's account password is the password without its options", () => {
    expect(iproyal.accountPassword!("pa_ss_country-us_session-abc12345")).toBe("pa_ss");
  });

  const refused: [VendorGrammar, string, string][] = [
    [oxylabs, "customer-alice-zip-90210", "an unmodelled key"],
    [oxylabs, "customer-alice-cc-US-cc-DE", "a key twice"],
    [oxylabs, "customer-alice-sesstime-10", "sesstime without sessid"],
    [oxylabs, "customer-alice-sessid-abc-sesstime-2000", "sesstime past 1440"],
    [oxylabs, "customer-alice-cc-XX", "no country"],
    [oxylabs, "alice-cc-US", "no customer- frame"],
    [brightdata, "brd-customer-1-zone-z-country-de-state-ny", "a state outside the US"],
    [brightdata, "brd-customer-1-zone-z-city-paris", "a city without a country"],
    [decodo, "user-bob-session-a-sessionduration-0", "sessionduration below 1"],
    [netnut, "carol-res-us-sid-abc", "a SID that is no number"],
    [soax, "package-1-city-paris", "a city without a country"],
    [webshare, "", "no username"],
  ];
  for (const [grammar, username, why] of refused) {
    it(`${grammar.name} refuses ${username || "(empty)"}: ${why}`, () => {
      expect(grammar.parse(username, "pw")).toBeUndefined();
    });
  }

  it("iproyal refuses a session id that is not 8 letters and digits", () => {
    expect(iproyal.parse("dave", "pw_session-abc")).toBeUndefined();
    expect(iproyal.parse("dave", "pw_lifetime-10m")).toBeUndefined();
  });
});

describe("exitFor", () => {
  it("is one address per country and session, and never .0 or .255", () => {
    const a = exitFor({ country: "US", session: "abc" });
    expect(exitFor({ country: "US", session: "abc" })).toBe(a);
    expect(exitFor({ country: "DE", session: "abc" })).not.toBe(a);
    expect(exitFor({ country: "US", session: "abd" })).not.toBe(a);
    const all = [
      a,
      ...Array.from({ length: 600 }, (_, n) => exitFor({}, n)),
      ...Array.from({ length: 300 }, (_, n) => exitFor({ country: "ZW", session: `s${n}` })),
    ];
    for (const exit of all) {
      expect(exit).toMatch(/^127\.\d+\.\d+\.\d+$/);
      for (const octet of exit.split(".").slice(1)) {
        expect(Number(octet), exit).toBeGreaterThan(0);
        expect(Number(octet), exit).toBeLessThan(255);
      }
    }
  });
});

describe("the vendor proxy", () => {
  let origin: Origin;
  let secureOrigin: Origin;
  let oxy: VendorProxy;
  let royal: VendorProxy;
  let dir: string;
  let caFile: string;

  beforeAll(async () => {
    [origin, secureOrigin, oxy, royal] = await Promise.all([
      startOrigin(),
      startOrigin({ tls: true }),
      startVendorProxy({ grammar: oxylabs, accounts: { alice: "s3cret" } }),
      startVendorProxy({ grammar: iproyal, accounts: { dave: "pass" }, socks5: true }),
    ]);
    dir = await mkdtemp(join(tmpdir(), "ox-vendor-"));
    caFile = join(dir, "ca.pem");
    await writeFile(caFile, secureOrigin.ca!);
  });

  afterAll(async () => {
    await Promise.all([origin?.close(), secureOrigin?.close(), oxy?.close(), royal?.close()]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** curl's answer body through the proxy at `proxyUrl`; fails on a non-zero exit. */
  async function through(args: string[]): Promise<string> {
    const result = await curl(args);
    if (result.code !== 0) throw new Error(`curl exited ${result.code}: ${result.stderr}`);
    return result.stdout;
  }
  const ip = (body: string) => (JSON.parse(body) as { ip: string }).ip;

  it("forwards a request from its country and session's exit, the same on each request", async () => {
    const user = "customer-alice-cc-US-sessid-abc";
    const args = ["-x", oxy.url, "-U", `${user}:s3cret`, `${origin.url}/ip`];
    const first = ip(await through(args));
    expect(first).toBe(exitFor({ country: "US", session: "abc" }));
    expect(ip(await through(args))).toBe(first);
    expect(oxy.requests.at(-1)).toEqual({ account: "alice", country: "US", session: "abc" });
  });

  it("gives a request without a session a fresh exit each time", async () => {
    const args = ["-x", oxy.url, "-U", "customer-alice-cc-US:s3cret", `${origin.url}/ip`];
    const [a, b] = [ip(await through(args)), ip(await through(args))];
    expect(a).not.toBe(b);
    for (const exit of [a, b]) expect(exit).toMatch(/^127\.233\./); // US is code 233
  });

  it("tunnels CONNECT (TLS to the origin inside) from the session's exit", async () => {
    const body = await through([
      "-x",
      oxy.url,
      "--proxytunnel",
      "-U",
      "customer-alice-cc-DE-sessid-xyz:s3cret",
      "--cacert",
      caFile,
      `${secureOrigin.url}/ip`,
    ]);
    expect(ip(body)).toBe(exitFor({ country: "DE", session: "xyz" }));
  });

  it("reads each request of a keep-alive connection on its own", async () => {
    const connection = new ClientConnection();
    try {
      const exits = [];
      for (const session of ["k1", "k2", "k1"]) {
        const answer = await viaProxy(
          oxy.port,
          { username: `customer-alice-sessid-${session}`, password: "s3cret" },
          `${origin.url}/ip`,
          { connection },
        );
        exits.push(exitOf(answer));
      }
      expect(exits).toEqual([exitFor({ session: "k1" }), exitFor({ session: "k2" }), exits[0]]);
      expect(connection.connections).toBe(1);
    } finally {
      connection.close();
    }
  });

  it("answers 407 to a wrong password, recording what was asked", async () => {
    const refusedBefore = oxy.refused;
    const result = await curl([
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      "-x",
      oxy.url,
      "-U",
      "customer-alice-cc-FR:wrong",
      `${origin.url}/ip`,
    ]);
    expect(result.stdout).toBe("407");
    expect(oxy.requests.at(-1)).toEqual({ account: "alice", country: "FR" });
    expect(oxy.refused).toBe(refusedBefore + 1);

    const tunnel = await curl([
      "-o",
      "/dev/null",
      "-w",
      "%{http_connect}",
      "-x",
      oxy.url,
      "--proxytunnel",
      "-U",
      "customer-alice:wrong",
      "--cacert",
      caFile,
      `${secureOrigin.url}/ip`,
    ]);
    expect(tunnel.stdout).toBe("407");
  });

  it("answers 407 to a username its grammar cannot read, recording nothing", async () => {
    const recorded = oxy.requests.length;
    const answer = await viaProxy(
      oxy.port,
      { username: "customer-alice-zip-90210", password: "s3cret" },
      `${origin.url}/ip`,
    );
    expect(answer.status).toBe(407);
    expect(answer.headers["proxy-authenticate"]).toMatch(/^Basic/);
    expect(oxy.requests.length).toBe(recorded);
  });

  it("speaks SOCKS5 on the same port, options in the password (IPRoyal)", async () => {
    const password = encodeURIComponent("pass_country-de_session-abcd1234");
    const body = await through([
      "-x",
      `socks5h://dave:${password}@${royal.host}:${royal.port}`,
      `${origin.url}/ip`,
    ]);
    expect(ip(body)).toBe(exitFor({ country: "DE", session: "abcd1234" }));
    expect(royal.requests.at(-1)).toEqual({ account: "dave", country: "DE", session: "abcd1234" });
    // And HTTP beside it.
    const http = await through([
      "-x",
      royal.url,
      "-U",
      "dave:pass_country-us_session-abcd1234",
      `${origin.url}/ip`,
    ]);
    expect(ip(http)).toBe(exitFor({ country: "US", session: "abcd1234" }));
    const tunnelled = await through([
      "-x",
      royal.url,
      "--proxytunnel",
      "-U",
      "dave:pass_country-gb_session-abcd1234",
      "--cacert",
      caFile,
      `${secureOrigin.url}/ip`,
    ]);
    expect(ip(tunnelled)).toBe(exitFor({ country: "GB", session: "abcd1234" }));
  });

  it("fails SOCKS5's auth on a wrong password", async () => {
    const refusedBefore = royal.refused;
    const result = await curl([
      "-x",
      `socks5h://dave:${encodeURIComponent("wrong_country-de")}@${royal.host}:${royal.port}`,
      `${origin.url}/ip`,
    ]);
    expect(result.code).not.toBe(0);
    // RFC 1929's status 1: the sub-negotiation failed.
    expect(result.stderr).toMatch(/rejected by the SOCKS5 server \(1 1\)/);
    expect(royal.refused).toBe(refusedBefore + 1);
  });
});
