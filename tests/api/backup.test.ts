/**
 * Backups: an export imported back restores every row as it was (ids, timestamps, hashes and
 * passwords), the history with its ids and the totals recomputed from it, with one `all` change
 * entry; a wrong passphrase, an altered file or header, another schema version and a file that
 * is no backup are refused with 400 and change nothing; only an admin may export or import;
 * 100,000 proxies go through, and Postgres lost in the middle of their import leaves the rows
 * that were there.
 */
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { schemaVersion } from "../../db/migrate.ts";
import { backupOrderColumn, backupTables } from "../../control/backup/backup.ts";
import { sealBackup } from "../../control/backup/envelope.ts";
import { markDepleted } from "../../control/services/sequences.ts";
import { waitUntil } from "../../testkit/wait.ts";
import { type Answer, type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

const PASSPHRASE = "correct horse battery staple";
const EXPORT = "/api/v1/backup/export";
const IMPORT = "/api/v1/backup/import";

let h: ApiHarness;
let projectId: string;
let connectorId: string;
let spareId: string;
let proxyIds: string[];
let apiToken: string;
const deviceIds: string[] = [];
let openvpnDeviceId: string;
/** A device's own public key (any 32 bytes in base64 is one). */
const LAPTOP_KEY = Buffer.alloc(32, 7).toString("base64");

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.admin,
    body: {
      name: "Shop",
      username: "shop",
      password: "shop-password-1",
      strategy: "sticky",
      rate_limit: { requests_per_second: 50, burst: 100 },
      tls_mitm_mode: "plain",
      tls_mitm_bypass: [".bank.example"],
    },
  });
  projectId = project.body.id;
  const credential = await h.request("POST", `/api/v1/projects/${projectId}/credentials`, {
    token: h.tokens.admin,
    body: { name: "login", provider: "static", config: { username: "bob", password: "hunter22" } },
  });
  const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.admin,
    body: { name: "main", kind: "static", credential_id: credential.body.id, weight: 3 },
  });
  connectorId = connector.body.id;
  // A sequence that has moved on, so its index, version and switch time go out and come back.
  const spare = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.admin,
    body: { name: "spare", kind: "static" },
  });
  spareId = spare.body.id;
  const sequence = await h.request("PUT", `/api/v1/projects/${projectId}/sequence`, {
    token: h.tokens.admin,
    body: { connector_ids: [connectorId, spareId], on_end: "loop" },
  });
  expect(sequence.status, sequence.text).toBe(200);
  expect((await markDepleted(h.deps, connectorId)).moved).toHaveLength(1);
  proxyIds = [];
  for (const url of ["http://u1:p1@203.0.113.7:3128", "socks5://203.0.113.8:1080"]) {
    const proxy = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
      token: h.tokens.admin,
      body: { connector_id: connectorId, url, metadata: { rack: "a\nb" } },
    });
    expect(proxy.status, proxy.text).toBe(201);
    proxyIds.push(proxy.body.id);
  }
  const token = await h.request("POST", "/api/v1/tokens", {
    token: h.tokens.editor,
    body: { name: "cli" },
  });
  apiToken = token.body.token;
  const distributionKey = await h.request(
    "POST",
    `/api/v1/projects/${projectId}/distribution-keys`,
    { token: h.tokens.editor, body: { name: "shop-scraper", allowed_cidrs: ["203.0.113.0/24"] } },
  );
  expect(distributionKey.status, distributionKey.text).toBe(201);
  const descriptor = await h.request("POST", "/api/v1/providers", {
    token: h.tokens.admin,
    body: { descriptor: CUSTOM_DESCRIPTOR },
  });
  expect(descriptor.status, descriptor.text).toBe(201);
  const channel = await h.request("POST", "/api/v1/alerts/channels", {
    token: h.tokens.admin,
    body: { name: "ops", url: "http://127.0.0.1:9/hook", allow_private_address: true },
  });
  expect(channel.status, channel.text).toBe(201);
  const rule = await h.request("POST", "/api/v1/alerts/rules", {
    token: h.tokens.admin,
    body: {
      name: "limit",
      kind: "traffic_limit",
      connector_id: connectorId,
      channel_ids: [channel.body.id],
    },
  });
  expect(rule.status, rule.text).toBe(201);
  // WireGuard: the install's identity and two devices, one with the keys the server made (its
  // private key kept) and one with its own public key; their keys go and come back sealed.
  for (
    const body of [{ name: "phone", country: "de" }, { name: "laptop", public_key: LAPTOP_KEY }]
  ) {
    const device = await h.request("POST", `/api/v1/projects/${projectId}/wireguard/peers`, {
      token: h.tokens.editor,
      body,
    });
    expect(device.status, device.text).toBe(201);
    deviceIds.push(device.body.id);
  }
  expect(
    (await h.request("PUT", "/api/v1/wireguard/settings", {
      token: h.tokens.admin,
      body: { endpoint_host: "vpn.example.com" },
    })).status,
  ).toBe(200);
  // OpenVPN: the install's CA and a device with its certificate and sealed key.
  const tablet = await h.request("POST", `/api/v1/projects/${projectId}/openvpn/peers`, {
    token: h.tokens.editor,
    body: { name: "tablet" },
  });
  expect(tablet.status, tablet.text).toBe(201);
  openvpnDeviceId = tablet.body.id;
  expect(
    (await h.request("PUT", "/api/v1/openvpn/settings", {
      token: h.tokens.admin,
      body: { endpoint_host: "vpn.example.com" },
    })).status,
  ).toBe(200);

  // History of every table, as flushes and compaction leave it (minute and hour rows).
  const sql = h.deps.database.sql;
  await sql`insert into config_revision (id, revision) values (1, 7)`;
  const counts = (n: number) => [n, n - 1, 1, n * 100, n * 1000, n * 12.5];
  for (const [i, proxyId] of proxyIds.entries()) {
    for (
      const [bucket, seconds] of [["2025-01-01T10:00:00Z", 3600], ["2025-01-02T10:01:00Z", 60]]
    ) {
      const [r, s, f, sent, received, latency] = counts(10 + i);
      await sql`insert into proxy_metrics (project_id, proxy_id, status, bucket_start,
          bucket_seconds, requests, successes, failures, bytes_sent, bytes_received, latency_sum_ms)
        values (${projectId}, ${proxyId}, 'healthy', ${bucket}, ${seconds}, ${r}, ${s}, ${f},
          ${sent}, ${received}, ${latency})`;
    }
  }
  await sql`insert into project_metrics (project_id, bucket_start, bucket_seconds, requests,
      successes, failures, bytes_sent, bytes_received, latency_sum_ms)
    values (${projectId}, '2025-01-01T10:00:00Z', 3600, 21, 20, 1, 2100, 21000, 262.5),
      (${projectId}, '2025-01-02T10:01:00Z', 60, 21, 20, 1, 2100, 21000, 262.5)`;
  await sql`insert into connector_metrics (project_id, connector_id, bucket_start,
      bucket_seconds, requests, bytes_sent, bytes_received)
    values (${projectId}, ${connectorId}, '2025-01-01T10:00:00Z', 3600, 42, 4200, 42000)`;
  await sql`insert into host_metrics (project_id, connector_id, host, bucket_start,
      bucket_seconds, requests)
    values (${projectId}, ${connectorId}, 'example.com', '2025-01-01T10:00:00Z', 3600, 7)`;
  await sql`insert into failure_metrics (project_id, connector_id, kind, vendor_status,
      bucket_start, bucket_seconds, count)
    values (${projectId}, null, 'auth', null, '2025-01-01T10:00:00.123456Z', 60, 3)`;
  await sql`insert into tunnel_device_metrics (project_id, device_id, protocol, bucket_start,
      bucket_seconds, requests, bytes_sent, latency_sum_ms)
    values (${projectId}, ${deviceIds[0]}, 'wireguard', '2025-01-01T10:00:00Z', 60, 5, 500, 60)`;
  await sql`insert into domain_metrics (project_id, day, site, connector, count, value)
    values (${projectId}, '2025-01-01', 'shop.example', ${connectorId}, 'blocked', 3)`;

  // An admin's IP database (its file's bytes go with it), the attribution settings, and what
  // was seen of exits.
  const geofeed = await h.request("POST", "/api/v1/geo/databases?name=exits&format=geofeed", {
    token: h.tokens.admin,
    text: "198.51.100.0/24,DE,DE-BE,Berlin,\n",
  });
  expect(geofeed.status, geofeed.text).toBe(201);
  await sql`update geo_settings set location_conflict_rule = 'first',
    observation_retention_days = 7`;
  await sql`insert into ip_observations (observed_at, ip, project_id, connector_id, proxy_id,
      source, country)
    values ('2025-01-01T10:00:00Z', '198.51.100.7', ${projectId}, ${connectorId}, ${proxyIds[0]},
      'health', 'DE')`;
  await sql`insert into connector_exit_ips (connector_id, ip, project_id, first_seen_at,
      last_seen_at, state_at, country, observations)
    values (${connectorId}, '198.51.100.7', ${projectId}, '2025-01-01T10:00:00Z',
      '2025-01-01T10:00:00Z', '2025-01-01T10:00:00Z', 'DE', 1)`;
});

