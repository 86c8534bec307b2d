/**
 * The shipped descriptors against their vendors' documentation: for each, what a dynamic-sessions
 * connector renders for the client options Octoprox takes, beside the documentation's own
 * example (quoted with its page) where the pages give one; then the rules every shipped
 * descriptor keeps (it parses, its templates name real fields, it refuses the places it cannot
 * write) and the rows its port and list types store.
 */
import { describe, expect, it } from "vitest";
import { BUILTIN_DESCRIPTORS } from "../../shared/vendors/builtin/index.ts";
import { parseDescriptor, type ProxyType } from "../../shared/vendors/descriptor.ts";
import type { DescriptorProvider, RequestOptions } from "../../shared/vendors/provider.ts";
import { builtinDescriptors, ProviderRegistry } from "../../shared/vendors/registry.ts";
import { sessionIdFor } from "../../shared/vendors/session-id.ts";
import {
  renderTemplate,
  templateNames,
  type TemplateSpec,
} from "../../shared/vendors/templates.ts";
import { US_STATES, usStateSlug } from "../../shared/vendors/us-states.ts";

const registry = new ProviderRegistry();
const PROJECT = "3f1c2a9e-5b7d-4e21-9c1a-0d8e6f4b2a17";
/** Where the vendor session id goes in an expected username or password. */
const SID = "<sid>";

