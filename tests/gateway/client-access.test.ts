/**
 * Who may use the gateway, in the routing core under the real admission pipeline: a project's
 * allowed blocks (403 before routing, IPv4-mapped addresses read as IPv4), password-less access
 * by the most specific block (and none when two projects list it), strict mode's refusal of a
 * project open to anyone, and options in request headers (the username's grammar, 400 naming
 * the header, conflicts refused, every X-Octoprox field kept from the upstream).
 */
import { describe, expect, it } from "vitest";
import { clientAddressStep } from "../../gateway/access/client-address.ts";
import { HeaderOptionMessage, headerOptionsStep } from "../../gateway/access/header-options.ts";
import { listensBeyondLoopback, openProjects } from "../../gateway/access/strict-mode.ts";
import type { Refusal, Target } from "../../shared/routing/contract.ts";
import { createDestinationGuard } from "../../shared/routing/destination-guard.ts";
import { clientAddressDenied, openProjectRefused } from "../../shared/routing/refusals.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { encodeUpstreamRequestHead } from "../../gateway/net/http/heads.ts";
import { type HeaderField, parseRequestHead } from "../../gateway/net/http/parse.ts";
import { AdmissionStage } from "../../gateway/base/admission.ts";
import { Admission, AdmissionTicket } from "../../gateway/net/session/admission-pipeline.ts";
import { admissionSteps } from "../../gateway/net/session/admission-steps.ts";
import type { FeedProject } from "../../shared/feed/models.ts";
import {
  basic,
  connector,
  feed,
  PASSWORD,
  project,
  section,
} from "../../testkit/gateway/feed-fixtures.ts";

const TARGET: Target = { host: "example.com", port: 80 };

function gateway(projects: FeedProject[], options: { strict?: boolean } = {}) {
  const warnings: { message: string; fields?: Readonly<Record<string, unknown>> }[] = [];
  const router = new CoreRouter({
    verifyPassword: (password, digest) => Promise.resolve(digest === `digest:${password}`),
    log: { warn: (message, fields) => warnings.push({ message, fields }) },
  });
  router.apply(feed(projects.map((p) => section({ ...connectorOf(p) }, [`${p.id}-x`])), {
    projects,
  }));
  const guard = createDestinationGuard({ resolve: () => Promise.resolve([]) });
  const admission = new Admission(admissionSteps({
    router,
    guard,
    core: [
      clientAddressStep({ snapshot: () => router.snapshot, strict: options.strict ?? false }),
      headerOptionsStep(),
    ],
  }));
  /** Admits one request from `address`; the ticket says who it was for and what it stripped. */
  const admit = async (
    address: string,
    credentials: string | null,
    headers: readonly HeaderField[] = [],
    target: Target = TARGET,
  ) => {
    const ticket = new AdmissionTicket({ hostname: address, port: 40_000 });
    ticket.begin("http", credentials, target, headers);
    const refusal: Refusal | undefined = await admission.run(ticket, AdmissionStage.request);
    return { refusal, ticket, client: ticket.client };
  };
  return { router, admit, warnings };
}

function connectorOf(p: FeedProject) {
  return connector(`${p.id}-c`, { project_id: p.id, name: "c" });
}

/** The header fields of a request head with these extra lines. */
function headers(...lines: string[]): readonly HeaderField[] {
  return parseRequestHead(
    new TextEncoder().encode(
      `GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n${
        lines.map((line) => `${line}\r\n`).join("")
      }\r\n`,
    ),
  ).headers;
}

