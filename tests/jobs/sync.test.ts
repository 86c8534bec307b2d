/**
 * The sync and provision jobs against real Postgres and Redis (the api harness's stores): the
 * rows a vendor connector's configuration and its vendor say it should hold, and the writes that
 * take it there.
 */
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { eq } from "drizzle-orm";
import { connectors, credentials as credentialsTable, proxies } from "../../db/schema.ts";
import { ProvisionJob } from "../../control/jobs/provision.ts";
import { SyncJob } from "../../control/jobs/sync.ts";
import { PROVISION_LOCK } from "../../control/services/proxies.ts";
import { JobKind } from "../../shared/roles.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { startOrigin } from "../../testkit/upstreams/origin.ts";
import {
  oxylabs as oxylabsGrammar,
  startVendorApi,
  startVendorProxy,
  type VendorApi,
} from "../../testkit/upstreams/vendor-emulator.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let api: VendorApi;
let projectId: string;

const rowsOf = (connectorId: string) =>
  h.deps.database.db.select().from(proxies).where(eq(proxies.connectorId, connectorId));

async function vendorConnector(
  name: string,
  provider: string,
  credentialId: string,
  config: object,
  countries: string[] = [],
) {
  const answer = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name, kind: "vendor", provider, credential_id: credentialId, config, countries },
  });
  expect(answer.status, answer.text).toBe(201);
  return answer.body.id as string;
}

async function credential(name: string, provider: string, config: object) {
  const answer = await h.request("POST", `/api/v1/projects/${projectId}/credentials`, {
    token: h.tokens.editor,
    body: { name, provider, config },
  });
  expect(answer.status, answer.text).toBe(201);
  return answer.body.id as string;
}

beforeAll(async () => {
  const certificate = await testCertificate();
  const caFile = join(tmpdir(), `ox-sync-ca-${process.pid}.pem`);
  await writeFile(caFile, certificate.ca);
  api = await startVendorApi({ apiKey: "key-1" });
  h = await startHarness({
    env: { OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true", OCTOPROX_EGRESS_CA_FILE: caFile },
  });
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Vendors", username: "vendors" },
  });
  projectId = project.body.id;
});

afterAll(async () => {
  await h?.close();
  await api?.close();
});