function build(
  provider: string,
  config: Record<string, unknown>,
  credential: Record<string, unknown>,
): DescriptorProvider {
  const result = registry.descriptorProvider({ provider, config }, credential);
  if (!result.ok) throw new Error(result.message);
  return result.provider;
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The expected text: the client's session hashed with the project (what every gateway sends),
 * or, with no `-sessid-`, any fresh id of the type's form.
 */
function expected(provider: DescriptorProvider, text: string, session?: string): string | RegExp {
  if (!text.includes(SID)) return text;
  const spec = provider.sessionId;
  if (session !== undefined) return text.replace(SID, sessionIdFor(PROJECT, session, spec));
  const id = `${escape(spec.prefix)}[${escape(spec.alphabet)}]{${spec.length}}`;
  return new RegExp(`^${text.split(SID).map(escape).join(id)}$`);
}

function check(actual: string | null, want: string | RegExp) {
  if (typeof want === "string") expect(actual).toBe(want);
  else expect(actual).toMatch(want);
}

interface Row {
  name: string;
  options: RequestOptions;
  username: string;
  password: string;
}

interface VendorTable {
  provider: string;
  config: Record<string, unknown>;
  credential: Record<string, unknown>;
  rows: Row[];
}

const TABLES: VendorTable[] = [
  {
    provider: "oxylabs",
    config: { session_mode: "dynamic" },
    credential: { username: "acme", password: "s3cret" },
    rows: [
      // "customer-USERNAME:PASSWORD", then every session carries its time:
      // https://developers.oxylabs.io/proxies/residential-proxies/making-requests
      {
        name: "no option",
        options: {},
        username: `customer-acme-sessid-${SID}-sesstime-10`,
        password: "s3cret",
      },
      // "customer-USERNAME-cc-DE-city-munich":
      // https://developers.oxylabs.io/proxies/residential-proxies/location-settings/select-city
      {
        name: "-cc-",
        options: { country: "DE" },
        username: `customer-acme-cc-DE-sessid-${SID}-sesstime-10`,
        password: "s3cret",
      },
      // "customer-USERNAME-cc-DE-sessid-abcd1234":
      // https://developers.oxylabs.io/products/proxies/residential-proxies/session-control
      {
        name: "-cc- -sessid-",
        options: { country: "DE", sessionId: "42" },
        username: `customer-acme-cc-DE-sessid-${SID}-sesstime-10`,
        password: "s3cret",
      },
      // "st-us_california-city-los_angeles":
      // https://developers.oxylabs.io/proxies/residential-proxies/location-settings/select-state
      {
        name: "-cc- -st- -city-",
        options: { country: "US", state: "CA", city: "los_angeles", sessionId: "42" },
        username: `customer-acme-cc-US-st-us_california-city-los_angeles-sessid-${SID}-sesstime-10`,
        password: "s3cret",
      },
      // "customer-USERNAME-cc-US-city-CITY-sessid-abcde12345-sesstime-5":
      // https://developers.oxylabs.io/proxies/residential-proxies/making-requests
      {
        name: "-sesstime-",
        options: { sessionId: "42", sessionMinutes: 5 },
        username: `customer-acme-sessid-${SID}-sesstime-5`,
        password: "s3cret",
      },
      // "up to 1440 minutes (24 hours)": longer asks are clamped, not passed on.
      {
        name: "-sesstime- past the vendor's bound",
        options: { sessionId: "42", sessionMinutes: 1441 },
        username: `customer-acme-sessid-${SID}-sesstime-1440`,
        password: "s3cret",
      },
    ],
  },
  {
    provider: "brightdata",
    config: { session_mode: "dynamic", zone: "res_zone1", zone_password: "zpass" },
    credential: { customer_id: "hl_1a2b3c4d" },
    rows: [
      // "brd-customer-<customer_id>-zone-<zone_name>:<zone_password>":
      // https://docs.brightdata.com/cn/proxy-networks/residential/introduction.md
      {
        name: "no option",
        options: {},
        username: `brd-customer-hl_1a2b3c4d-zone-res_zone1-session-${SID}`,
        password: "zpass",
      },
      // "brd-customer-<customer_id>-zone-<zone_name>-country-us":
      // https://docs.brightdata.com/api-reference/proxy/geolocation-targeting.md
      {
        name: "-cc-",
        options: { country: "US" },
        username: `brd-customer-hl_1a2b3c4d-zone-res_zone1-country-us-session-${SID}`,
        password: "zpass",
      },
      // "brd-customer-<CUSTOMER_ID>-zone-<ZONE_NAME>-session-mystring12345":
      // https://help.brightdata.com/hc/en-us/articles/4413222056849-How-do-I-configure-IP-rotation-when-using-Bright-Data-
      {
        name: "-cc- -sessid-",
        options: { country: "US", sessionId: "42" },
        username: `brd-customer-hl_1a2b3c4d-zone-res_zone1-country-us-session-${SID}`,
        password: "zpass",
      },
      // "username-country-country_code-state-state_code" (lower-case two-letter codes) and
      // "-country-us-city-sanfrancisco":
      // https://docs.brightdata.com/cn/api-reference/proxy/geolocation-targeting.md
      {
        name: "-cc- -st- -city-",
        options: { country: "US", state: "CA", city: "san_francisco", sessionId: "42" },
        username:
          `brd-customer-hl_1a2b3c4d-zone-res_zone1-country-us-state-ca-city-sanfrancisco-session-${SID}`,
        password: "zpass",
      },
      // No session-time parameter: the session lives while it is used.
      {
        name: "-sesstime-",
        options: { sessionId: "42", sessionMinutes: 30 },
        username: `brd-customer-hl_1a2b3c4d-zone-res_zone1-session-${SID}`,
        password: "zpass",
      },
    ],
  },
  {
    provider: "decodo",
    config: { session_mode: "dynamic" },
    credential: { username: "acme", password: "s3cret" },
    rows: [
      // "user-username-session-1": https://help.decodo.com/docs/mobile-proxy-protocols
      {
        name: "no option",
        options: {},
        username: `user-acme-session-${SID}-sessionduration-10`,
        password: "s3cret",
      },
      // "user-username-country-us": https://help.decodo.com/docs/mobile-proxy-protocols
      {
        name: "-cc-",
        options: { country: "US" },
        username: `user-acme-country-us-session-${SID}-sessionduration-10`,
        password: "s3cret",
      },
      {
        name: "-cc- -sessid-",
        options: { country: "US", sessionId: "42" },
        username: `user-acme-country-us-session-${SID}-sessionduration-10`,
        password: "s3cret",
      },
      // No stored Decodo example (see decodo.ts): the widely documented Smartproxy form.
      {
        name: "-cc- -st- -city-",
        options: { country: "US", state: "NY", city: "new_york", sessionId: "42" },
        username:
          `user-acme-country-us-state-us_new_york-city-new_york-session-${SID}-sessionduration-10`,
        password: "s3cret",
      },
      // "The sessionduration parameter accepts any integer (minute) value between 1 and 1440":
      // https://help.decodo.com/docs/residential-proxy-custom-sticky-sessions.md
      {
        name: "-sesstime-",
        options: { sessionId: "42", sessionMinutes: 30 },
        username: `user-acme-session-${SID}-sessionduration-30`,
        password: "s3cret",
      },
    ],
  },
  {
    provider: "iproyal",
    config: { session_mode: "dynamic" },
    credential: { username: "acme", password: "s3cret" },
    rows: [
      {
        name: "no option",
        options: {},
        username: "acme",
        password: `s3cret_session-${SID}_lifetime-10m`,
      },
      {
        name: "-cc-",
        options: { country: "BR" },
        username: "acme",
        password: `s3cret_country-br_session-${SID}_lifetime-10m`,
      },
      // "password321_country-br_session-sgn34f3e_lifetime-10m":
      // https://docs.iproyal.com/proxies/residential/proxy/rotation.md
      {
        name: "-cc- -sessid-",
        options: { country: "BR", sessionId: "42" },
        username: "acme",
        password: `s3cret_country-br_session-${SID}_lifetime-10m`,
      },
      // "password_country-us_city-chicago" and "password_country-us_state-iowa":
      // https://docs.iproyal.com/tools/web-unblocker/geo-location-targeting
      {
        name: "-cc- -st- -city-",
        options: { country: "US", state: "IL", city: "chicago", sessionId: "42" },
        username: "acme",
        password: `s3cret_country-us_state-illinois_city-chicago_session-${SID}_lifetime-10m`,
      },
      // Names of several words lose their `_`, IPRoyal's own separator.
      {
        name: "-cc- -st- -city- of several words",
        options: { country: "US", state: "NY", city: "new_york", sessionId: "42" },
        username: "acme",
        password: `s3cret_country-us_state-newyork_city-newyork_session-${SID}_lifetime-10m`,
      },
      // "_lifetime-10m": https://docs.iproyal.com/proxies/residential/proxy/rotation.md
      {
        name: "-sesstime-",
        options: { sessionId: "42", sessionMinutes: 90 },
        username: "acme",
        password: `s3cret_session-${SID}_lifetime-90m`,
      },
    ],
  },
  {
    provider: "netnut",
    config: { session_mode: "dynamic" },
    credential: { username: "acme", password: "s3cret" },
    rows: [
      // "USERNAME-res-any":
      // https://help.netnut.io/netnut-documentation/netnut-proxies/residential-proxies/initial-setup
      { name: "no option", options: {}, username: `acme-res-any-sid-${SID}`, password: "s3cret" },
      // "USERNAME-res-nl": (same page)
      {
        name: "-cc-",
        options: { country: "NL" },
        username: `acme-res-nl-sid-${SID}`,
        password: "s3cret",
      },
      // "USERNAME-res-<COUNTRY CODE>-sid-44575": (same page)
      {
        name: "-cc- -sessid-",
        options: { country: "NL", sessionId: "42" },
        username: `acme-res-nl-sid-${SID}`,
        password: "s3cret",
      },
      // "US state, in combination with city name, for example us_alabama_birmingham":
      // https://help.netnut.io/netnut-documentation/netnut-proxies/residential-proxies/curl-request-parameters
      {
        name: "-cc- -st- -city-",
        options: { country: "US", state: "AL", city: "birmingham", sessionId: "42" },
        username: `acme-res_sc-us_alabama_birmingham-sid-${SID}`,
        password: "s3cret",
      },
      // "USERNAME-res_sc-nl_amsterdam": (initial setup)
      {
        name: "-cc- -city-",
        options: { country: "NL", city: "amsterdam", sessionId: "42" },
        username: `acme-res_sc-nl_amsterdam-sid-${SID}`,
        password: "s3cret",
      },
      // A state alone: not shown by the docs, written as with a city (see netnut.ts).
      {
        name: "-cc- -st-",
        options: { country: "US", state: "CA", sessionId: "42" },
        username: `acme-res_sc-us_california-sid-${SID}`,
        password: "s3cret",
      },
      // "for the United Kingdom, NetNut uses the code UK, not GB": (initial setup)
      {
        name: "-cc-gb",
        options: { country: "GB", sessionId: "42" },
        username: `acme-res-uk-sid-${SID}`,
        password: "s3cret",
      },
      // No session lifetime parameter.
      {
        name: "-sesstime-",
        options: { sessionId: "42", sessionMinutes: 30 },
        username: `acme-res-any-sid-${SID}`,
        password: "s3cret",
      },
    ],
  },
  {
    provider: "soax",
    config: { session_mode: "dynamic" },
    credential: { package_id: "123456", package_key: "pkey" },
    rows: [
      // "If you don't indicate sessionlength, a session will last 180 sec":
      // https://helpcenter.soax.com/en/articles/7035059-session-control-for-isp-proxies
      {
        name: "no option",
        options: {},
        username: `package-123456-sessionid-${SID}-sessionlength-180`,
        password: "pkey",
      },
      {
        name: "-cc-",
        options: { country: "US" },
        username: `package-123456-country-us-sessionid-${SID}-sessionlength-180`,
        password: "pkey",
      },
      // "package-{package_id}-country-us-sessionid-{session_id}-sessionlength-{time_in_sec}:{package_key}":
      // https://helpcenter.soax.com/en/articles/7035059-session-control-for-isp-proxies
      {
        name: "-cc- -sessid-",
        options: { country: "US", sessionId: "42" },
        username: `package-123456-country-us-sessionid-${SID}-sessionlength-180`,
        password: "pkey",
      },
      // "Example city: New York - new+york":
      // https://helpcenter.soax.com/en/articles/6723733-sticky-sessions
      {
        name: "-cc- -st- -city-",
        options: { country: "US", state: "NY", city: "new_york", sessionId: "42" },
        username:
          `package-123456-country-us-region-new+york-city-new+york-sessionid-${SID}-sessionlength-180`,
        password: "pkey",
      },
      // "sessionlength … in seconds": 90 minutes as 5400.
      {
        name: "-sesstime-",
        options: { sessionId: "42", sessionMinutes: 90 },
        username: `package-123456-sessionid-${SID}-sessionlength-5400`,
        password: "pkey",
      },
    ],
  },
];

describe("shipped descriptors render their vendors' documented credentials", () => {
  for (const table of TABLES) {
    describe(table.provider, () => {
      const provider = build(table.provider, table.config, table.credential);
      it.each(table.rows)("$name", (row) => {
        expect(provider.dynamic).toBe(true);
        const rendered = provider.renderRequest(PROJECT, row.options);
        check(rendered.username, expected(provider, row.username, row.options.sessionId));
        check(rendered.password, expected(provider, row.password, row.options.sessionId));
      });

      it("keeps secrets as placeholders in the stored gateway row", () => {
        const row = provider.gatewayRow();
        const secrets = [...provider.secretsRead()];
        expect(secrets.length).toBeGreaterThan(0);
        const stored = `${row.username} ${row.password}`;
        for (const key of secrets) expect(stored).toContain(`{${key}}`);
        for (const value of ["s3cret", "zpass", "pkey"]) expect(stored).not.toContain(value);
      });
    });
  }

  it("covers every descriptor with a dynamic-sessions type", () => {
    const dynamic = [...builtinDescriptors().values()]
      .filter((d) => d.descriptor.proxy_types.some((t) => t.dynamic_sessions))
      .map((d) => d.descriptor.id)
      .sort();
    expect(TABLES.map((t) => t.provider).sort()).toEqual(dynamic);
    // Webshare mirrors a list: its rows are checked below, entry by entry.
    expect(builtinDescriptors().has("webshare")).toBe(true);
    expect(dynamic).not.toContain("webshare");
  });
});

/** A full request for each session type, for the structural checks below. */
const FULL: RequestOptions = {
  country: "US",
  state: "NY",
  city: "new_york",
  sessionId: "s-1",
  sessionMinutes: 20,
};

/** Credentials and connector configs that fill every field of a descriptor. */
function filled(fields: readonly { key: string; type: string }[]): Record<string, unknown> {
  return Object.fromEntries(fields.map((f) => [f.key, f.type === "number" ? 1 : `x${f.key}`]));
}

function eachType(fn: (id: string, type: ProxyType) => void) {
  for (const { descriptor } of builtinDescriptors().values()) {
    for (const type of descriptor.proxy_types) fn(descriptor.id, type);
  }
}

describe("every shipped descriptor", () => {
  it("parses, and the registry holds each one once", () => {
    for (const input of BUILTIN_DESCRIPTORS) {
      const parsed = parseDescriptor(input);
      expect(parsed.ok ? [] : parsed.issues).toEqual([]);
    }
    expect([...builtinDescriptors().keys()].sort()).toEqual([
      "brightdata",
      "decodo",
      "iproyal",
      "netnut",
      "oxylabs",
      "soax",
      "webshare",
    ]);
  });

  it("has templates that name real fields and names a row can read", () => {
    const rowNames: readonly string[] = [
      "session_id",
      "index",
      "port",
      "country",
      "state",
      "city",
      "session_time",
    ];
    const itemNames: readonly string[] = ["item", "index"];
    for (const { descriptor } of builtinDescriptors().values()) {
      const credential = new Set(descriptor.credential_fields.map((f) => f.key));
      const connector = new Set(descriptor.connector_fields.map((f) => f.key));
      for (const type of descriptor.proxy_types) {
        const specs: { spec: TemplateSpec | undefined; bare: readonly string[] }[] = [
          { spec: type.username, bare: rowNames },
          { spec: type.password, bare: rowNames },
          ...Object.values(type.item ?? {}).map((spec) => ({ spec, bare: itemNames })),
        ];
        for (const { spec, bare } of specs) {
          if (spec === undefined) continue;
          for (const name of templateNames(spec)) {
            const [head, key] = name.split(".");
            const where = `${descriptor.id}/${type.id}: {${name}}`;
            if (head === "credential") expect(credential.has(key), where).toBe(true);
            else if (head === "connector") expect(connector.has(key), where).toBe(true);
            else expect(bare.includes(head), where).toBe(true);
          }
        }
        if (type.mode !== "list") {
          // A session or port type that sends no username authenticates no one.
          expect(type.username, `${descriptor.id}/${type.id}`).toBeDefined();
        }
      }
    }
  });

  it("renders every session type with every placeholder filled and no dangling separator", () => {
    eachType((id, type) => {
      if (!type.dynamic_sessions) return;
      const { descriptor } = builtinDescriptors().get(id)!;
      const provider = build(
        id,
        { ...filled(descriptor.connector_fields), proxy_type: type.id, session_mode: "dynamic" },
        filled(descriptor.credential_fields),
      );
      for (const options of [{}, { country: "US" }, FULL]) {
        if (!provider.servesPlace(options, null)) continue;
        const { username, password } = provider.renderRequest(PROJECT, options);
        for (const text of [username ?? "", password ?? ""]) {
          const where = `${id}/${type.id} ${JSON.stringify(options)}: ${text}`;
          expect(text, where).not.toMatch(/[{}]/);
          expect(text, where).not.toMatch(/--|__|[-_]$/);
        }
      }
    });
  });

  it("has session ids and times within what the schema and the vendor take", () => {
    eachType((id, type) => {
      const where = `${id}/${type.id}`;
      if (type.dynamic_sessions) expect(type.session_id, where).toBeDefined();
      if (type.session_time) {
        const time = type.session_time;
        expect(time.default_minutes, where).toBeGreaterThanOrEqual(time.min_minutes);
        expect(time.default_minutes, where).toBeLessThanOrEqual(time.max_minutes);
      }
    });
  });
});

describe("places a vendor cannot write are refused", () => {
  const oxylabs = build("oxylabs", {}, { username: "acme", password: "s3cret" });

  it("states only where the type writes them (US states by name)", () => {
    for (const id of ["oxylabs", "brightdata", "decodo", "iproyal", "netnut", "soax"]) {
      const { descriptor } = builtinDescriptors().get(id)!;
      const provider = build(
        id,
        { ...filled(descriptor.connector_fields), session_mode: "dynamic" },
        filled(descriptor.credential_fields),
      );
      expect(provider.servesPlace({ country: "US", state: "NY" }, null), id).toBe(true);
      // A German state (ISO 3166-2:DE BY) has no name in these vendors' grammars.
      expect(provider.servesPlace({ country: "DE", state: "BY" }, null), id).toBe(false);
      // A state code no US state has is refused, never sent on to serve the whole country.
      expect(provider.servesPlace({ country: "US", state: "ZZ" }, null), id).toBe(false);
      expect(provider.servesPlace({ country: "DE", city: "munich" }, null), id).toBe(true);
    }
  });

  it("neither states nor cities on types whose grammar has none", () => {
    const zone = { zone: "z1", zone_password: "zpass" };
    const customer = { customer_id: "hl_1a2b3c4d" };
    const mobile = build("brightdata", { ...zone, proxy_type: "mobile" }, customer);
    expect(mobile.servesPlace({ country: "US", city: "new_york" }, null)).toBe(true);
    expect(mobile.servesPlace({ country: "US", state: "NY" }, null)).toBe(false);
    for (const proxyType of ["isp", "datacenter"]) {
      const shared = build("brightdata", { ...zone, proxy_type: proxyType }, customer);
      expect(shared.servesPlace({ country: "US" }, null)).toBe(true);
      expect(shared.servesPlace({ country: "US", city: "new_york" }, null)).toBe(false);
      expect(shared.servesPlace({ country: "US", state: "NY" }, null)).toBe(false);
    }
    const netnutDc = build(
      "netnut",
      { proxy_type: "datacenter" },
      { username: "acme", password: "s3cret" },
    );
    expect(netnutDc.servesPlace({ country: "NL" }, null)).toBe(true);
    expect(netnutDc.servesPlace({ country: "NL", city: "amsterdam" }, null)).toBe(false);
  });

  it("no place at all on port types, whose exits are fixed", () => {
    const isp = build("oxylabs", { proxy_type: "isp" }, { username: "acme", password: "s3cret" });
    expect(isp.servesPlace({}, null)).toBe(true);
    expect(isp.servesPlace({ country: "US" }, null)).toBe(false);
  });

  it("countries outside the connector's declared ones", () => {
    expect(oxylabs.servesPlace({ country: "DE" }, new Set(["DE", "FR"]))).toBe(true);
    expect(oxylabs.servesPlace({ country: "US" }, new Set(["DE", "FR"]))).toBe(false);
  });
});

describe("port and list types store slot rows with secrets as placeholders", () => {
  it("Oxylabs ISP: one static IP per port from 8001, user-<username>", () => {
    // "curl -x isp.oxylabs.io:8001 -U "user-USERNAME:PASSWORD"", then "change the port to 8002,
    // 8003": https://developers.oxylabs.io/help-center/getting-started/start-using-isp-proxies
    const isp = build(
      "oxylabs",
      { proxy_type: "isp", slots: 3 },
      { username: "acme", password: "s3cret" },
    );
    expect(isp.slots).toBe(3);
    expect(isp.portSlotRow(0)).toMatchObject({
      scheme: "http",
      host: "isp.oxylabs.io",
      port: 8001,
      username: "user-acme",
      password: "{password}",
      slot: "port:8001",
    });
    expect(isp.portSlotRow(2)).toMatchObject({ port: 8003, slot: "port:8003" });
    expect(isp.shippedCredential()).toEqual({ username: "acme", password: "s3cret" });
  });

  it("Oxylabs datacenter and dedicated datacenter on their own hosts", () => {
    const credential = { username: "acme", password: "s3cret" };
    // "curl -x dc.oxylabs.io:8001 -U user-USERNAME:PASSWORD":
    // https://developers.oxylabs.io/help-center/getting-started/start-using-datacenter-proxies-per-ip
    expect(build("oxylabs", { proxy_type: "datacenter" }, credential).portSlotRow(0))
      .toMatchObject({ host: "dc.oxylabs.io", port: 8001, username: "user-acme" });
    // "curl -x ddc.oxylabs.io:8001 -U "user-USERNAME:PASSWORD"":
    // https://developers.oxylabs.io/help-center/es/primeros-pasos/start-using-dedicated-datacenter-proxies
    expect(build("oxylabs", { proxy_type: "dedicated_datacenter" }, credential).portSlotRow(1))
      .toMatchObject({ host: "ddc.oxylabs.io", port: 8002, password: "{password}" });
  });

  it("Decodo datacenter from port 10001, the plain username", () => {
    // "curl -x "http://username:password@dc.decodo.com:10001"":
    // https://help.decodo.com/docs/datacenter-pay-per-gb-proxy-protocols
    const dc = build("decodo", { proxy_type: "datacenter" }, {
      username: "acme",
      password: "s3cret",
    });
    expect(dc.portSlotRow(0)).toMatchObject({
      host: "dc.decodo.com",
      port: 10001,
      username: "acme",
      password: "{password}",
    });
  });

  it("Webshare: each listed proxy with its own credentials; the API key stays behind", () => {
    // The proxy object's username, password, proxy_address, port and country_code:
    // https://apidocs.webshare.io/proxy-list
    const list = build("webshare", {}, { api_key: "wskey" });
    expect(list.mode).toBe("list");
    const entry = {
      id: "d-10513",
      username: "wsuser",
      password: "wspass",
      proxy_address: "203.0.113.7",
      port: 6540,
      valid: true,
      country_code: "FR",
      city_name: "Paris",
    };
    expect(list.itemRow(entry, 0)).toEqual({
      scheme: "http",
      host: "203.0.113.7",
      port: 6540,
      username: "wsuser",
      password: "wspass",
      country: "FR",
      slot: "item:203.0.113.7:6540",
      metadata: { exit: "203.0.113.7" },
    });
    // "This field is null if plan.pool_filter is residential": no host, no row.
    expect(list.itemRow({ ...entry, proxy_address: null }, 1)).toBeUndefined();
    // The key is read by the list call only: no gateway holds it.
    expect(list.secretsRead().size).toBe(0);
    expect(list.shippedCredential()).toEqual({});
    expect(list.type.call?.headers).toEqual({ Authorization: "Token {credential.api_key}" });
  });
});

describe("the filters vendors need", () => {
  it("us_state: every state and DC by name; a code the table lacks cannot be written", () => {
    expect(Object.keys(US_STATES)).toHaveLength(51);
    expect(usStateSlug("NY")).toBe("new_york");
    expect(usStateSlug("dc")).toBe("district_of_columbia");
    expect(usStateSlug("ZZ")).toBeUndefined();
    for (const code of Object.keys(US_STATES)) {
      expect(renderTemplate("{state|us_state}", { state: code })).toMatch(/^[a-z]+(_[a-z]+)*$/);
    }
    let unwritable = false;
    expect(renderTemplate("{state|us_state}", { state: "ZZ" }, {
      unwritable: () => (unwritable = true),
    })).toBe("");
    expect(unwritable).toBe(true);
    expect(renderTemplate("{state|us_state|plus}", { state: "NH" })).toBe("new+hampshire");
    expect(renderTemplate("{state|us_state|compact}", { state: "NC" })).toBe("northcarolina");
  });

  it("gb_as_uk and then", () => {
    expect(renderTemplate("{country|gb_as_uk|lower}", { country: "GB" })).toBe("uk");
    expect(renderTemplate("{country|gb_as_uk|lower}", { country: "DE" })).toBe("de");
    expect(renderTemplate("res{state|then:_sc}", { state: "CA" })).toBe("res_sc");
    expect(renderTemplate("res{state|then:_sc}", {})).toBe("res");
  });
});
