/**
 * OpenVPN devices and settings through the api over real Postgres and Redis: the install's
 * identity made once however many ask, its certificates checked by openssl (a CA that signs the
 * server's certificate for servers only and each device's for clients only, its common name the
 * device's id, its serial the one answered), the `.ovpn` profile read back (its key the
 * certificate's, the tls-crypt key in OpenVPN's format), the refusals (a subnet overlapping
 * WireGuard's, a keepalive the daemon refuses, a read-only field, no endpoint yet, roles), a
 * certificate's rotation and the identity's (every device issued again by the new CA), each
 * write one `tunnel` change entry and an audit entry with its keys masked, a device's
 * connections closed as encrypted DNS in its usage and history, and the feed's global section
 * carrying what the daemon runs with and never the CA's or a device's key.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { compile } from "../../control/feed/compile.ts";
import { OPENVPN_IDENTITY_ROTATED } from "../../control/api/routes/openvpn.ts";
import { ensureOpenvpnSettings } from "../../control/services/openvpn-settings.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import type { GlobalSection } from "../../shared/feed/models.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { type Answer, type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { MetricsFlushJob } from "../../control/jobs/metrics-flush.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import { loadMeteringScriptNode } from "../../testkit/metering.ts";
import { closeEncryptedDns } from "../../testkit/metrics-bed.ts";

const run = promisify(execFile);

let h: ApiHarness;
let projectId: string;
let folder: string;
let device: Answer;

const SETTINGS = "/api/v1/openvpn/settings";
const peers = () => `/api/v1/projects/${projectId}/openvpn/peers`;

beforeAll(async () => {
  h = await startHarness();
  folder = await mkdtemp(join(tmpdir(), "ox-openvpn-test-"));
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "tablets", username: "tablets" },
  });
  expect(project.status, project.text).toBe(201);
  projectId = project.body.id;
});

afterAll(async () => {
  await h?.close();
  if (folder) await rm(folder, { recursive: true, force: true });
});

/** `openssl verify` of `certificate` against `ca` for `purpose`: its output, or its refusal. */
async function verify(ca: string, certificate: string, purpose: string): Promise<string> {
  const caFile = join(folder, `ca-${crypto.randomUUID()}.pem`);
  const file = join(folder, `cert-${crypto.randomUUID()}.pem`);
  await writeFile(caFile, ca);
  await writeFile(file, certificate);
  try {
    const { stdout } = await run("openssl", [
      "verify",
      "-purpose",
      purpose,
      "-CAfile",
      caFile,
      file,
    ]);
    return stdout.trim();
  } catch (error) {
    return `refused: ${(error as { stdout?: string }).stdout ?? ""}`;
  }
}

async function entriesOf(write: () => Promise<Answer>) {
  const before = (await h.changes()).length;
  const answer = await write();
  return { answer, entries: (await h.changes()).slice(before) };
}

const fieldsOf = (answer: Answer): string[] =>
  (answer.body?.detail ?? []).map((issue: { field: string }) => issue.field);

/** An inline block of a profile, `<tag>…</tag>`. */
function block(profile: string, tag: string): string {
  const match = new RegExp(`<${tag}>\\n([\\s\\S]*?)\\n</${tag}>`).exec(profile);
  if (match === null) throw new Error(`The profile has no <${tag}>`);
  return `${match[1]}\n`;
}

// deno-lint-ignore no-explicit-any -- entries are read field by field; a wrong one fails.
async function audit(entity: string): Promise<any[]> {
  const answer = await h.request("GET", `/api/v1/audit?limit=500&entity=${entity}`, {
    token: h.tokens.admin,
  });
  expect(answer.status, answer.text).toBe(200);
  return [...answer.body.items].reverse();
}