describe("a project's allowed blocks", () => {
  const shop = project({ allowed_cidrs: ["203.0.113.0/24", "2001:db8::/32"] });

  it("admit clients from inside them, IPv4-mapped ones as IPv4", async () => {
    const { admit } = gateway([shop]);
    for (const address of ["203.0.113.7", "::ffff:203.0.113.7", "2001:db8::5"]) {
      const { refusal, client } = await admit(address, basic("shop"));
      expect(refusal, address).toBeUndefined();
      expect(client?.projectId).toBe("p1");
    }
  });

  it("refuse anyone else with 403 before the destination is looked at", async () => {
    const { admit } = gateway([shop]);
    for (const address of ["198.51.100.1", "::ffff:198.51.100.1", "2001:db9::5", "203.0.114.1"]) {
      // A destination the guard would refuse: the client's address is refused first.
      const { refusal } = await admit(address, basic("shop"), [], { host: "127.0.0.1", port: 22 });
      expect(refusal, address).toBe(clientAddressDenied);
    }
    expect(clientAddressDenied).toMatchObject({
      status: 403,
      proxyStatus: "http_request_denied",
      reason: "Client address not allowed for this project",
      rejection: "client_address_denied",
    });
  });

  it("let every address in when the list is empty", async () => {
    const { admit } = gateway([project()]);
    expect((await admit("198.51.100.1", basic("shop"))).refusal).toBeUndefined();
  });

  it("allow nobody when every block of a non-empty list fails to parse", async () => {
    const { admit, warnings } = gateway([project({ allowed_cidrs: ["not-a-block"] })]);
    expect((await admit("198.51.100.1", basic("shop"))).refusal).toBe(clientAddressDenied);
    expect(warnings.map((w) => w.message)).toContain(
      "A client address block in the feed does not parse: left out",
    );
  });
});

describe("password-less access", () => {
  const wide = project({ id: "wide", username: "wide", passwordless_cidrs: ["10.0.0.0/8"] });
  const narrow = project({
    id: "narrow",
    username: "narrow",
    passwordless_cidrs: ["10.1.0.0/16", "::ffff:192.0.2.0/120"],
  });

  it("makes a client without credentials the project of the most specific block holding it", async () => {
    const { admit } = gateway([wide, narrow]);
    expect((await admit("10.1.2.3", null)).client).toMatchObject({
      projectId: "narrow",
      options: { user: "narrow" },
    });
    expect((await admit("::ffff:10.2.0.1", null)).client?.projectId).toBe("wide");
    expect((await admit("192.0.2.9", null)).client?.projectId).toBe("narrow");
    const outside = await admit("11.0.0.1", null);
    expect(outside.refusal).toMatchObject({ status: 407 });
    expect(outside.client).toBeUndefined();
  });

  it("reaches neither project by a block two list, and says so once per feed", async () => {
    const twin = project({
      id: "twin",
      username: "twin",
      passwordless_cidrs: ["10.9.0.0/16", "10.200.0.0/16"],
    });
    const other = project({ id: "other", username: "other", passwordless_cidrs: ["10.9.7.7/16"] });
    const { admit, warnings } = gateway([wide, twin, other]);
    expect((await admit("10.9.1.1", null)).refusal).toMatchObject({ status: 407 });
    // The tie does not fall back to a wider block: the request must give credentials.
    expect((await admit("10.9.1.1", null)).client).toBeUndefined();
    expect((await admit("10.200.0.1", null)).client?.projectId).toBe("twin");
    expect((await admit("10.8.0.1", null)).client?.projectId).toBe("wide");
    expect(warnings.filter((w) => w.message.startsWith("Projects share a password-less block")))
      .toEqual([{
        message: "Projects share a password-less block: no client reaches either through it",
        fields: { block: "10.9.0.0/16", projects: "twin, other" },
      }]);
  });

  it("leaves clients that give credentials to them, and the allowed blocks still apply", async () => {
    const fenced = project({
      passwordless_cidrs: ["10.0.0.0/8"],
      allowed_cidrs: ["10.5.0.0/16"],
    });
    const other = project({ id: "p2", username: "other" });
    const { admit } = gateway([fenced, other]);
    expect((await admit("10.1.1.1", null)).refusal).toBe(clientAddressDenied);
    expect((await admit("10.5.1.1", null)).client?.projectId).toBe("p1");
    // Credentials given are what count, right or wrong.
    expect((await admit("10.5.1.1", basic("other"))).client?.projectId).toBe("p2");
    expect((await admit("10.5.1.1", basic("shop", "wrong"))).refusal).toMatchObject({
      status: 407,
    });
  });

  it("under strict mode, is refused for a project open to anyone; its password still works", async () => {
    const open = project({ passwordless_cidrs: ["0.0.0.0/0"] });
    const strict = gateway([open], { strict: true });
    expect((await strict.admit("198.51.100.1", null)).refusal).toBe(openProjectRefused);
    expect((await strict.admit("198.51.100.1", basic("shop"))).refusal).toBeUndefined();
    expect(openProjects(strict.router.snapshot!).map((entry) => entry.id)).toEqual(["p1"]);
    const loopback = gateway([open]);
    expect((await loopback.admit("198.51.100.1", null)).client?.projectId).toBe("p1");
    // Fenced by an allowed list, it is not open to anyone.
    const fenced = gateway([project({ ...open, allowed_cidrs: ["10.0.0.0/8"] })], {
      strict: true,
    });
    expect(openProjects(fenced.router.snapshot!)).toEqual([]);
    expect((await fenced.admit("10.0.0.1", null)).client?.projectId).toBe("p1");
  });
});

