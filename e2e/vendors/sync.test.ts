/**
 * The sync job through real processes: an api, a controller and a worker (the api and the
 * worker with OCTOPROX_EGRESS_ALLOW_LOOPBACK and OCTOPROX_EGRESS_CA_FILE naming the test CA),
 * the vendor emulator's HTTPS API (a token flow, a paginated proxy list, an exit list) and four
 * of its proxies (Webshare's plain credentials) that the listed entries point at. The descriptor
 * is an admin's custom one, saved as YAML with its host 127.0.0.1 confirmed.
 *
 * - a `list` connector's rows mirror the vendor's list across its pages, each row with the
 *   entry's own credentials (health checks through the vendor's proxies pass);
 * - the vendor's list changes (one entry leaves, one rotates its password, one arrives) and a
 *   connector edit asks a sync: the rows follow, the rotated one keeps its row and works again;
 * - a `port` pool whose exits a call lists: an exit that moved is written on its row, one that
 *   left is deleted;
 * - a credential the vendor refuses is a 422 naming the field, and nothing is stored.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { Cluster } from "../../testkit/cluster.ts";
import {
  startVendorApi,
  startVendorProxy,
  type VendorApi,
  type VendorApiProxy,
  type VendorProxy,
  webshare,
} from "../../testkit/upstreams/vendor-emulator.ts";
import {
  createCredential,
  createProject,
  createVendorConnector,
  type ListedProxy,
  syncNow,
  untilRows,
  type VendorProject,
  writeCaFile,
} from "../../testkit/vendors.ts";

const PROVIDER = "e2e-listed";
const API_KEY = "key-e2e";

let folder: string;
let cluster: Cluster;
let api: VendorApi;
/** The vendor's proxies the list names; `accounts[i]` is proxy i's username → password. */
let proxies: VendorProxy[];
const accounts: Record<string, string>[] = [1, 2, 3, 4].map((n) => ({ [`u${n}`]: `pw${n}` }));
let project: VendorProject;
let credentialId: string;

/** A descriptor written like the shipped Webshare one, its calls on the emulator's API. */
function listedDescriptor(base: string) {
  return {
    id: PROVIDER,
    name: "Listed vendor (emulated)",
    description: "Mirrors the account's proxy list; port exits from a call.",
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
        url: `${base}/auth/token`,
        body: { api_key: "{credential.api_key}" },
      },
      token_path: "token",
      ttl_seconds: 600,
    },
    proxy_types: [{
      id: "proxy_list",
      name: "Proxy list",
      mode: "list",
      call: {
        method: "GET",
        url: `${base}/proxies?page=1`,
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
    }, {
      id: "ports",
      name: "Port exits",
      mode: "port",
      host: "127.0.0.1",
      port: 9000,
      call: {
        method: "GET",
        url: `${base}/exits`,
        headers: { Authorization: "Bearer {auth.token}" },
      },
      item: {
        host: "127.0.0.1",
        port: "{item.port}",
        exit: "{item.ip}",
        country: "{item.country}",
      },
    }],
  };
}