describe("the settings", () => {
  test("are made once however many ask, a CA signing the server's certificate", async () => {
    const racing = await Promise.all(
      Array.from({ length: 3 }, () => ensureOpenvpnSettings(h.deps)),
    );
    expect(new Set(racing.map((row) => row.caCertificate)).size).toBe(1);
    const answer = await h.request("GET", SETTINGS, { token: h.tokens.viewer });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      subnet: "10.67.0.0/16",
      gateway_address: "10.67.0.1",
      transport: "udp",
      listen_port: 1194,
      endpoint_host: null,
      mtu: 1500,
      keepalive_interval_seconds: 10,
      keepalive_timeout_seconds: 60,
    });
    expect(answer.text).not.toMatch(/PRIVATE KEY|Static key/);
    const ca = new X509Certificate(answer.body.ca_certificate);
    expect(ca.ca).toBe(true);
    expect(await verify(answer.body.ca_certificate, answer.body.server_certificate, "sslserver"))
      .toMatch(/: OK$/);
    // The server's certificate is no client's: a device cannot pose as a gateway, nor the reverse.
    expect(await verify(answer.body.ca_certificate, answer.body.server_certificate, "sslclient"))
      .toMatch(/^refused/);
    expect(await audit("openvpn_settings")).toEqual([]);
  });

  test("refuse a subnet overlapping WireGuard's, a keepalive the daemon refuses, read-only fields", async () => {
    const put = (body: Record<string, unknown>, token = h.tokens.admin) =>
      h.request("PUT", SETTINGS, { token, body });
    const overlap = await put({ subnet: "10.66.128.0/17" });
    expect(overlap.status).toBe(422);
    expect(fieldsOf(overlap)).toEqual(["body.subnet"]);
    expect(overlap.text).toContain("10.66.0.0/16");
    // And the other way round: WireGuard's settings refuse OpenVPN's block.
    const wireguard = await h.request("PUT", "/api/v1/wireguard/settings", {
      token: h.tokens.admin,
      body: { subnet: "10.67.0.0/24" },
    });
    expect(wireguard.status).toBe(422);
    expect(wireguard.text).toContain("OpenVPN subnet 10.67.0.0/16");
    const keepalive = await put({ keepalive_timeout_seconds: 15 });
    expect(keepalive.status).toBe(422);
    expect(fieldsOf(keepalive)).toEqual(["body.keepalive_timeout_seconds"]);
    expect(keepalive.text).toContain("at least twice the interval");
    expect(fieldsOf(await put({ transport: "sctp" }))).toEqual(["body.transport"]);
    expect(fieldsOf(await put({ ca_certificate: "x" }))).toEqual(["body.ca_certificate"]);
    expect((await put({ mtu: 1400 }, h.tokens.editor)).status).toBe(403);
    const { answer, entries } = await entriesOf(() =>
      put({ endpoint_host: "VPN.Example.com", transport: "tcp", listen_port: 4443 })
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({
      endpoint_host: "vpn.example.com",
      transport: "tcp",
      listen_port: 4443,
    });
    expect(entries).toEqual([{ kind: "tunnel", ref: "openvpn" }]);
    expect((await audit("openvpn_settings")).at(-1)).toMatchObject({
      action: "update",
      after: { transport: "tcp", listen_port: 4443 },
    });
  });
});