describe("session pools", () => {
  let credentialId: string;
  let sync: SyncJob;
  beforeAll(async () => {
    credentialId = await credential("oxy", "oxylabs", { username: "acme", password: "s3cret" });
    sync = new SyncJob({ deps: h.deps, logger: h.deps.logger });
  });

  test("a pool declaring countries gets one group of slots per country, secrets as placeholders", async () => {
    const id = await vendorConnector("pool", "oxylabs", credentialId, { slots: 3 }, ["US", "FR"]);
    expect(await sync.sync(id)).toMatchObject({ added: 6, edited: 0, deleted: 0 });
    const rows = await rowsOf(id);
    expect(rows.map((r) => r.country).sort()).toEqual(["FR", "FR", "FR", "US", "US", "US"]);
    for (const row of rows) {
      expect(row.host).toBe("pr.oxylabs.io");
      expect(row.password).toBe("{password}");
      expect(row.username).toMatch(new RegExp(`^customer-acme-cc-${row.country}-sessid-[a-z0-9]+`));
      expect(row.status).toBe("initializing");
    }
    // Unchanged: a second sync writes nothing, and every slot keeps its vendor session.
    expect(await sync.sync(id)).toMatchObject({ added: 0, edited: 0, deleted: 0 });
    expect((await rowsOf(id)).map((r) => r.username).sort()).toEqual(
      rows.map((r) => r.username).sort(),
    );

    // Fewer slots: the surplus leaves; a country dropped takes its group with it.
    const edit = await h.request("PATCH", `/api/v1/projects/${projectId}/connectors/${id}`, {
      token: h.tokens.editor,
      body: { config: { slots: 2 }, countries: ["US"] },
    });
    expect(edit.status, edit.text).toBe(200);
    expect(await sync.sync(id)).toMatchObject({ added: 0, deleted: 4 });
    expect((await rowsOf(id)).map((r) => r.country)).toEqual(["US", "US"]);
  });

  test("a dynamic-sessions connector holds one healthy gateway row", async () => {
    const id = await vendorConnector("dynamic", "oxylabs", credentialId, {
      session_mode: "dynamic",
    });
    expect(await sync.sync(id)).toMatchObject({ added: 1 });
    const [row, ...others] = await rowsOf(id);
    expect(others).toEqual([]);
    expect(row).toMatchObject({ host: "pr.oxylabs.io", port: 7777, status: "healthy" });
    expect(row.username).toBe("customer-acme");
    expect(row.metadata).toMatchObject({ dynamic: true, slot: "gateway" });
  });

  test("provision adds one group per country to an all-countries pool, once", async () => {
    const id = await vendorConnector("all", "oxylabs", credentialId, { slots: 2 });
    await sync.sync(id);
    expect((await rowsOf(id)).map((r) => r.country)).toEqual([null, null]);
    const provision = new ProvisionJob({ deps: h.deps, logger: h.deps.logger });
    // Two runs at once (two gateways asking): the row lock lets one add the group.
    const added = await Promise.all([provision.provision(id, "FR"), provision.provision(id, "FR")]);
    expect(added.sort()).toEqual([0, 2]);
    expect((await rowsOf(id)).map((r) => r.country).sort()).toEqual(["FR", "FR", null, null]);
    // The group stays at the next sync, sessions as they were.
    expect(await sync.sync(id)).toMatchObject({ added: 0, deleted: 0, edited: 0 });
    // A key that names no connector and country is skipped, nothing written.
    await provision.run({ keys: [`${id}:france`, "nope"] } as never, new AbortController().signal);
    expect(await rowsOf(id)).toHaveLength(4);
  });

  test("a deleted slot asks its connector's sync, which puts it back", async () => {
    const id = await vendorConnector("slots", "oxylabs", credentialId, { slots: 2 });
    await sync.sync(id);
    const [slot] = await rowsOf(id);
    const stream = h.deps.keys.jobStream(JobKind.sync);
    await h.deps.redis.del(stream);
    const deleted = await h.request("DELETE", `/api/v1/projects/${projectId}/proxies/${slot.id}`, {
      token: h.tokens.editor,
    });
    expect(deleted.status, deleted.text).toBe(204);
    const asked = (await h.deps.redis.xrange(stream, "-", "+")).map(([, fields]) => fields[1]);
    expect(asked).toEqual([id]);
    expect(await sync.sync(id)).toMatchObject({ added: 1, deleted: 0 });
    expect(await rowsOf(id)).toHaveLength(2);
  });

  test("a provision's lock holds up no write or lookup that only references the connector", async () => {
    const id = await vendorConnector("locked", "oxylabs", credentialId, { slots: 1 });
    const sql = h.deps.database.sql;
    await sql.begin(async (provisioning) => {
      await provisioning.unsafe(`select id from connectors where id = $1 for ${PROVISION_LOCK}`, [
        id,
      ]);
      // What a foreign key's check and the metering flush's parent lookup take: a key-share
      // lock, which goes through at once beside the provision's.
      const [row] = await sql.begin(async (other) => {
        await other`set local lock_timeout = '2s'`;
        return await other`select id from connectors where id = ${id} for key share`;
      });
      expect(row.id).toBe(id);
    });
  });
});

describe("port and list pools", () => {
  test("a port pool has one row per slot on sequential ports", async () => {
    const credentialId = await credential("oxy-isp", "oxylabs", {
      username: "acme",
      password: "pw",
    });
    const id = await vendorConnector("isp", "oxylabs", credentialId, {
      proxy_type: "isp",
      slots: 5,
    });
    const sync = new SyncJob({ deps: h.deps, logger: h.deps.logger });
    expect(await sync.sync(id)).toMatchObject({ added: 5 });
    expect((await rowsOf(id)).map((r) => r.port).sort()).toEqual([8001, 8002, 8003, 8004, 8005]);
  });
});