afterAll(async () => {
  await h?.close();
});

/** An admin's own vendor: its row and its audit log go with the definitions. */
const CUSTOM_DESCRIPTOR = {
  id: "house-vendor",
  name: "House vendor",
  credential_fields: [{ key: "user", label: "User", type: "text", required: true }],
  proxy_types: [{
    id: "sessions",
    name: "Sessions",
    mode: "session",
    host: "gw.house.example",
    port: 8000,
    username: "{credential.user}-session-{session_id}",
  }],
};

/** Every row of every table a backup holds, as Postgres writes it. */
async function snapshot(): Promise<Record<string, string[]>> {
  const tables: Record<string, string[]> = {};
  for (const table of backupTables(true)) {
    const rows = await h.deps.database.sql.unsafe<{ row: string }[]>(
      `select to_jsonb(t)::text as row from ${table} t order by ${backupOrderColumn(table)}`,
    );
    tables[table] = rows.map((r) => r.row);
  }
  return tables;
}

async function exportBackup(includeHistory = true): Promise<Answer> {
  const answer = await h.request("POST", EXPORT, {
    token: h.tokens.admin,
    body: { passphrase: PASSPHRASE, include_history: includeHistory },
  });
  expect(answer.status, answer.text.slice(0, 300)).toBe(200);
  return answer;
}