describe("devices", () => {
  test("are made with a certificate the CA signs for a client, named by the device's id", async () => {
    const { answer, entries } = await entriesOf(() =>
      h.request("POST", peers(), {
        token: h.tokens.editor,
        body: { name: "Tablet", country: "uk", city: "London" },
      })
    );
    device = answer;
    expect(answer.status, answer.text).toBe(201);
    expect(answer.body).toMatchObject({
      protocol: "openvpn",
      name: "Tablet",
      address: "10.67.0.2",
      enabled: true,
      country: "GB",
      city: "london",
      online: false,
      last_seen_at: null,
    });
    expect(entries).toEqual([{ kind: "tunnel", ref: answer.body.id }]);
    const settings = (await h.request("GET", SETTINGS, { token: h.tokens.viewer })).body;
    expect(await verify(settings.ca_certificate, answer.body.certificate, "sslclient"))
      .toMatch(/: OK$/);
    expect(await verify(settings.ca_certificate, answer.body.certificate, "sslserver"))
      .toMatch(/^refused/);
    const certificate = new X509Certificate(answer.body.certificate);
    expect(certificate.subject).toContain(`CN=${answer.body.id}`);
    expect(certificate.serialNumber.toLowerCase().replace(/^0+/, "")).toBe(
      answer.body.certificate_serial,
    );
    const second = await h.request("POST", peers(), {
      token: h.tokens.editor,
      body: { name: "Laptop" },
    });
    expect(second.body.address).toBe("10.67.0.3");
    const duplicate = await h.request("POST", peers(), {
      token: h.tokens.editor,
      body: { name: "tablet" },
    });
    expect(duplicate.status).toBe(400);
    const [created] = await audit("tunnel_device");
    expect(created.after).toMatchObject({ protocol: "openvpn", private_key_sealed: "********" });
    expect(
      (await h.request("POST", peers(), { token: h.tokens.viewer, body: { name: "x" } })).status,
    )
      .toBe(403);
    // The WireGuard routes do not show an OpenVPN device.
    const wireguard = await h.request(
      "GET",
      `/api/v1/projects/${projectId}/wireguard/peers/${answer.body.id}`,
      { token: h.tokens.viewer },
    );
    expect(wireguard.status).toBe(404);
    // Its usage: nothing yet, all-time and over time.
    expect(answer.body.usage).toMatchObject({
      requests: 0,
      bytes_sent: 0,
      encrypted_dns_closed: 0,
      live_included: true,
    });
    const history = await h.request(
      "GET",
      `${peers()}/${answer.body.id}/metrics/history?range=1h`,
      { token: h.tokens.viewer },
    );
    expect(history.status, history.text).toBe(200);
    expect(history.body.points.every((p: { requests: number }) => p.requests === 0)).toBe(true);
    const elsewhere = await h.request(
      "GET",
      `/api/v1/projects/${projectId}/wireguard/peers/${answer.body.id}/metrics/history`,
      { token: h.tokens.viewer },
    );
    expect(elsewhere.status).toBe(404);
  });

  test("have a profile with the CA, their certificate and its key, and the tls-crypt key", async () => {
    const path = `${peers()}/${device.body.id}/config`;
    expect((await h.request("GET", path, { token: h.tokens.viewer })).status).toBe(403);
    const answer = await h.request("GET", path, { token: h.tokens.editor });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/x-openvpn-profile");
    expect(answer.headers.get("cache-control")).toBe("no-store");
    expect(answer.headers.get("content-disposition")).toBe('attachment; filename="Tablet.ovpn"');
    const profile = answer.text;
    for (
      const line of [
        "client",
        "proto tcp-client",
        "remote vpn.example.com 4443",
        "remote-cert-tls server",
      ]
    ) {
      expect(profile.split("\n")).toContain(line);
    }
    const settings = (await h.request("GET", SETTINGS, { token: h.tokens.viewer })).body;
    expect(block(profile, "ca").trim()).toBe(settings.ca_certificate.trim());
    expect(block(profile, "cert").trim()).toBe(device.body.certificate.trim());
    // The key is the certificate's.
    const key = createPublicKey(createPrivateKey(block(profile, "key")));
    expect(key.export({ format: "jwk" })).toEqual(
      new X509Certificate(device.body.certificate).publicKey.export({ format: "jwk" }),
    );
    expect(block(profile, "tls-crypt")).toMatch(
      /^-----BEGIN OpenVPN Static key V1-----\n([0-9a-f]{32}\n){16}-----END OpenVPN Static key V1-----\n$/,
    );
  });

  test("refuse a profile until an endpoint host is set", async () => {
    await h.request("PUT", SETTINGS, { token: h.tokens.admin, body: { endpoint_host: null } });
    const answer = await h.request("GET", `${peers()}/${device.body.id}/config`, {
      token: h.tokens.editor,
    });
    expect(answer.status).toBe(409);
    expect(answer.text).toContain("endpoint_host");
    await h.request("PUT", SETTINGS, {
      token: h.tokens.admin,
      body: { endpoint_host: "vpn.example.com" },
    });
  });

  test("get a new certificate and serial when rotated; edits and deletes", async () => {
    const { answer, entries } = await entriesOf(() =>
      h.request("POST", `${peers()}/${device.body.id}/rotate-certificate`, {
        token: h.tokens.editor,
      })
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.certificate_serial).not.toBe(device.body.certificate_serial);
    expect(answer.body.certificate).not.toBe(device.body.certificate);
    expect(entries).toEqual([{ kind: "tunnel", ref: device.body.id }]);
    device = answer;
    // A city without its country is refused, on the field the edit cleared.
    const edited = await h.request("PATCH", `${peers()}/${device.body.id}`, {
      token: h.tokens.editor,
      body: { country: null },
    });
    expect(edited.status).toBe(422);
    expect(fieldsOf(edited)).toEqual(["body.country"]);
    const disabled = await h.request("PATCH", `${peers()}/${device.body.id}`, {
      token: h.tokens.editor,
      body: { enabled: false, certificate: "x" },
    });
    expect(fieldsOf(disabled)).toEqual(["body.certificate"]);
    const listed = await h.request("GET", peers(), { token: h.tokens.viewer });
    expect(listed.body.map((d: { name: string }) => d.name)).toEqual(["Tablet", "Laptop"]);
    const laptop = listed.body[1];
    expect(
      (await h.request("DELETE", `${peers()}/${laptop.id}`, { token: h.tokens.editor })).status,
    )
      .toBe(204);
    expect((await h.request("GET", `${peers()}/${laptop.id}`, { token: h.tokens.viewer })).status)
      .toBe(404);
  });

  test("show their connections closed as encrypted DNS in their usage and their history", async () => {
    const deviceId: string = device.body.id;
    const meters = new RequestMetering({
      redis: h.deps.redis,
      keys: h.deps.keys,
      script: await loadMeteringScriptNode(),
      instance: "gw-openvpn-test",
      intervalMs: 3_600_000,
    });
    try {
      // Metered as a gateway meters any device's, whatever its tunnel: two flushed, one live.
      closeEncryptedDns(meters, projectId, deviceId, 2);
      expect(await meters.publishNow()).toBe(true);
      const outcome = await new MetricsFlushJob({
        database: h.deps.database,
        redis: h.deps.redis,
        keys: h.deps.keys,
        logger: h.deps.logger,
      }).flush(`${Date.now()}-1`);
      expect(outcome).toMatchObject({ result: "committed", written: { devices: 1 } });
      closeEncryptedDns(meters, projectId, deviceId, 1);
      expect(await meters.publishNow()).toBe(true);
    } finally {
      await meters.close();
    }
    const rows = await h.deps.database.sql`select protocol, sum(encrypted_dns_closed)::int as n
      from tunnel_device_metrics where device_id = ${deviceId} group by protocol`;
    expect(rows.map((r) => [r.protocol, r.n])).toEqual([["openvpn", 2]]);
    const one = await h.request("GET", `${peers()}/${deviceId}`, { token: h.tokens.viewer });
    expect(one.body.usage).toMatchObject({ requests: 0, encrypted_dns_closed: 3 });
    const history = await h.request("GET", `${peers()}/${deviceId}/metrics/history?range=1h`, {
      token: h.tokens.viewer,
    });
    expect(history.status, history.text).toBe(200);
    const points: { requests: number; encrypted_dns_closed: number }[] = history.body.points;
    expect(points.reduce((n, p) => n + p.encrypted_dns_closed, 0)).toBe(3);
    expect(points.every((p) => p.requests === 0)).toBe(true);
  });
});