describe("port pools whose exits are discovered through them", () => {
  test("each slot's exit is asked through it; one that moved is written, a failure moves nothing", async () => {
    const [vendor, origin] = await Promise.all([
      startVendorProxy({ grammar: oxylabsGrammar, accounts: { acme: "pw" } }),
      startOrigin(),
    ]);
    try {
      const saved = await h.request("POST", "/api/v1/providers", {
        token: h.tokens.admin,
        body: {
          descriptor: {
            id: "acme-discovered",
            name: "Acme discovered ports",
            credential_fields: [
              { key: "username", label: "User", type: "text", required: true },
              {
                key: "password",
                label: "Password",
                type: "password",
                secret: true,
                required: true,
              },
            ],
            proxy_types: [{
              id: "isp",
              name: "ISP",
              mode: "port",
              host: "127.0.0.1",
              port: vendor.port,
              max_slots: 1,
              username: "customer-{credential.username}",
              password: "{credential.password}",
              discovery: { url: `${origin.url}/ip`, ip_path: "ip" },
            }],
          },
        },
      });
      expect(saved.status, saved.text).toBe(201);
      const credentialId = await credential("acme-discovered", "acme-discovered", {
        username: "acme",
        password: "pw",
      });
      const id = await vendorConnector("discovered", "acme-discovered", credentialId, { slots: 1 });
      const sync = new SyncJob({ deps: h.deps, logger: h.deps.logger });
      expect(await sync.sync(id)).toMatchObject({ added: 1 });
      const [first] = await rowsOf(id);
      // The exit the vendor gave the discovery request (the emulator's, per request).
      expect(vendor.requests).toHaveLength(1);
      expect(first.metadata.exit).toMatch(/^127\./);
      expect(first.password).toBe("{password}");

      // The next sync asks again: the emulator gives a session-less request a fresh exit, as a
      // vendor whose port moved to another address would; it is written on the same row.
      expect(await sync.sync(id)).toMatchObject({ edited: 1, added: 0, deleted: 0 });
      const [moved] = await rowsOf(id);
      expect(moved.id).toBe(first.id);
      expect(moved.metadata.exit).not.toBe(first.metadata.exit);

      // The vendor refusing the discovery (a wrong password): the slot keeps its exit.
      await h.deps.database.db.update(credentialsTable).set({
        config: { username: "acme", password: "no" },
      })
        .where(eq(credentialsTable.id, credentialId));
      expect(await sync.sync(id)).toMatchObject({ edited: 0, added: 0, deleted: 0 });
      const [kept] = await rowsOf(id);
      expect(kept.metadata.exit).toBe(moved.metadata.exit);
    } finally {
      await Promise.all([vendor.close(), origin.close()]);
    }
  });
});

