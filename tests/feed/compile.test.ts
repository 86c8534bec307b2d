/**
 * The compile over a real schema: the sections it makes, their order, what it leaves out, and
 * the same bytes (so the same digests) for unchanged definitions. Also the runtime section's
 * read of Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile, readRuntimeSection } from "../../control/feed/compile.ts";
import { passwordDigest } from "../../shared/feed/codec.ts";
import type { ConnectorSection, GlobalSection } from "../../shared/feed/models.ts";
import { JobKind } from "../../shared/roles.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import {
  type FeedBed,
  feedBed,
  type FeedDatabase,
  feedDatabase,
  insertConnector,
  insertCredential,
  insertProject,
  insertProxy,
} from "../../testkit/feed.ts";
import {
  KeyPlace,
  newKeyPair,
  newPresharedKey,
  sealWireguardKey,
} from "../../control/services/wireguard-keys.ts";

let db: FeedDatabase;
let bed: FeedBed;
const ids: Record<string, string> = {};

beforeAll(async () => {
  db = await feedDatabase();
  bed = await feedBed();
  const sql = db.database.sql;
  ids.shop = await insertProject(sql, { name: "Shop", username: "shop", password: "pw-shop-1" });
  ids.labs = await insertProject(sql, { name: "Labs", username: "labs", password: "pw-labs-1" });
  ids.cred = await insertCredential(sql, ids.shop, {
    user: "acct-7",
    pass: "vendor-secret",
    zone: "dc",
    api_token: "never-shipped",
  });
  ids.main = await insertConnector(sql, ids.shop, {
    name: "main",
    countries: ["us", "DE", "de"],
    domainAllow: ["Example.com", "a.org"],
    weight: 5,
  });
  ids.vendor = await insertConnector(sql, ids.shop, {
    name: "vendor",
    credentialId: ids.cred,
    config: { zone: "residential", empty: "" },
  });
  ids.off = await insertConnector(sql, ids.labs, { name: "off", enabled: false });
  ids.leaving = await insertConnector(sql, ids.labs, { name: "leaving", pendingDeletion: true });
  // Inserted out of creation order: the section lists them oldest first.
  ids.p2 = await insertProxy(sql, ids.shop, ids.main, {
    host: "10.0.0.2",
    ageSeconds: 20,
    metadata: { max_concurrency: 4, note: "not shipped" },
  });
  ids.p1 = await insertProxy(sql, ids.shop, ids.main, {
    host: "10.0.0.1",
    ageSeconds: 30,
    username: "u1",
    password: "p1",
    country: "DE",
    status: "degraded",
    metadata: { max_concurrency: "9" },
  });
  ids.p3 = await insertProxy(sql, ids.shop, ids.main, {
    host: "10.0.0.3",
    ageSeconds: 10,
    status: "draining",
    metadata: { max_concurrency: 0 },
  });
  ids.v1 = await insertProxy(sql, ids.shop, ids.vendor, {
    host: "gw.vendor.test",
    port: 7000,
    scheme: "socks5",
    username: "{user}-zone-{zone}-{missing}",
    password: "{pass}{empty}",
  });
  ids.o1 = await insertProxy(sql, ids.labs, ids.off, { host: "10.1.0.1" });
});

afterAll(async () => {
  await bed?.close();
  await db?.close();
});

function options() {
  return {
    keys: bed.feedKeys,
    defaultStrategy: "random" as const,
    providers: new ProviderRegistry(),
  };
}

describe("compile", () => {
  it("makes one global section and one per connector, in a stable order", async () => {
    const compiled = await compile(db.database, options());
    const connectorIds = [ids.main, ids.vendor, ids.off, ids.leaving].sort();
    expect([...compiled.sections.keys()]).toEqual([
      "global",
      ...connectorIds.map((id) => `connector:${id}`),
    ]);

    const global = JSON.parse(compiled.sections.get("global")!.json) as GlobalSection;
    expect(global.default_strategy).toBe("random");
    expect(global.projects.map((p) => p.id)).toEqual([ids.shop, ids.labs].sort());
    const shop = global.projects.find((p) => p.id === ids.shop)!;
    expect(Object.keys(shop)).toEqual([
      "id",
      "name",
      "username",
      "password_digest",
      "strategy",
      "session_ttl_seconds",
      "sticky_quarantine",
      "location_policy",
      "location_preflight",
      "location_sources",
      "location_conflict_rule",
      "connection_timeout_seconds",
      "max_retries",
      "traffic_quota",
      "rate_limit",
      "max_connections",
      "allowed_cidrs",
      "passwordless_cidrs",
      "sequence",
      "tls_mitm",
      "blocking",
      "domain_rules",
    ]);
    expect(shop.sequence).toBeNull();
    // Interception off: nothing for gateways to apply.
    expect(shop.tls_mitm).toBeNull();
    expect(shop.blocking).toBeNull();
    expect(shop.domain_rules).toBeNull();
    expect(shop.password_digest).toBe(await passwordDigest(bed.feedKeys, "pw-shop-1"));
    // The password itself is never in the feed.
    expect(compiled.sections.get("global")!.json).not.toContain("pw-shop-1");

    const main = JSON.parse(
      compiled.sections.get(`connector:${ids.main}`)!.json,
    ) as ConnectorSection;
    expect(main.connector).toMatchObject({
      id: ids.main,
      project_id: ids.shop,
      enabled: true,
      weight: 5,
      countries: ["DE", "US"],
      domain_allow: ["a.org", "example.com"],
      rate_limit: null,
      traffic: null,
    });
    expect(main.proxies.map((p) => p.id)).toEqual([ids.p1, ids.p2, ids.p3]);
    expect(main.proxies[0]).toEqual({
      id: ids.p1,
      scheme: "http",
      host: "10.0.0.1",
      port: 3128,
      username: "u1",
      password: "p1",
      country: "DE",
      status: "degraded",
      max_concurrency: null,
    });
    expect(main.proxies.map((p) => p.max_concurrency)).toEqual([null, 4, null]);
    expect(main.proxies[2].status).toBe("draining");
    expect(compiled.sections.get(`connector:${ids.main}`)!.json).not.toContain("not shipped");

    const vendor = JSON.parse(
      compiled.sections.get(`connector:${ids.vendor}`)!.json,
    ) as ConnectorSection;
    // Connector config wins (zone), the credential fills the rest, unfilled ones stay.
    expect(vendor.proxies[0].username).toBe("acct-7-zone-residential-{missing}");
    expect(vendor.proxies[0].password).toBe("vendor-secret{empty}");
    expect(compiled.sections.get(`connector:${ids.vendor}`)!.json).not.toContain("never-shipped");

    // Disabled and pending-deletion connectors are in the feed; the router skips them.
    const off = JSON.parse(compiled.sections.get(`connector:${ids.off}`)!.json) as ConnectorSection;
    expect(off.connector.enabled).toBe(false);
    const leaving = JSON.parse(
      compiled.sections.get(`connector:${ids.leaving}`)!.json,
    ) as ConnectorSection;
    expect(leaving.connector.pending_deletion).toBe(true);
    expect(leaving.proxies).toEqual([]);

    // Job keys: proxies of enabled connectors not leaving the pool, in the feed's order.
    const byConnector = [[ids.main, [ids.p1, ids.p2]], [ids.vendor, [ids.v1]]] as const;
    expect(compiled.jobKeys.get(JobKind.health)).toEqual(
      [...byConnector].sort((a, b) => (a[0] < b[0] ? -1 : 1)).flatMap(([, keys]) => keys),
    );
    // Those not checked yet or suspect (degraded) go on the health kind's first lane.
    expect([...compiled.firstLaneKeys.get(JobKind.health)!]).toEqual([ids.p1]);
    expect(compiled.proxyIds.size).toBe(5);
    expect(compiled.connectorIds.size).toBe(4);
  });

  it("restricted to one project, makes that project's sections, byte for byte the same", async () => {
    const whole = await compile(db.database, options());
    const shop = await compile(db.database, { ...options(), projectId: ids.shop });
    const shopConnectors = [ids.main, ids.vendor].sort().map((id) => `connector:${id}`);
    expect([...shop.sections.keys()]).toEqual(["global", ...shopConnectors]);
    for (const name of shopConnectors) {
      expect(shop.sections.get(name)).toEqual(whole.sections.get(name));
    }
    const global = JSON.parse(shop.sections.get("global")!.json) as GlobalSection;
    const wholeGlobal = JSON.parse(whole.sections.get("global")!.json) as GlobalSection;
    expect(global.projects).toEqual(wholeGlobal.projects.filter((p) => p.id === ids.shop));
    expect([...shop.projectIds]).toEqual([ids.shop]);
    expect([...shop.proxyIds].sort()).toEqual([ids.p1, ids.p2, ids.p3, ids.v1].sort());
    expect(shop.jobKeys.get(JobKind.health)).toEqual(
      whole.jobKeys.get(JobKind.health)!.filter((id) => id !== ids.o1),
    );
  });

  it("compiles unchanged definitions to the same bytes, and a change to one section only", async () => {
    const first = await compile(db.database, options());
    const second = await compile(db.database, options());
    for (const [name, text] of first.sections) {
      expect(second.sections.get(name)).toEqual(text);
    }
    await db.database.sql`update proxies set status = 'unhealthy' where id = ${ids.p2}`;
    try {
      const third = await compile(db.database, options());
      const moved = [...first.sections].filter(([name, text]) =>
        third.sections.get(name)!.digest !== text.digest
      ).map(([name]) => name);
      expect(moved).toEqual([`connector:${ids.main}`]);
    } finally {
      await db.database.sql`update proxies set status = 'healthy' where id = ${ids.p2}`;
    }
  });

  it("carries a project's interception when its mode is not off, its browser and bypass list as stored", async () => {
    const sql = db.database.sql;
    const bypass = [".bank.example", "pinned.example"];
    await sql`update projects set tls_mitm_mode = 'plain',
      tls_mitm_bypass = ${JSON.stringify(bypass)}::jsonb where id = ${ids.labs}`;
    try {
      const compiled = await compile(db.database, options());
      const global = JSON.parse(compiled.sections.get("global")!.json) as GlobalSection;
      expect(global.projects.find((p) => p.id === ids.labs)!.tls_mitm).toEqual({
        mode: "plain",
        browser: null,
        bypass,
      });
      expect(global.projects.find((p) => p.id === ids.shop)!.tls_mitm).toBeNull();
      // A browser-grade mode carries its browser.
      await sql`update projects set tls_mitm_mode = 'override_ua', tls_mitm_browser = 'edge'
        where id = ${ids.labs}`;
      const browser = JSON.parse(
        (await compile(db.database, options())).sections.get("global")!.json,
      ) as GlobalSection;
      expect(browser.projects.find((p) => p.id === ids.labs)!.tls_mitm).toEqual({
        mode: "override_ua",
        browser: "edge",
        bypass,
      });
      await sql`update projects set tls_mitm_browser = null where id = ${ids.labs}`;
      // Off again, a bypass list kept for later stays out of the feed.
      await sql`update projects set tls_mitm_mode = 'off' where id = ${ids.labs}`;
      const off = JSON.parse((await compile(db.database, options())).sections.get("global")!.json);
      expect((off as GlobalSection).projects.find((p) => p.id === ids.labs)!.tls_mitm).toBeNull();
    } finally {
      await sql`update projects set tls_mitm_mode = 'off', tls_mitm_bypass = '[]'::jsonb
        where id = ${ids.labs}`;
    }
  });

  it("serves a stored strategy no router has as the install's default, logged once", async () => {
    const sql = db.database.sql;
    // The check constraint guards the column; a row from an older release can still hold one.
    await sql`alter table projects drop constraint projects_strategy_check`;
    await sql`update projects set strategy = 'fastest' where id = ${ids.labs}`;
    try {
      const compileLogged = () => compile(db.database, { ...options(), logger: bed.logger });
      const compiled = await compileLogged();
      await compileLogged();
      const global = JSON.parse(compiled.sections.get("global")!.json) as GlobalSection;
      expect(global.projects.find((p) => p.id === ids.labs)!.strategy).toBe("random");
      expect(
        bed.lines.filter((l) => l.msg === "Unknown routing strategy served as the default"),
      ).toHaveLength(1);
    } finally {
      await sql`update projects set strategy = 'round_robin' where id = ${ids.labs}`;
    }
  });
});

describe("the tunnel part", () => {
  it("carries the WireGuard identity and every device by id, keys opened; never a device's private key", async () => {
    const sql = db.database.sql;
    const withSecret = () => ({ ...options(), internalSecret: bed.secret });
    // No identity yet: an empty part (a gateway runs no WireGuard).
    const empty = JSON.parse(
      (await compile(db.database, withSecret())).sections.get("global")!.json,
    );
    expect((empty as GlobalSection).tunnels).toEqual({
      wireguard: null,
      devices: [],
      openvpn: null,
    });
    // Without the secret the keys open under, the part is left out.
    expect(JSON.parse((await compile(db.database, options())).sections.get("global")!.json))
      .not.toHaveProperty("tunnels");

    const server = newKeyPair();
    const seal = (place: string, key: string, secret = bed.secret) =>
      sealWireguardKey(secret, place, key);
    await sql`insert into wireguard_settings (id, private_key_sealed, public_key, endpoint_host)
      values (1, ${seal(KeyPlace.server, server.privateKey)}, ${server.publicKey}, 'vpn.test')`;
    const device = (id: string, address: string, secret = bed.secret) => {
      const pair = newKeyPair();
      const psk = newPresharedKey();
      return {
        pair,
        psk,
        row: {
          id,
          address,
          public_key: pair.publicKey,
          private_key_sealed: seal(KeyPlace.devicePrivate(id), pair.privateKey, secret),
          preshared_key_sealed: seal(KeyPlace.devicePreshared(id), psk, secret),
        },
      };
    };
    // Made out of id order; one sealed under another install's secret (a restored backup).
    const ids2 = ["f0000000-0000-4000-8000-000000000002", "10000000-0000-4000-8000-000000000001"];
    const phone = device(ids2[0], "10.66.0.2");
    const laptop = device(ids2[1], "10.66.0.3");
    const foreign = device("a0000000-0000-4000-8000-000000000003", "10.66.0.4", "another secret");
    for (
      const [project, made, options] of [
        [ids.shop, phone, { name: "phone", country: "US", state: "NY", city: "new_york" }],
        [ids.labs, laptop, { name: "laptop", enabled: false, session_id: "s-9" }],
        [ids.labs, foreign, { name: "restored" }],
      ] as const
    ) {
      await sql`insert into tunnel_devices ${
        sql({ project_id: project, protocol: "wireguard", ...made.row, ...options })
      }`;
    }
    try {
      const compileLogged = () => compile(db.database, { ...withSecret(), logger: bed.logger });
      const compiled = await compileLogged();
      const json = compiled.sections.get("global")!.json;
      const global = JSON.parse(json) as GlobalSection;
      expect(Object.keys(global)).toEqual([
        "schema",
        "default_strategy",
        "projects",
        "descriptors",
        "geo",
        "tunnels",
      ]);
      expect(global.tunnels).toEqual({
        wireguard: {
          private_key: server.privateKey,
          public_key: server.publicKey,
          subnet: "10.66.0.0/16",
          listen_port: 51820,
          mtu: 1420,
          persistent_keepalive_seconds: 25,
        },
        devices: [
          {
            id: ids2[1],
            project_id: ids.labs,
            protocol: "wireguard",
            name: "laptop",
            address: "10.66.0.3",
            enabled: false,
            public_key: laptop.pair.publicKey,
            preshared_key: laptop.psk,
            country: null,
            state: null,
            city: null,
            session_id: "s-9",
            certificate_serial: null,
          },
          {
            id: ids2[0],
            project_id: ids.shop,
            protocol: "wireguard",
            name: "phone",
            address: "10.66.0.2",
            enabled: true,
            public_key: phone.pair.publicKey,
            preshared_key: phone.psk,
            country: "US",
            state: "NY",
            city: "new_york",
            session_id: null,
            certificate_serial: null,
          },
        ],
        openvpn: null,
      });
      for (const made of [phone, laptop]) expect(json).not.toContain(made.pair.privateKey);
      // The device whose keys do not open is left out, said once.
      await compileLogged();
      expect(bed.lines.filter((l) => String(l.msg).startsWith("Device left out of the feed")))
        .toHaveLength(1);
      // A one-project compile carries that project's devices only.
      const shop = JSON.parse(
        (await compile(db.database, { ...withSecret(), projectId: ids.shop })).sections
          .get("global")!.json,
      ) as GlobalSection;
      expect(shop.tunnels!.devices.map((d) => d.id)).toEqual([ids2[0]]);
      // A server key that does not open leaves the identity out, the devices in.
      await sql`update wireguard_settings set private_key_sealed = ${
        seal(KeyPlace.server, server.privateKey, "another secret")
      }`;
      const unopened = JSON.parse(
        (await compile(db.database, withSecret())).sections.get("global")!.json,
      );
      expect((unopened as GlobalSection).tunnels!.wireguard).toBeNull();
      expect((unopened as GlobalSection).tunnels!.devices).toHaveLength(2);
    } finally {
      await sql`delete from tunnel_devices`;
      await sql`delete from wireguard_settings`;
    }
  });
});

describe("runtime section", () => {
  it("reads live quarantines and traffic blocks, filtered to what the compile holds", async () => {
    const compiled = await compile(db.database, options());
    const now = Date.now();
    await bed.redis.zadd(
      bed.keys.proxyQuarantined,
      now + 60_000,
      ids.p2,
      now + 30_000,
      ids.p1,
      now - 1000,
      ids.v1,
      now + 60_000,
      "gone-proxy",
    );
    await bed.redis.hset(bed.keys.trafficBlocked, {
      [ids.vendor]: JSON.stringify({ until_ms: now + 5000 }),
      [ids.main]: String(now + 9000),
      [ids.off]: "not json",
      "gone-connector": String(now + 9000),
      [`project:${ids.shop}`]: JSON.stringify({ until_ms: now + 7000 }),
      "project:gone-project": JSON.stringify({ until_ms: now + 7000 }),
    });
    const runtime = await readRuntimeSection(bed.redis, bed.keys, compiled, now);
    expect(runtime.quarantines).toEqual(
      [
        { proxy_id: ids.p1, until_ms: now + 30_000 },
        { proxy_id: ids.p2, until_ms: now + 60_000 },
      ].sort((a, b) => (a.proxy_id < b.proxy_id ? -1 : 1)),
    );
    expect(runtime.traffic_blocks).toEqual(
      [
        { connector_id: ids.main, until_ms: now + 9000 },
        { connector_id: ids.vendor, until_ms: now + 5000 },
      ].sort((a, b) => (a.connector_id < b.connector_id ? -1 : 1)),
    );
    // A project's block by its quota, filtered to the projects the compile holds.
    expect(runtime.project_blocks).toEqual([{ project_id: ids.shop, until_ms: now + 7000 }]);
    await bed.redis.del(bed.keys.proxyQuarantined, bed.keys.trafficBlocked);
    expect(await readRuntimeSection(bed.redis, bed.keys, compiled, now)).toEqual({
      schema: 1,
      quarantines: [],
      traffic_blocks: [],
      project_blocks: [],
    });
  });
});