/** The list entry of vendor proxy `n` (1-based), with its account's password now. */
function entry(n: number, country: string): VendorApiProxy {
  const [[username, password]] = Object.entries(accounts[n - 1]);
  return {
    proxy_address: "127.0.0.1",
    port: proxies[n - 1].port,
    username,
    password,
    country_code: country,
  };
}

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-sync-"));
  [api, proxies] = await Promise.all([
    startVendorApi({ apiKey: API_KEY }),
    Promise.all(accounts.map((a) => startVendorProxy({ grammar: webshare, accounts: a }))),
  ]);
  const egress = {
    OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
    OCTOPROX_EGRESS_CA_FILE: await writeCaFile(folder, api.ca),
  };
  cluster = await Cluster.create();
  await cluster.start("api", { env: egress });
  await Promise.all([
    cluster.start("controller"),
    cluster.start("worker", { env: egress }),
  ]);

  // Saved as an admin would: YAML text, and its one egress host confirmed.
  const text = stringify(listedDescriptor(api.url));
  const unconfirmed = await cluster.request("POST", "/api/v1/providers", { descriptor: text });
  expect(unconfirmed.status).toBe(409);
  expect(unconfirmed.body.unconfirmed_hosts).toEqual(["127.0.0.1"]);
  const saved = await cluster.request("POST", "/api/v1/providers", {
    descriptor: text,
    confirm_hosts: ["127.0.0.1"],
  });
  expect(saved.status, JSON.stringify(saved.body)).toBe(201);
  expect(saved.body).toMatchObject({ id: PROVIDER, source: "custom", egress_hosts: ["127.0.0.1"] });

  project = await createProject(cluster);
  credentialId = await createCredential(cluster, project.projectId, PROVIDER, {
    api_key: API_KEY,
  });
}, 90_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await Promise.all([api?.close(), ...(proxies ?? []).map((p) => p.close())]);
  if (folder) await rm(folder, { recursive: true, force: true });
});

/** `port country username` of each row, sorted: what the list shows an operator. */
const shown = (rows: readonly ListedProxy[]) =>
  rows.map((r) => `${r.port} ${r.country} ${r.username}`).sort();

describe("a list connector", () => {
  it("mirrors the vendor's list, and follows it when the list changes", async () => {
    api.setProxies([entry(1, "US"), entry(2, "DE"), entry(3, "US")]);
    const proxiesServedBefore = api.counts.proxies;
    const connectorId = await createVendorConnector(cluster, project.projectId, {
      provider: PROVIDER,
      credentialId,
      config: { proxy_type: "proxy_list" },
      name: "mirror",
    });
    const expected = [
      `${proxies[0].port} US u1`,
      `${proxies[1].port} DE u2`,
      `${proxies[2].port} US u3`,
    ].sort();
    // Created, then synced at once by the worker: three entries over two pages.
    const first = await untilRows(
      cluster,
      project.projectId,
      connectorId,
      (rows) => rows.length === 3,
      "the worker's sync to mirror the list",
    );
    expect(shown(first)).toEqual(expected);
    // Both pages were asked for (two entries a page).
    expect(api.counts.proxies - proxiesServedBefore).toBeGreaterThanOrEqual(2);
    for (const row of first) {
      expect(row).toMatchObject({ host: "127.0.0.1", has_password: true });
      expect(row.metadata).toMatchObject({ slot: `item:127.0.0.1:${row.port}` });
    }
    // Each row holds its entry's own credentials: checks through the vendor's proxies pass.
    await untilRows(
      cluster,
      project.projectId,
      connectorId,
      (rows) => rows.length === 3 && rows.every((r) => r.status === "healthy"),
      "the mirrored rows to pass their health checks",
    );
    const idOf = (rows: readonly ListedProxy[], n: number) =>
      rows.find((r) => r.port === proxies[n - 1].port)?.id;
    const thirdId = idOf(first, 3);

    // The vendor drops entry 2, rotates entry 3's password, adds entry 4.
    accounts[2].u3 = "rotated";
    api.setProxies([entry(1, "US"), entry(3, "US"), entry(4, "FR")]);
    // Until the sync, the stored row holds the old password, which the vendor now refuses.
    await untilRows(
      cluster,
      project.projectId,
      connectorId,
      (rows) =>
        ["degraded", "unhealthy"].includes(rows.find((r) => r.id === thirdId)?.status ?? ""),
      "the row with the old password to fail its check",
    );
    // An edit of the connector asks a sync.
    const edit = await cluster.request(
      "PATCH",
      `/api/v1/projects/${project.projectId}/connectors/${connectorId}`,
      { name: "mirror-edited" },
    );
    expect(edit.status, JSON.stringify(edit.body)).toBe(200);
    const followed = await untilRows(
      cluster,
      project.projectId,
      connectorId,
      (rows) => rows.length === 3 && rows.some((r) => r.port === proxies[3].port),
      "the rows to follow the changed list",
    );
    expect(shown(followed)).toEqual([
      `${proxies[0].port} US u1`,
      `${proxies[2].port} US u3`,
      `${proxies[3].port} FR u4`,
    ].sort());
    // Entry 1 and 3 kept their rows (3 was edited in place); 2's row is gone.
    expect(idOf(followed, 1)).toBe(idOf(first, 1));
    expect(idOf(followed, 3)).toBe(thirdId);
    expect(idOf(followed, 2)).toBeUndefined();
    // The rotated password is the row's now: its check passes again, as does the new row's.
    await untilRows(
      cluster,
      project.projectId,
      connectorId,
      (rows) => rows.length === 3 && rows.every((r) => r.status === "healthy"),
      "the rotated and the new row to pass their checks",
    );
    const [connector] = await cluster.sql<{ last_error: string | null }[]>`
      select last_error from connectors where id = ${connectorId}`;
    expect(connector.last_error).toBeNull();
  });
});