describe("the identity's rotation", () => {
  test("makes a new CA and issues every device's certificate again by it", async () => {
    const before = (await h.request("GET", SETTINGS, { token: h.tokens.viewer })).body;
    const { answer, entries } = await entriesOf(() =>
      h.request("POST", `${SETTINGS}/rotate-identity`, { token: h.tokens.admin })
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.ca_certificate).not.toBe(before.ca_certificate);
    expect(entries).toEqual([{ kind: "tunnel", ref: "openvpn" }]);
    const warnings = h.lines.filter((line) => line.msg === OPENVPN_IDENTITY_ROTATED);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: "warn", devices: 1 });
    const reissued = (await h.request("GET", `${peers()}/${device.body.id}`, {
      token: h.tokens.viewer,
    })).body;
    expect(reissued.certificate_serial).not.toBe(device.body.certificate_serial);
    expect(await verify(answer.body.ca_certificate, reissued.certificate, "sslclient"))
      .toMatch(/: OK$/);
    expect(await verify(before.ca_certificate, reissued.certificate, "sslclient"))
      .toMatch(/^refused/);
    device = { ...device, body: reissued };
    const [entry] = (await audit("openvpn_settings")).slice(-1);
    expect(entry.after).toMatchObject({
      ca_key_sealed: "********",
      server_key_sealed: "********",
      tls_crypt_key_sealed: "********",
    });
    expect(JSON.stringify(entry)).not.toContain("PRIVATE KEY");
  });
});

describe("the feed", () => {
  test("carries what the daemon runs with and each device's serial, never a CA or device key", async () => {
    const compiled = await compile(h.deps.database, {
      keys: await deriveFeedKeys(h.settings.internalSecret),
      defaultStrategy: "round_robin" as const,
      providers: new ProviderRegistry(),
      internalSecret: h.settings.internalSecret,
    });
    const json = compiled.sections.get("global")!.json;
    const tunnels = (JSON.parse(json) as GlobalSection).tunnels!;
    const settings = (await h.request("GET", SETTINGS, { token: h.tokens.viewer })).body;
    expect(tunnels.openvpn).toMatchObject({
      ca_certificate: settings.ca_certificate,
      server_certificate: settings.server_certificate,
      subnet: "10.67.0.0/16",
      transport: "tcp",
      listen_port: 4443,
      mtu: 1500,
      keepalive_interval_seconds: 10,
      keepalive_timeout_seconds: 60,
    });
    // The server's key is its certificate's.
    const serverKey = createPublicKey(createPrivateKey(tunnels.openvpn!.server_key));
    expect(serverKey.export({ format: "jwk" })).toEqual(
      new X509Certificate(settings.server_certificate).publicKey.export({ format: "jwk" }),
    );
    expect(tunnels.openvpn!.tls_crypt_key).toMatch(/^-----BEGIN OpenVPN Static key V1-----/);
    const entry = tunnels.devices.find((d) => d.id === device.body.id)!;
    expect(entry).toMatchObject({
      protocol: "openvpn",
      address: "10.67.0.2",
      certificate_serial: device.body.certificate_serial,
      public_key: null,
      preshared_key: null,
    });
    const profile = (await h.request("GET", `${peers()}/${device.body.id}/config`, {
      token: h.tokens.editor,
    })).text;
    expect(json).not.toContain(block(profile, "key").trim().split("\n")[1]);
    // Exactly one private key travels: the server's.
    expect(json.match(/BEGIN PRIVATE KEY/g)).toHaveLength(1);
  });
});