function importBackup(backup: unknown, passphrase = PASSPHRASE, token = h.tokens.admin) {
  return h.request("POST", IMPORT, { token, body: { passphrase, backup } });
}

/** The OpenVPN device's profile: the CA, its certificate and key, the tls-crypt key. */
async function openvpnProfile(): Promise<string> {
  const answer = await h.request(
    "GET",
    `/api/v1/projects/${projectId}/openvpn/peers/${openvpnDeviceId}/config`,
    { token: h.tokens.editor },
  );
  expect(answer.status, answer.text).toBe(200);
  return answer.text;
}

/** The first device's config file, keys and all. */
async function deviceConfig(): Promise<string> {
  const answer = await h.request(
    "GET",
    `/api/v1/projects/${projectId}/wireguard/peers/${deviceIds[0]}/config`,
    { token: h.tokens.editor },
  );
  expect(answer.status, answer.text).toBe(200);
  return answer.text;
}

/** Changes the install, so an import has something to put back. */
async function changeThings(): Promise<void> {
  await h.deps.database.sql`update config_revision set revision = revision + 1`;
  // Alerting: the rule is edited, another channel comes, and an event fires (not the backup's).
  await h.deps.database.sql`
    insert into alert_events (rule_id, subject, severity, message)
    select id, 'connector:x', 'warning', 'fired' from alert_rules`;
  await h.deps.database.sql`update alert_rules set severity = 'critical'`;
  const channel = await h.request("POST", "/api/v1/alerts/channels", {
    token: h.tokens.admin,
    body: { name: `later ${Date.now()}`, url: "http://127.0.0.1:9/x", allow_private_address: true },
  });
  expect(channel.status, channel.text).toBe(201);
  const interception = await h.request("PATCH", `/api/v1/projects/${projectId}`, {
    token: h.tokens.admin,
    body: { tls_mitm_mode: "off", tls_mitm_bypass: [] },
  });
  expect(interception.status, interception.text).toBe(200);
  await h.deps.database.sql`update distribution_keys set revoked_at = now()`;
  // New keys for the server and a device, another device gone.
  for (
    const [path, expected] of [
      ["/api/v1/wireguard/settings/rotate-key", 200],
      ["/api/v1/openvpn/settings/rotate-identity", 200],
      [`/api/v1/projects/${projectId}/wireguard/peers/${deviceIds[0]}/rotate-keys`, 200],
    ] as const
  ) {
    expect((await h.request("POST", path, { token: h.tokens.admin })).status).toBe(expected);
  }
  expect(
    (await h.request("DELETE", `/api/v1/projects/${projectId}/wireguard/peers/${deviceIds[1]}`, {
      token: h.tokens.admin,
    })).status,
  ).toBe(204);
  const sequence = await h.request("PUT", `/api/v1/projects/${projectId}/sequence`, {
    token: h.tokens.admin,
    body: { connector_ids: [spareId, connectorId] },
  });
  expect(sequence.status, sequence.text).toBe(200);
  const edit = await h.request("PUT", "/api/v1/providers/house-vendor", {
    token: h.tokens.admin,
    body: { descriptor: { ...CUSTOM_DESCRIPTOR, name: `House vendor ${Date.now()}` } },
  });
  expect(edit.status, edit.text).toBe(200);
  expect(
    (await h.request("DELETE", `/api/v1/projects/${projectId}/proxies/${proxyIds[1]}`, {
      token: h.tokens.admin,
    })).status,
  ).toBe(204);
  expect(
    (await h.request("POST", "/api/v1/projects", {
      token: h.tokens.admin,
      body: { name: `Later ${Date.now()}`, username: `later${Date.now()}` },
    })).status,
  ).toBe(201);
  expect(
    (await h.request("PATCH", `/api/v1/users/${h.userIds.viewer}`, {
      token: h.tokens.admin,
      body: { password: "a-new-viewer-password" },
    })).status,
  ).toBe(200);
}