describe("pools a vendor call lists", () => {
  const listDescriptor = () => ({
    id: "acme-list",
    name: "Acme list",
    credential_fields: [{
      key: "api_key",
      label: "API key",
      type: "password",
      secret: true,
      required: true,
    }],
    auth: {
      call: {
        method: "POST",
        url: `${api.url}/auth/token`,
        body: { api_key: "{credential.api_key}" },
      },
      token_path: "token",
    },
    proxy_types: [{
      id: "list",
      name: "List",
      mode: "list",
      call: {
        url: `${api.url}/proxies?page=1`,
        headers: { authorization: "Bearer {auth.token}" },
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
    }, {
      id: "ports",
      name: "Ports",
      mode: "port",
      host: "gw.acme.example",
      port: 9000,
      call: { url: `${api.url}/exits`, headers: { authorization: "Bearer {auth.token}" } },
      item: {
        host: "gw.acme.example",
        port: "{item.port}",
        exit: "{item.ip}",
        country: "{item.country}",
      },
    }],
  });
  const proxy = (n: number, password = `pw${n}`) => ({
    proxy_address: `10.0.0.${n}`,
    port: 8000 + n,
    username: `u${n}`,
    password,
    country_code: n % 2 === 0 ? "DE" : "US",
  });
  let sync: SyncJob;

  beforeAll(async () => {
    const saved = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor(), confirm_hosts: ["127.0.0.1"] },
    });
    expect(saved.status, saved.text).toBe(201);
    sync = new SyncJob({ deps: h.deps, logger: h.deps.logger });
  });

  test("a list sync mirrors the vendor's list across its pages, and follows it", async () => {
    api.setProxies([proxy(1), proxy(2), proxy(3)]);
    const credentialId = await credential("acme", "acme-list", { api_key: "key-1" });
    const id = await vendorConnector("mirror", "acme-list", credentialId, { proxy_type: "list" });
    expect(await sync.sync(id)).toMatchObject({ added: 3 });
    const rows = await rowsOf(id);
    expect(rows.map((r) => `${r.host}:${r.port} ${r.username}:${r.password} ${r.country}`).sort())
      .toEqual(["10.0.0.1:8001 u1:pw1 US", "10.0.0.2:8002 u2:pw2 DE", "10.0.0.3:8003 u3:pw3 US"]);

    // One left, one changed its password, one arrived: each written, nothing else touched.
    api.setProxies([proxy(1), proxy(3, "rotated"), proxy(4)]);
    expect(await sync.sync(id)).toMatchObject({ added: 1, edited: 1, deleted: 1 });
    expect((await rowsOf(id)).map((r) => `${r.host} ${r.password}`).sort())
      .toEqual(["10.0.0.1 pw1", "10.0.0.3 rotated", "10.0.0.4 pw4"]);
  });

  test("a port pool's sync writes an exit that moved and deletes one that left", async () => {
    api.setExits([
      { ip: "198.51.100.1", port: 9001, country: "US" },
      { ip: "198.51.100.2", port: 9002, country: "FR" },
    ]);
    const credentialId = await credential("acme-ports", "acme-list", { api_key: "key-1" });
    const id = await vendorConnector("ports", "acme-list", credentialId, { proxy_type: "ports" });
    expect(await sync.sync(id)).toMatchObject({ added: 2 });
    api.setExits([{ ip: "198.51.100.9", port: 9001, country: "DE" }]);
    expect(await sync.sync(id)).toMatchObject({ edited: 1, deleted: 1, added: 0 });
    const [row, ...rest] = await rowsOf(id);
    expect(rest).toEqual([]);
    expect(row).toMatchObject({ host: "gw.acme.example", port: 9001, country: "DE" });
    expect(row.metadata).toMatchObject({ exit: "198.51.100.9" });
  });

  test("a vendor refusing the credential: a clear api answer, then the connector's error", async () => {
    api.setProxies([proxy(1), proxy(2)]);
    // Checked with the vendor before anything is stored.
    const refused = await h.request("POST", `/api/v1/projects/${projectId}/credentials`, {
      token: h.tokens.editor,
      body: { name: "acme-bad", provider: "acme-list", config: { api_key: "wrong" } },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([{
      field: "body.config",
      message: "the vendor refused the credential (the vendor answered 401)",
    }]);
    const credentials = await h.request("GET", `/api/v1/projects/${projectId}/credentials`, {
      token: h.tokens.viewer,
    });
    expect(credentials.body.map((c: { name: string }) => c.name)).not.toContain("acme-bad");

    // A key the vendor revokes later: the sync fails, records it, and leaves the pool whole.
    const credentialId = await credential("acme-later", "acme-list", { api_key: "key-1" });
    const id = await vendorConnector("refused", "acme-list", credentialId, { proxy_type: "list" });
    expect(await sync.sync(id)).toMatchObject({ added: 2 });
    await h.deps.database.db.update(credentialsTable).set({ config: { api_key: "revoked" } })
      .where(eq(credentialsTable.id, credentialId));
    api.setProxies([proxy(5)]);
    await expect(sync.sync(id)).rejects.toThrow(/401/);
    await expect(sync.sync(id)).rejects.toThrow(/401/);
    expect((await rowsOf(id)).map((r) => r.host).sort()).toEqual(["10.0.0.1", "10.0.0.2"]);
    const [stored] = await h.deps.database.db.select().from(connectors).where(
      eq(connectors.id, id),
    );
    expect(stored.lastError).toMatch(/401/);
    expect(stored.consecutiveErrors).toBe(2);
    const answer = await h.request("GET", `/api/v1/projects/${projectId}/connectors/${id}`, {
      token: h.tokens.viewer,
    });
    expect(answer.body.last_error).toMatch(/401/);

    // The vendor takes the key again: the next sync clears the error.
    await h.deps.database.db.update(credentialsTable).set({ config: { api_key: "key-1" } })
      .where(eq(credentialsTable.id, credentialId));
    expect(await sync.sync(id)).toMatchObject({ added: 1, deleted: 2 });
    const [healed] = await h.deps.database.db.select().from(connectors).where(
      eq(connectors.id, id),
    );
    expect(healed).toMatchObject({ lastError: null, consecutiveErrors: 0 });
  });
});