describe("strict mode's listening test", () => {
  it("is loopback only for loopback literals and localhost", () => {
    for (
      const host of ["127.0.0.1", "127.5.0.1", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"]
    ) {
      expect(listensBeyondLoopback(host), host).toBe(false);
    }
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "2001:db8::1", "gateway.example.com"]) {
      expect(listensBeyondLoopback(host), host).toBe(true);
    }
  });
});

describe("options in request headers", () => {
  const { admit } = gateway([project({ passwordless_cidrs: ["10.0.0.0/8"] })]);

  it("ask for what the username options do, and never leave the gateway", async () => {
    const fields = headers(
      "X-Octoprox-Country: de",
      "x-octoprox-city: New York City",
      "X-OCTOPROX-SESSION: abc-123",
      "X-Octoprox-Session-Time: 30",
      "Accept: */*",
    );
    const { refusal, client, ticket } = await admit("198.51.100.1", basic("shop"), fields);
    expect(refusal).toBeUndefined();
    expect(client?.options).toEqual({
      user: "shop",
      country: "DE",
      city: "new_york",
      sessionId: "abc-123",
      sessionMinutes: 30,
    });
    const head = parseRequestHead(
      new TextEncoder().encode(
        "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n" +
          "X-Octoprox-Country: de\r\nx-octoprox-city: New York City\r\nX-OCTOPROX-SESSION: abc-123\r\n" +
          "X-Octoprox-Session-Time: 30\r\nX-Octoprox-State:\r\nAccept: */*\r\n\r\n",
      ),
    );
    const again = await admit("198.51.100.1", basic("shop"), head.headers);
    expect(again.refusal).toBeUndefined();
    const sent = new TextDecoder().decode(
      encodeUpstreamRequestHead(head, { authority: "example.com", path: "/" }, {
        form: "absolute",
        strip: again.ticket.strippedHeaders,
      }),
    );
    expect(sent).toContain("Accept: */*\r\n");
    expect(sent).not.toMatch(/octoprox/i);
    expect(ticket.strippedHeaders).toEqual(
      new Set([
        "x-octoprox-country",
        "x-octoprox-city",
        "x-octoprox-session",
        "x-octoprox-session-time",
      ]),
    );
  });

  it("serve a password-less client, which has no username to put them in", async () => {
    const { client } = await admit("10.0.0.9", null, headers("X-Octoprox-Country: GB"));
    expect(client).toMatchObject({ projectId: "p1", options: { user: "shop", country: "GB" } });
  });

  it("combine with the username's, which must say the same where both give one", async () => {
    const combined = await admit(
      "198.51.100.1",
      basic("shop-cc-us"),
      headers("X-Octoprox-State: ny", "X-Octoprox-Country: US"),
    );
    expect(combined.client?.options).toEqual({ user: "shop", country: "US", state: "NY" });
    const clash = await admit(
      "198.51.100.1",
      basic("shop-cc-us"),
      headers("X-Octoprox-Country: de"),
    );
    expect(clash.refusal).toMatchObject({
      status: 400,
      proxyStatus: "http_request_error",
      reason: "X-Octoprox-Country conflicts with the username's -cc- option: give it once, or " +
        "the same in both",
    });
    const session = await admit(
      "198.51.100.1",
      basic("shop-sessid-a"),
      headers("X-Octoprox-Session: b"),
    );
    expect(session.refusal?.reason).toMatch(/^X-Octoprox-Session conflicts with .* -sessid-/);
  });

  it("refuse a value written wrong with 400 naming the header, as the username's are", async () => {
    const cases: [string[], string][] = [
      [["X-Octoprox-Country: deu"], HeaderOptionMessage.country],
      [["X-Octoprox-Country: zz"], HeaderOptionMessage.country],
      [["X-Octoprox-State: ny"], HeaderOptionMessage.needsCountry],
      [["X-Octoprox-Country: us", "X-Octoprox-State: gb-eng"], HeaderOptionMessage.state],
      [["X-Octoprox-Country: us", "X-Octoprox-City: ---"], HeaderOptionMessage.city],
      [[`X-Octoprox-Session: ${"s".repeat(129)}`], HeaderOptionMessage.sessionId],
      [["X-Octoprox-Session-Time: 0"], HeaderOptionMessage.sessionMinutes],
      [["X-Octoprox-Session-Time: 1441"], HeaderOptionMessage.sessionMinutes],
      [["X-Octoprox-Session-Time: 5m"], HeaderOptionMessage.sessionMinutes],
      [["X-Octoprox-Country: de", "X-Octoprox-Country: de"], HeaderOptionMessage.repeated],
      [["X-Octoprox-Mitm: on"], HeaderOptionMessage.mitmOff],
      [["X-Octoprox-Mitm: plain"], HeaderOptionMessage.mitmOff],
    ];
    for (const [lines, reason] of cases) {
      const { refusal } = await admit("198.51.100.1", basic("shop"), headers(...lines));
      expect(refusal, lines.join(" | ")).toEqual({
        status: 400,
        proxyStatus: "http_request_error",
        reason,
        rejection: "invalid_location",
      });
      expect(reason).toMatch(/^X-Octoprox|Each X-Octoprox/);
    }
    const unknown = await admit("198.51.100.1", basic("shop"), headers("X-Octoprox-Contry: de"));
    expect(unknown.refusal?.reason).toBe(
      "X-Octoprox-Contry is not an Octoprox option header: use X-Octoprox-Country, " +
        "X-Octoprox-State, X-Octoprox-City, X-Octoprox-Session, X-Octoprox-Session-Time, " +
        "X-Octoprox-Mitm",
    );
  });

  it("leave the credentials' answer as it was for the connection's next request", async () => {
    const first = await admit("198.51.100.1", basic("shop"), headers("X-Octoprox-Country: de"));
    expect(first.client?.options.country).toBe("DE");
    const next = await admit("198.51.100.1", basic("shop"));
    expect(next.client?.options).toEqual({ user: "shop" });
    const byAddress = await admit("10.0.0.9", null);
    expect(byAddress.client?.options).toEqual({ user: "shop" });
  });

  it("are judged after the client's address: a refused address hears 403, not 400", async () => {
    const fenced = gateway([project({ allowed_cidrs: ["10.0.0.0/8"] })]);
    const { refusal } = await fenced.admit(
      "198.51.100.1",
      basic("shop", PASSWORD),
      headers("X-Octoprox-Country: nowhere"),
    );
    expect(refusal).toBe(clientAddressDenied);
  });
});