describe("export then import", () => {
  test("restores every row as it was, the totals from the history, with one `all` entry", async () => {
    const before = await snapshot();
    expect(before.proxies).toHaveLength(2);
    const configBefore = await deviceConfig();
    const profileBefore = await openvpnProfile();
    const exported = await exportBackup();
    expect(exported.headers.get("content-disposition")).toMatch(
      /^attachment; filename="octoprox-backup-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z\.json"$/,
    );
    const envelope = exported.body;
    expect(envelope).toMatchObject({
      format: "octoprox-backup",
      schema_version: await schemaVersion(),
      include_history: true,
      cipher: "aes-256-gcm",
      kdf: { name: "scrypt", N: 32768, r: 8, p: 1, key_length: 32 },
    });
    expect(Buffer.from(envelope.kdf.salt, "base64")).toHaveLength(16);
    expect(Buffer.from(envelope.iv, "base64")).toHaveLength(12);
    // Sealed: no secret, name or hash is readable in the file.
    for (const secret of ["hunter22", "shop-password-1", "Shop", "203.0.113.7", "scrypt$"]) {
      expect(exported.text).not.toContain(secret);
    }

    await changeThings();
    expect(await snapshot()).not.toEqual(before);
    const entriesBefore = (await h.changes()).length;

    const imported = await importBackup(envelope);
    expect(imported.status, imported.text).toBe(200);
    expect(imported.body).toEqual({
      schema_version: await schemaVersion(),
      restored: {
        users: 3,
        user_invites: 0,
        api_tokens: 1,
        projects: 1,
        distribution_keys: 1,
        credentials: 1,
        connectors: 2,
        proxies: 2,
        project_sequences: 1,
        config_revision: 1,
        provider_descriptors: 1,
        provider_audit_log: 1,
        geo_settings: 1,
        geo_files: 1,
        geo_databases: 1,
        alert_channels: 1,
        alert_rules: 1,
        alert_rule_channels: 1,
        wireguard_settings: 1,
        openvpn_settings: 1,
        tunnel_devices: 3,
        audit_log: before.audit_log.length,
        proxy_metrics: 4,
        project_metrics: 2,
        connector_metrics: 1,
        tunnel_device_metrics: 1,
        host_metrics: 1,
        failure_metrics: 1,
        ip_observations: 1,
        connector_exit_ips: 1,
        domain_metrics: 1,
      },
    });
    // Every row as it was, and the audit log with the import's own entry after the backup's.
    const restoredState = await snapshot();
    const importEntry = JSON.parse(restoredState.audit_log.pop()!);
    expect(restoredState).toEqual(before);
    expect(importEntry).toMatchObject({
      actor_name: "admin",
      via: "api",
      entity: "backup",
      action: "import",
      after: {
        include_history: true,
        restored: { proxies: 2, audit_log: before.audit_log.length },
      },
    });
    expect((await h.changes()).slice(entriesBefore)).toEqual([{ kind: "all", ref: "*" }]);
    // The sealed keys came back as they were, and open: the device's config is the same file.
    expect(await deviceConfig()).toBe(configBefore);
    expect(await openvpnProfile()).toBe(profileBefore);

    // The totals are the history's sums, per proxy, project and tunnel device.
    const totals = await h.deps.database.sql`
      select entity_kind, entity_id::text, requests::int, bytes_sent::int, latency_sum_ms
      from metric_totals order by entity_kind, requests`;
    expect(totals).toEqual([
      {
        entity_kind: "project",
        entity_id: projectId,
        requests: 42,
        bytes_sent: 4200,
        latency_sum_ms: 525,
      },
      {
        entity_kind: "proxy",
        entity_id: proxyIds[0],
        requests: 20,
        bytes_sent: 2000,
        latency_sum_ms: 250,
      },
      {
        entity_kind: "proxy",
        entity_id: proxyIds[1],
        requests: 22,
        bytes_sent: 2200,
        latency_sum_ms: 275,
      },
      {
        entity_kind: "tunnel_device",
        entity_id: deviceIds[0],
        requests: 5,
        bytes_sent: 500,
        latency_sum_ms: 60,
      },
    ]);
    const usage = await h.request("GET", `/api/v1/projects/${projectId}/proxies/${proxyIds[1]}`, {
      token: h.tokens.viewer,
    });
    expect(usage.status).toBe(200);

    // The restored users, hashes and tokens work as before: the old password, the API token.
    const login = await h.request("POST", "/api/v1/auth/login", {
      body: { username: "viewer", password: "password-viewer" },
    });
    expect(login.status).toBe(200);
    const me = await h.request("GET", "/api/v1/auth/me", { token: apiToken });
    expect(me.body).toMatchObject({ username: "editor", via: "api_token" });

    // New history rows take ids after the restored ones.
    const [{ max }] = await h.deps.database.sql`select max(id)::int as max from proxy_metrics`;
    const [{ id }] = await h.deps.database.sql`
      insert into proxy_metrics (project_id, proxy_id, bucket_start, bucket_seconds)
      values (${projectId}, ${proxyIds[0]}, now(), 60) returning id::int`;
    expect(id).toBeGreaterThan(max);
    await h.deps.database.sql`delete from proxy_metrics where id = ${id}`;
  });

  test("a backup without history restores the definitions and empties the history", async () => {
    const before = await snapshot();
    const exported = await exportBackup(false);
    expect(exported.body.include_history).toBe(false);
    await changeThings();
    const imported = await importBackup(exported.body);
    expect(imported.status, imported.text).toBe(200);
    expect(Object.keys(imported.body.restored)).toEqual([
      "users",
      "user_invites",
      "api_tokens",
      "projects",
      "distribution_keys",
      "credentials",
      "connectors",
      "proxies",
      "project_sequences",
      "config_revision",
      "provider_descriptors",
      "provider_audit_log",
      "geo_settings",
      "geo_files",
      "geo_databases",
      "alert_channels",
      "alert_rules",
      "alert_rule_channels",
      "wireguard_settings",
      "openvpn_settings",
      "tunnel_devices",
      "audit_log",
    ]);
    const after = await snapshot();
    // The audit log: the backup's entries, then the import's own.
    expect(after.audit_log.slice(0, -1)).toEqual(before.audit_log);
    after.audit_log = before.audit_log;
    for (const table of backupTables(false)) expect(after[table]).toEqual(before[table]);
    expect(after.proxy_metrics).toEqual([]);
    expect(after.ip_observations).toEqual([]);
    const [{ n }] = await h.deps.database.sql`select count(*)::int as n from metric_totals`;
    // What the install told whom is its own: the import empties it.
    const [{ events }] = await h.deps.database.sql`
      select count(*)::int as events from alert_events`;
    expect(events).toBe(0);
    expect(n).toBe(0);
  });

  test("a backup holds every table but the install's own records", async () => {
    const rows = await h.deps.database.sql<{ name: string }[]>`
      select table_name as name from information_schema.tables
      where table_schema = 'public' order by table_name`;
    const held = new Set([...backupTables(true), "metric_totals"]);
    const others = rows.map((r) => r.name).filter((name) => !held.has(name));
    expect(others.sort()).toEqual([
      "alert_deliveries",
      "alert_delivery_tries",
      "alert_events",
      "change_outbox",
      "metric_flushes",
      "octoprox_migrations",
      "system_metrics",
    ]);
  });
});