describe("a port pool whose exits a call lists", () => {
  it("writes an exit that moved and deletes one that left", async () => {
    const [a, b] = [proxies[0].port, proxies[1].port];
    api.setExits([
      { ip: "198.51.100.1", port: a, country: "US" },
      { ip: "198.51.100.2", port: b, country: "FR" },
    ]);
    const connectorId = await createVendorConnector(cluster, project.projectId, {
      provider: PROVIDER,
      credentialId,
      config: { proxy_type: "ports" },
      name: "ports",
    });
    const first = await untilRows(
      cluster,
      project.projectId,
      connectorId,
      (rows) => rows.length === 2,
      "the sync to write one row per listed exit",
    );
    const byPort = (rows: readonly ListedProxy[], port: number) =>
      rows.find((r) => r.port === port);
    expect(byPort(first, a)).toMatchObject({ host: "127.0.0.1", country: "US" });
    expect(byPort(first, a)?.metadata).toMatchObject({ exit: "198.51.100.1" });
    expect(byPort(first, b)).toMatchObject({ host: "127.0.0.1", country: "FR" });
    expect(byPort(first, b)?.metadata).toMatchObject({ exit: "198.51.100.2" });

    // Port a's exit moved (another address, another country); port b's left.
    api.setExits([{ ip: "198.51.100.9", port: a, country: "DE" }]);
    await syncNow(cluster, connectorId);
    const after = await untilRows(
      cluster,
      project.projectId,
      connectorId,
      (rows) => rows.length === 1,
      "the sync to follow the exits",
      5_000,
    );
    expect(after).toEqual([
      expect.objectContaining({ id: byPort(first, a)?.id, port: a, country: "DE" }),
    ]);
    expect(after[0].metadata).toMatchObject({ exit: "198.51.100.9", slot: `item:127.0.0.1:${a}` });
  });
});

describe("a credential the vendor refuses", () => {
  it("is a 422 naming the field, and nothing is stored", async () => {
    const list = () => cluster.request("GET", `/api/v1/projects/${project.projectId}/credentials`);
    const before = (await list()).body as { id: string }[];
    const tokensBefore = api.counts.token;
    const refused = await cluster.request(
      "POST",
      `/api/v1/projects/${project.projectId}/credentials`,
      { name: "refused", provider: PROVIDER, config: { api_key: "not-the-key" } },
    );
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([{
      field: "body.config",
      message: "the vendor refused the credential (the vendor answered 401)",
    }]);
    // The api asked the vendor (its token call) before storing anything.
    expect(api.counts.token).toBe(tokensBefore + 1);
    const after = (await list()).body as { id: string; name: string }[];
    expect(after.map((c) => c.id)).toEqual(before.map((c) => c.id));
    expect(after.map((c) => c.name)).not.toContain("refused");
    const [{ count }] = await cluster.sql<{ count: number }[]>`
      select count(*)::int as count from credentials where name = 'refused'`;
    expect(count).toBe(0);
  });
});