describe("the client's interception opt-out and its project's interception", () => {
  const plain = { mode: "plain", bypass: [".bank.example", "203.0.113.9"] };
  const { admit, warnings } = gateway([
    project({ passwordless_cidrs: ["10.0.0.0/8"], tls_mitm: plain }),
    project({ id: "p2", username: "raw", password_digest: `digest:${PASSWORD}` }),
    project({ id: "p3", username: "later", tls_mitm: { mode: "h3_only", bypass: [] } }),
    project({
      id: "p4",
      username: "browser",
      tls_mitm: { mode: "override_ua", browser: "firefox", bypass: [] },
    }),
    project({
      id: "p5",
      username: "safari",
      tls_mitm: { mode: "override_ua", browser: "safari", bypass: [] },
    }),
  ]);

  it("hands a plain project's clients its interception, frozen; none for a raw one", async () => {
    const { client } = await admit("198.51.100.1", basic("shop"));
    expect(client?.interception).toEqual(plain);
    expect(Object.isFrozen(client?.interception)).toBe(true);
    expect(Object.isFrozen(client?.interception?.bypass)).toBe(true);
    // Password-less clients of the project carry it too.
    expect((await admit("10.0.0.9", null)).client?.interception).toEqual(plain);
    const raw = (await admit("198.51.100.1", basic("raw"))).client;
    expect(raw?.projectId).toBe("p2");
    expect(raw !== undefined && "interception" in raw).toBe(false);
  });

  it("hands a browser-grade project's clients its mode and browser", async () => {
    const { client } = await admit("198.51.100.1", basic("browser"));
    expect(client?.interception).toEqual({ mode: "override_ua", browser: "firefox", bypass: [] });
  });

  it("leaves a mode or a browser this gateway does not serve raw, and says so", async () => {
    const { client } = await admit("198.51.100.1", basic("later"));
    expect(client?.projectId).toBe("p3");
    expect(client?.interception).toBeUndefined();
    expect(warnings).toContainEqual({
      message: "A project's TLS interception mode is not served here: its tunnels stay raw",
      fields: { project: "p3", mode: "h3_only", browser: undefined },
    });
    expect((await admit("198.51.100.1", basic("safari"))).client?.interception).toBeUndefined();
    expect(warnings).toContainEqual({
      message: "A project's TLS interception mode is not served here: its tunnels stay raw",
      fields: { project: "p5", mode: "override_ua", browser: "safari" },
    });
  });

  it("takes -mitm-off and X-Octoprox-Mitm: off alike, the interception kept beside it", async () => {
    const byName = await admit("198.51.100.1", basic("shop-mitm-off"));
    expect(byName.client?.options).toEqual({ user: "shop", mitmOff: true });
    expect(byName.client?.interception).toEqual(plain);
    const byHeader = await admit("198.51.100.1", basic("shop"), headers("X-Octoprox-Mitm: OFF"));
    expect(byHeader.refusal).toBeUndefined();
    expect(byHeader.client?.options).toEqual({ user: "shop", mitmOff: true });
    expect(byHeader.client?.interception).toEqual(plain);
    expect(byHeader.ticket.strippedHeaders).toEqual(new Set(["x-octoprox-mitm"]));
    const both = await admit(
      "198.51.100.1",
      basic("shop-mitm-off"),
      headers("X-Octoprox-Mitm: off"),
    );
    expect(both.refusal).toBeUndefined();
    // Another value is a 400 naming the option, as any option written wrong is.
    const wrong = await admit("198.51.100.1", basic("shop-mitm-on"));
    expect(wrong.refusal).toMatchObject({ status: 400 });
    expect(wrong.refusal?.reason).toBe(
      "Interception can only be turned off for a connection: -mitm-off",
    );
  });
});