describe("refusals change nothing", () => {
  let envelope: Record<string, unknown>;
  let state: Record<string, string[]>;

  beforeAll(async () => {
    envelope = (await exportBackup()).body;
    // Changed after the export, so an import that went through would show.
    await changeThings();
    state = await snapshot();
  });

  async function expectRefused(answer: Answer, message: RegExp): Promise<void> {
    expect(answer.status, answer.text).toBe(400);
    expect(answer.body.error).toMatch(message);
    expect(answer.body.error).toMatch(/nothing was changed/);
    expect(await snapshot()).toEqual(state);
  }

  const UNOPENED = /^The passphrase does not open this backup, or the file was altered/;

  test("a wrong passphrase", async () => {
    const entries = (await h.changes()).length;
    await expectRefused(await importBackup(envelope, "not the passphrase"), UNOPENED);
    expect(await h.changes()).toHaveLength(entries);
  });

  test("altered contents", async () => {
    const data = Buffer.from(envelope.data as string, "base64");
    data[data.length >> 1] ^= 1;
    await expectRefused(
      await importBackup({ ...envelope, data: data.toString("base64") }),
      UNOPENED,
    );
    await expectRefused(
      await importBackup({ ...envelope, tag: "AAAAAAAAAAAAAAAAAAAAAA==" }),
      UNOPENED,
    );
  });

  test("an altered header", async () => {
    const kdf = envelope.kdf as Record<string, unknown>;
    for (
      const altered of [
        { ...envelope, created_at: "2020-01-01T00:00:00.000Z" },
        { ...envelope, include_history: false },
        { ...envelope, kdf: { ...kdf, N: 16384 } },
      ]
    ) {
      await expectRefused(await importBackup(altered), UNOPENED);
    }
  });

  test("another schema version", async () => {
    const version = await schemaVersion();
    const answer = await importBackup({ ...envelope, schema_version: version + 1 });
    await expectRefused(
      answer,
      new RegExp(
        `^This backup was made at schema version ${version + 1}; this install is at ${version}: `,
      ),
    );
  });

  test("a file that is not a backup", async () => {
    await expectRefused(
      await importBackup({ hello: "world" }),
      /^This is not an Octoprox backup \(its format is not "octoprox-backup"\)/,
    );
    const { iv: _, ...noIv } = envelope;
    await expectRefused(
      await importBackup(noIv),
      /^This is not an Octoprox backup: backup\.iv is missing or malformed/,
    );
    await expectRefused(
      await importBackup({ ...envelope, kdf: { ...(envelope.kdf as object), N: 1 << 24 } }),
      /^This is not an Octoprox backup: its key derivation cost/,
    );
  });

  test("rows that do not fit, sealed with the right passphrase: the transaction undoes all", async () => {
    // Users and projects would land before the proxy whose connector does not exist.
    const lines = [
      JSON.stringify({ table: "users", rows: 0 }),
      JSON.stringify({ table: "user_invites", rows: 0 }),
      JSON.stringify({ table: "api_tokens", rows: 0 }),
      JSON.stringify({ table: "projects", rows: 1 }),
      JSON.stringify({
        ...JSON.parse(state.projects[0]),
      }),
      JSON.stringify({ table: "distribution_keys", rows: 0 }),
      JSON.stringify({ table: "credentials", rows: 0 }),
      JSON.stringify({ table: "connectors", rows: 0 }),
      JSON.stringify({ table: "proxies", rows: 1 }),
      state.proxies[0],
      JSON.stringify({ table: "project_sequences", rows: 0 }),
      JSON.stringify({ table: "config_revision", rows: 0 }),
      JSON.stringify({ table: "provider_descriptors", rows: 0 }),
      JSON.stringify({ table: "provider_audit_log", rows: 0 }),
      JSON.stringify({ table: "geo_settings", rows: 0 }),
      JSON.stringify({ table: "geo_files", rows: 0 }),
      JSON.stringify({ table: "geo_databases", rows: 0 }),
      JSON.stringify({ table: "alert_channels", rows: 0 }),
      JSON.stringify({ table: "alert_rules", rows: 0 }),
      JSON.stringify({ table: "alert_rule_channels", rows: 0 }),
      JSON.stringify({ table: "wireguard_settings", rows: 0 }),
      JSON.stringify({ table: "openvpn_settings", rows: 0 }),
      JSON.stringify({ table: "tunnel_devices", rows: 0 }),
      JSON.stringify({ table: "audit_log", rows: 0 }),
    ];
    const crafted = await sealBackup(PASSPHRASE, {
      schemaVersion: await schemaVersion(),
      createdAt: new Date(),
      includeHistory: false,
    }, [gzipSync(`${lines.join("\n")}\n`)]);
    await expectRefused(
      await importBackup(crafted),
      /^The backup's rows of proxies do not fit this install \(Postgres refused them with 23503\)/,
    );
  });

  test("bad bodies are 422 naming the field", async () => {
    const short = await h.request("POST", EXPORT, {
      token: h.tokens.admin,
      body: { passphrase: "too short", include_history: "yes" },
    });
    expect(short.status).toBe(422);
    expect(short.body.detail).toEqual([
      { field: "body.passphrase", message: "must be at least 12 characters" },
      { field: "body.include_history", message: "must be true or false" },
    ]);
    const noBackup = await h.request("POST", IMPORT, {
      token: h.tokens.admin,
      body: { passphrase: PASSPHRASE, backup: "a string" },
    });
    expect(noBackup.status).toBe(422);
    expect(noBackup.body.detail).toEqual([{
      field: "body.backup",
      message: "must be a JSON object",
    }]);
    expect(await snapshot()).toEqual(state);
  });

  test("only an admin exports or imports", async () => {
    for (const role of ["editor", "viewer"] as const) {
      const exported = await h.request("POST", EXPORT, {
        token: h.tokens[role],
        body: { passphrase: PASSPHRASE },
      });
      expect(exported.status).toBe(403);
      expect(exported.text).not.toContain("octoprox-backup");
      const imported = await importBackup(envelope, PASSPHRASE, h.tokens[role]);
      expect(imported.status).toBe(403);
    }
    expect((await h.request("POST", EXPORT, { body: { passphrase: PASSPHRASE } })).status)
      .toBe(401);
    expect(await snapshot()).toEqual(state);
  });
});

describe("100,000 proxies", () => {
  let bigConnectorId: string;
  let total: number;

  beforeAll(async () => {
    const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      token: h.tokens.admin,
      body: { name: "big", kind: "static" },
    });
    expect(connector.status, connector.text).toBe(201);
    bigConnectorId = connector.body.id;
    await h.deps.database.sql`
      insert into proxies (project_id, connector_id, scheme, host, port, username, password)
      select ${projectId}, ${bigConnectorId}, 'http',
        '10.' || (i >> 16) || '.' || ((i >> 8) & 255) || '.' || (i & 255), 1024 + i % 50000,
        'user' || i, 'pass' || i
      from generate_series(1, 100000) as i`;
    [{ n: total }] = await h.deps.database.sql`select count(*)::int as n from proxies`;
  });

  const bigCount = async () => {
    const [{ n }] = await h.deps.database.sql`
      select count(*)::int as n from proxies where connector_id = ${bigConnectorId}`;
    return n;
  };

  test("go out and come back", async () => {
    const startedMs = performance.now();
    const exported = await exportBackup(false);
    const exportSeconds = (performance.now() - startedMs) / 1000;
    await h.deps.database.sql`delete from proxies where connector_id = ${bigConnectorId}`;
    const imported = await importBackup(exported.body);
    const seconds = (performance.now() - startedMs) / 1000;
    console.log(
      `backup of ${total} proxies: ${(exported.text.length / 1e6).toFixed(1)} MB, export ` +
        `${exportSeconds.toFixed(1)} s, both ${seconds.toFixed(1)} s`,
    );
    expect(imported.status, imported.text).toBe(200);
    expect(imported.body.restored.proxies).toBe(total);
    expect(await bigCount()).toBe(100_000);
  });

  test("Postgres lost in the middle of their import leaves the rows that were there", async () => {
    const exported = await exportBackup(false);
    await h.deps.database.sql`delete from proxies where connector_id = ${bigConnectorId}`;
    const before = await snapshot();
    const sql = h.deps.database.sql;
    const importing = importBackup(exported.body);
    // Once the import has emptied the tables (it holds their locks), its connection is cut.
    const pid = await waitUntil(async () => {
      const [held] = await sql<{ pid: number }[]>`
        select l.pid from pg_locks l join pg_class c on c.oid = l.relation
        where c.relname = 'proxies' and l.mode = 'AccessExclusiveLock' and l.granted`;
      return held?.pid;
    }, { timeoutMs: 30_000, intervalMs: 5, message: "the import to hold its locks" });
    await sql`select pg_terminate_backend(${pid})`;
    const answer = await importing;
    expect(answer.status, answer.text).toBe(503);
    expect(answer.body.error).toBe("Service temporarily unavailable: Postgres did not answer");
    expect(await snapshot()).toEqual(before);
    expect(await bigCount()).toBe(0);
    // The api goes on: the same import, tried again, goes through.
    const again = await importBackup(exported.body);
    expect(again.status, again.text).toBe(200);
    expect(again.body.restored.proxies).toBe(total);
    expect(await bigCount()).toBe(100_000);
  });
});

test("the OpenAPI document describes both routes", async () => {
  const doc = (await h.request("GET", "/api/v1/openapi.json")).body;
  const exported = doc.paths["/api/v1/backup/export"].post;
  expect(exported.requestBody.content["application/json"].schema.required).toEqual([
    "passphrase",
  ]);
  const imported = doc.paths["/api/v1/backup/import"].post;
  expect(imported.requestBody.content["application/json"].schema.required.sort()).toEqual([
    "backup",
    "passphrase",
  ]);
  expect(Object.keys(imported.responses)).toEqual(
    expect.arrayContaining(["200", "400", "401", "403", "413", "422"]),
  );
});
