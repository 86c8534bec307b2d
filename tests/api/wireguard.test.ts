/**
 * WireGuard devices and settings through the api over real Postgres and Redis: the install's
 * identity made once however many ask, devices made with a generated or a supplied key and the
 * next free address, their options read by the username grammar, list, read, edit, delete and
 * key rotation, each write one `tunnel` change entry and an audit entry with its keys masked;
 * the config file parsed back line by line (its private key the device's, the server's public
 * key the settings'), its QR code, the refusals (bad key, a place without a country, a duplicate
 * name, another project's device, a subnet that is not a block or would strand a device, a full
 * subnet, no endpoint yet), the server key's rotation and its warning, roles, a device's usage
 * (all-time in its answers, its history route over windows written by the gateway's metering
 * and the real flush, its connections closed as encrypted DNS beside), and the feed's global
 * section carrying the identity and the devices with their keys opened.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import * as v from "valibot";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { compile } from "../../control/feed/compile.ts";
import { DeviceSeriesAnswer } from "../../control/api/answers/metrics.ts";
import { DeviceAnswer } from "../../control/api/answers/wireguard.ts";
import { SERVER_KEY_ROTATED } from "../../control/api/routes/wireguard.ts";
import { ensureWireguardSettings } from "../../control/services/wireguard-settings.ts";
import {
  KeyPlace,
  newPresharedKey,
  sealWireguardKey,
} from "../../control/services/wireguard-keys.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import type { GlobalSection } from "../../shared/feed/models.ts";
import { UsernameMessage } from "../../shared/username.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { type Answer, type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { MetricsFlushJob } from "../../control/jobs/metrics-flush.ts";
import { RequestMetering } from "../../gateway/metering/metering.ts";
import { loadMeteringScriptNode } from "../../testkit/metering.ts";
import {
  closeEncryptedDns,
  meter,
  type Transfer,
  usageOfTransfers,
} from "../../testkit/metrics-bed.ts";

let h: ApiHarness;
let projectId: string;
let otherProjectId: string;
/** The devices the tests make first: a generated key pair's, and a supplied public key's. */
let generated: Answer;
let supplied: Answer;

const SETTINGS = "/api/v1/wireguard/settings";
const peers = (project = projectId) => `/api/v1/projects/${project}/wireguard/peers`;

beforeAll(async () => {
  h = await startHarness();
  for (const name of ["phones", "others"]) {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name, username: name },
    });
    expect(project.status, project.text).toBe(201);
    if (name === "phones") projectId = project.body.id;
    else otherProjectId = project.body.id;
  }
});

afterAll(async () => {
  await h?.close();
});

/** A key pair as a device would make it: raw 32-byte keys in base64. */
function devicePair(): { privateKey: string; publicKey: string } {
  const { privateKey } = generateKeyPairSync("x25519");
  const jwk = privateKey.export({ format: "jwk" });
  const b64 = (text: string) => Buffer.from(text, "base64url").toString("base64");
  return { privateKey: b64(jwk.d!), publicKey: b64(jwk.x!) };
}

/** The public key of a base64 X25519 private key. */
function publicOf(privateKey: string): string {
  const der = Buffer.concat([
    Buffer.from("302e020100300506032b656e04220420", "hex"),
    Buffer.from(privateKey, "base64"),
  ]);
  const key = createPublicKey(createPrivateKey({ key: der, format: "der", type: "pkcs8" }));
  return Buffer.from(key.export({ format: "jwk" }).x!, "base64url").toString("base64");
}

/** Runs a write and answers the change entries it appended. */
async function entriesOf(write: () => Promise<Answer>) {
  const before = (await h.changes()).length;
  const answer = await write();
  return { answer, entries: (await h.changes()).slice(before) };
}

function fieldsOf(answer: Answer): string[] {
  return (answer.body?.detail ?? []).map((issue: { field: string }) => issue.field);
}

async function create(body: Record<string, unknown>, project = projectId): Promise<Answer> {
  return await h.request("POST", peers(project), { token: h.tokens.editor, body });
}

async function putSettings(body: Record<string, unknown>, token = h.tokens.admin) {
  return await h.request("PUT", SETTINGS, { token, body });
}

/** A config file's sections as `key = value` maps, every line kept in order. */
function parseConfig(text: string) {
  const sections: { name: string; lines: string[]; values: Record<string, string> }[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const section = /^\[(\w+)\]$/.exec(line);
    if (section) {
      sections.push({ name: section[1], lines: [], values: {} });
      continue;
    }
    const current = sections[sections.length - 1];
    current.lines.push(line);
    const pair = /^(\w+) = (.*)$/.exec(line);
    if (pair) current.values[pair[1]] = pair[2];
  }
  return sections;
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
  test("are made once however many ask, and answered without the private key", async () => {
    const racing = await Promise.all(
      Array.from({ length: 4 }, () => ensureWireguardSettings(h.deps)),
    );
    expect(new Set(racing.map((row) => row.publicKey)).size).toBe(1);
    const [{ n }] = await h.deps.database.sql<{ n: number }[]>`
      select count(*)::int as n from wireguard_settings`;
    expect(n).toBe(1);
    // The install's own write, not a person's: not in the audit log.
    expect(await audit("wireguard_settings")).toEqual([]);

    const answer = await h.request("GET", SETTINGS, { token: h.tokens.viewer });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toEqual({
      public_key: racing[0].publicKey,
      subnet: "10.66.0.0/16",
      gateway_address: "10.66.0.1",
      listen_port: 51820,
      endpoint_host: null,
      mtu: 1420,
      persistent_keepalive_seconds: 25,
      updated_at: expect.any(String),
    });
    expect(answer.body.public_key).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    // Sealed at rest: the stored column is no key.
    const [row] = await h.deps.database.sql<{ private_key_sealed: string }[]>`
      select private_key_sealed from wireguard_settings`;
    expect(Buffer.from(row.private_key_sealed, "base64").length).toBeGreaterThan(32 + 12);
  });

  test("an admin changes them, one entry a change; refusals name the field", async () => {
    const { answer, entries } = await entriesOf(() =>
      putSettings({ endpoint_host: "VPN.Example.com.", mtu: 1400, persistent_keepalive_seconds: 0 })
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({
      endpoint_host: "vpn.example.com",
      mtu: 1400,
      persistent_keepalive_seconds: 0,
      listen_port: 51820,
    });
    expect(entries).toEqual([{ kind: "tunnel", ref: "wireguard" }]);
    // The same values again: nothing changed, nothing announced.
    const again = await entriesOf(() => putSettings({ mtu: 1400 }));
    expect(again.answer.status).toBe(200);
    expect(again.entries).toEqual([]);
    const [entry] = (await audit("wireguard_settings")).slice(-1);
    expect(entry).toMatchObject({
      action: "update",
      actor: { name: "admin" },
      before: { mtu: 1420, endpoint_host: null, persistent_keepalive_seconds: 25 },
      after: { mtu: 1400, endpoint_host: "vpn.example.com", persistent_keepalive_seconds: 0 },
    });

    const refused: [Record<string, unknown>, string][] = [
      [{ subnet: "10.66.0.0/30" }, "body.subnet"],
      [{ subnet: "10.66.0.0/7" }, "body.subnet"],
      [{ subnet: "10.66.0.0" }, "body.subnet"],
      [{ subnet: "fd00::/64" }, "body.subnet"],
      [{ listen_port: 0 }, "body.listen_port"],
      [{ listen_port: 65536 }, "body.listen_port"],
      [{ mtu: 1279 }, "body.mtu"],
      [{ mtu: 1501 }, "body.mtu"],
      [{ persistent_keepalive_seconds: 3601 }, "body.persistent_keepalive_seconds"],
      [{ endpoint_host: "not a host" }, "body.endpoint_host"],
      [{ endpoint_host: "10.0.0.300" }, "body.endpoint_host"],
      [{ public_key: "x" }, "body.public_key"],
      [{ private_key: "x" }, "body.private_key"],
    ];
    for (const [body, field] of refused) {
      const { answer, entries } = await entriesOf(() => putSettings(body));
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(fieldsOf(answer), JSON.stringify(body)).toEqual([field]);
      expect(entries).toEqual([]);
    }
    const ipv6 = await putSettings({ endpoint_host: "[2001:DB8::1]" });
    expect(ipv6.body.endpoint_host).toBe("2001:db8::1");
    expect((await putSettings({ subnet: "10.66.7.9/16" })).body.subnet).toBe("10.66.0.0/16");
    expect((await putSettings({ endpoint_host: "vpn.example.com" })).status).toBe(200);

    // Admins only write them; anyone reads them.
    expect((await putSettings({ mtu: 1420 }, h.tokens.editor)).status).toBe(403);
    expect((await h.request("GET", SETTINGS)).status).toBe(401);
  });
});

describe("devices", () => {
  const own = devicePair();

  test("made with a generated key pair, or a supplied public key, at the next free address", async () => {
    const made = await entriesOf(() =>
      create({ name: "Alice phone", country: "uk", state: "eng", city: "São Paulo" })
    );
    generated = made.answer;
    expect(generated.status, generated.text).toBe(201);
    expect(generated.body).toEqual({
      id: expect.any(String),
      project_id: projectId,
      protocol: "wireguard",
      name: "Alice phone",
      address: "10.66.0.2",
      enabled: true,
      public_key: expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/),
      private_key: "********",
      has_private_key: true,
      preshared_key: "********",
      has_preshared_key: true,
      country: "GB",
      state: "ENG",
      city: "sao_paulo",
      session_id: null,
      last_seen_at: null,
      online: false,
      usage: { ...usageOfTransfers([]), encrypted_dns_closed: 0, live_included: true },
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(made.entries).toEqual([{ kind: "tunnel", ref: generated.body.id }]);

    supplied = await create({ name: "laptop", public_key: own.publicKey, session_id: "s-1" });
    expect(supplied.status, supplied.text).toBe(201);
    expect(supplied.body).toMatchObject({
      address: "10.66.0.3",
      public_key: own.publicKey,
      private_key: null,
      has_private_key: false,
      preshared_key: "********",
      session_id: "s-1",
      country: null,
    });

    // The keys are sealed at rest: no stored column holds a key in the clear.
    const rows = await h.deps.database.sql<Record<string, string | null>[]>`
      select private_key_sealed, preshared_key_sealed from tunnel_devices`;
    for (const row of rows) {
      for (const sealed of Object.values(row)) {
        if (sealed !== null) expect(Buffer.from(sealed, "base64").length).toBeGreaterThan(44);
      }
    }
    // Audited with its sealed keys masked.
    const [entry] = await audit("tunnel_device");
    expect(entry).toMatchObject({
      action: "create",
      entity_id: generated.body.id,
      entity_name: "Alice phone",
      actor: { name: "editor" },
      after: {
        address: "10.66.0.2",
        private_key_sealed: "********",
        preshared_key_sealed: "********",
        public_key: generated.body.public_key,
      },
    });
  });

  test("refusals: a bad key, a place without a country, a duplicate, a read-only field, a viewer", async () => {
    const before = (await h.changes()).length;
    for (
      const key of [
        "abc",
        `${"A".repeat(42)}==`,
        `${own.publicKey.slice(0, 43)}`,
        `${own.publicKey}A`,
        own.publicKey.replace(/.=$/, "B="),
      ]
    ) {
      const answer = await create({ name: "bad key", public_key: key });
      expect(answer.status, key).toBe(422);
      expect(fieldsOf(answer), key).toEqual(["body.public_key"]);
    }
    const stateAlone = await create({ name: "nowhere", state: "ny" });
    expect(stateAlone.status).toBe(422);
    expect(stateAlone.body.detail).toEqual([
      { field: "body.state", message: UsernameMessage.needsCountry },
    ]);
    const cityAlone = await create({ name: "nowhere", city: "Paris" });
    expect(cityAlone.body.detail).toEqual([
      { field: "body.city", message: UsernameMessage.needsCountry },
    ]);
    const badCountry = await create({ name: "nowhere", country: "xx" });
    expect(badCountry.body.detail).toEqual([
      { field: "body.country", message: UsernameMessage.country },
    ]);
    const badSession = await create({ name: "nowhere", session_id: "a\tb" });
    expect(badSession.body.detail).toEqual([
      { field: "body.session_id", message: UsernameMessage.sessionId },
    ]);

    const duplicate = await create({ name: "ALICE PHONE" });
    expect(duplicate.status).toBe(400);
    expect(fieldsOf(duplicate)).toEqual(["body.name"]);
    // The name is the project's: another project may use it.
    const elsewhere = await create({ name: "Alice phone" }, otherProjectId);
    expect(elsewhere.status, elsewhere.text).toBe(201);
    expect(elsewhere.body.address).toBe("10.66.0.4");
    const sameKey = await create({ name: "twin", public_key: own.publicKey });
    expect(sameKey.status).toBe(400);
    expect(fieldsOf(sameKey)).toEqual(["body.public_key"]);
    const readOnly = await create({ name: "placed", address: "10.66.0.99" });
    expect(fieldsOf(readOnly)).toEqual(["body.address"]);

    const viewer = await h.request("POST", peers(), {
      token: h.tokens.viewer,
      body: { name: "viewer's" },
    });
    expect(viewer.status).toBe(403);
    // Only the other project's device was made.
    expect((await h.changes()).slice(before)).toEqual([
      { kind: "tunnel", ref: elsewhere.body.id },
    ]);
  });

  test("listed, read, edited and deleted; another project's device is not found", async () => {
    const list = await h.request("GET", peers(), { token: h.tokens.viewer });
    expect(list.status).toBe(200);
    expect(list.body.map((d: { name: string }) => d.name)).toEqual(["Alice phone", "laptop"]);
    const one = await h.request("GET", `${peers()}/${generated.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(one.body).toEqual(list.body[0]);

    const { answer: edited, entries } = await entriesOf(() =>
      h.request("PATCH", `${peers()}/${generated.body.id}`, {
        token: h.tokens.editor,
        body: { name: "Alice's phone", enabled: false, city: "New York City", state: "" },
      })
    );
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body).toMatchObject({
      name: "Alice's phone",
      enabled: false,
      country: "GB",
      state: null,
      city: "new_york",
      address: "10.66.0.2",
      public_key: generated.body.public_key,
    });
    expect(entries).toEqual([{ kind: "tunnel", ref: generated.body.id }]);
    const [entry] = (await audit("tunnel_device")).filter((e) => e.action === "update");
    expect(entry).toMatchObject({
      before: { name: "Alice phone", enabled: true, state: "ENG", city: "sao_paulo" },
      after: { name: "Alice's phone", enabled: false, state: null, city: "new_york" },
    });
    // The same again changes nothing and announces nothing.
    const same = await entriesOf(() =>
      h.request("PATCH", `${peers()}/${generated.body.id}`, {
        token: h.tokens.editor,
        body: { enabled: false },
      })
    );
    expect(same.answer.status).toBe(200);
    expect(same.entries).toEqual([]);
    // Checked as the edit leaves it: clearing the country a city rests on names the country.
    const cleared = await h.request("PATCH", `${peers()}/${generated.body.id}`, {
      token: h.tokens.editor,
      body: { country: null },
    });
    expect(cleared.status).toBe(422);
    expect(cleared.body.detail).toEqual([
      { field: "body.country", message: UsernameMessage.needsCountry },
    ]);
    const keyEdit = await h.request("PATCH", `${peers()}/${generated.body.id}`, {
      token: h.tokens.editor,
      body: { public_key: own.publicKey },
    });
    expect(fieldsOf(keyEdit)).toEqual(["body.public_key"]);

    // Another project's device, by this project's path: not found, whatever the method.
    const others = await h.request("GET", peers(otherProjectId), { token: h.tokens.viewer });
    const foreign = `${peers()}/${others.body[0].id}`;
    for (
      const [method, path, body] of [
        ["GET", foreign, undefined],
        ["PATCH", foreign, { enabled: false }],
        ["DELETE", foreign, undefined],
        ["POST", `${foreign}/rotate-keys`, undefined],
        ["GET", `${foreign}/config`, undefined],
        ["GET", `${foreign}/metrics/history`, undefined],
      ] as const
    ) {
      const answer = await h.request(method, path, { token: h.tokens.editor, body });
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.body.error).toBe("Device not found");
    }
    const missingProject = await h.request("GET", peers(crypto.randomUUID()), {
      token: h.tokens.viewer,
    });
    expect(missingProject.body.error).toBe("Project not found");

    // A deleted device's address is the next device's.
    const spare = await create({ name: "spare" });
    expect(spare.body.address).toBe("10.66.0.5");
    const gone = await entriesOf(() =>
      h.request("DELETE", `${peers()}/${spare.body.id}`, { token: h.tokens.editor })
    );
    expect(gone.answer.status).toBe(204);
    expect(gone.entries).toEqual([{ kind: "tunnel", ref: spare.body.id }]);
    expect((await audit("tunnel_device")).at(-1)).toMatchObject({
      action: "delete",
      entity_id: spare.body.id,
      before: { name: "spare", private_key_sealed: "********" },
    });
    const next = await create({ name: "next" });
    expect(next.body.address).toBe("10.66.0.5");
    expect(
      (await h.request("DELETE", `${peers()}/${next.body.id}`, { token: h.tokens.editor }))
        .status,
    ).toBe(204);
  });

  test("the config file: every line, the device's own key, the server's public key", async () => {
    const path = `${peers()}/${generated.body.id}/config`;
    const answer = await h.request("GET", path, { token: h.tokens.editor });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(answer.headers.get("content-disposition")).toBe(
      `attachment; filename="Alice_s_phone.conf"`,
    );
    expect(answer.headers.get("cache-control")).toBe("no-store");
    const settings = (await h.request("GET", SETTINGS, { token: h.tokens.viewer })).body;
    const [iface, peer, ...rest] = parseConfig(answer.text);
    expect(rest).toEqual([]);
    expect(iface.name).toBe("Interface");
    expect(Object.keys(iface.values)).toEqual(["PrivateKey", "Address", "DNS", "MTU"]);
    expect(iface.lines).toHaveLength(4);
    expect(publicOf(iface.values.PrivateKey)).toBe(generated.body.public_key);
    expect(iface.values.Address).toBe("10.66.0.2/32");
    expect(iface.values.DNS).toBe("10.66.0.1");
    expect(iface.values.MTU).toBe("1400");
    expect(peer.name).toBe("Peer");
    expect(peer.lines).toHaveLength(5);
    expect(peer.values).toEqual({
      PublicKey: settings.public_key,
      PresharedKey: expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/),
      AllowedIPs: "0.0.0.0/0, ::/0",
      Endpoint: "vpn.example.com:51820",
      PersistentKeepalive: "0",
    });
    expect(Buffer.from(peer.values.PresharedKey, "base64")).toHaveLength(32);
    // The keys are in this file alone: no answer or audit entry carries them.
    const everything = [
      (await h.request("GET", peers(), { token: h.tokens.viewer })).text,
      (await h.request("GET", "/api/v1/audit?limit=500", { token: h.tokens.admin })).text,
      JSON.stringify(h.lines),
    ].join("\n");
    expect(everything).not.toContain(iface.values.PrivateKey);
    expect(everything).not.toContain(peer.values.PresharedKey);

    // A supplied key: the device puts its own private key where the comment says.
    const theirs = await h.request("GET", `${peers()}/${supplied.body.id}/config`, {
      token: h.tokens.editor,
    });
    const [ownIface] = parseConfig(theirs.text);
    expect(ownIface.lines[0]).toMatch(/^# PrivateKey = <this device's own private key/);
    expect(ownIface.values.PrivateKey).toBeUndefined();
    expect(ownIface.values.Address).toBe("10.66.0.3/32");

    // As a QR code, for a phone's app to scan.
    const qr = await h.request("GET", `${path}?format=qr`, { token: h.tokens.editor });
    expect(qr.status).toBe(200);
    expect(qr.headers.get("content-type")).toBe("image/svg+xml");
    expect(qr.text).toMatch(/^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(qr.text.trimEnd()).toMatch(/<\/svg>$/);
    const bad = await h.request("GET", `${path}?format=png`, { token: h.tokens.editor });
    expect(fieldsOf(bad)).toEqual(["query.format"]);
    // It holds the device's keys: not a viewer's to read.
    expect((await h.request("GET", path, { token: h.tokens.viewer })).status).toBe(403);
  });

  test("no config until an admin set the endpoint host", async () => {
    expect((await putSettings({ endpoint_host: null })).status).toBe(200);
    try {
      const answer = await h.request("GET", `${peers()}/${generated.body.id}/config`, {
        token: h.tokens.editor,
      });
      expect(answer.status).toBe(409);
      expect(answer.body.error).toMatch(
        /an admin must set endpoint_host in the WireGuard settings/,
      );
    } finally {
      expect((await putSettings({ endpoint_host: "vpn.example.com" })).status).toBe(200);
    }
  });

  test("rotating a device's keys: a new pair, or the device's own new public key", async () => {
    const configOf = async (id: string) =>
      parseConfig(
        (await h.request("GET", `${peers()}/${id}/config`, { token: h.tokens.editor })).text,
      );
    const [, oldPeer] = await configOf(generated.body.id);
    const { answer, entries } = await entriesOf(() =>
      h.request("POST", `${peers()}/${generated.body.id}/rotate-keys`, { token: h.tokens.editor })
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.public_key).not.toBe(generated.body.public_key);
    expect(answer.body.has_private_key).toBe(true);
    expect(entries).toEqual([{ kind: "tunnel", ref: generated.body.id }]);
    const [iface, peer] = await configOf(generated.body.id);
    expect(publicOf(iface.values.PrivateKey)).toBe(answer.body.public_key);
    expect(peer.values.PresharedKey).not.toBe(oldPeer.values.PresharedKey);
    const [entry] = (await audit("tunnel_device")).slice(-1);
    expect(entry).toMatchObject({
      action: "update",
      entity_id: generated.body.id,
      before: { private_key_sealed: "********", preshared_key_sealed: "********" },
      after: { public_key: answer.body.public_key, private_key_sealed: "********" },
    });

    const next = devicePair();
    const mine = await h.request("POST", `${peers()}/${supplied.body.id}/rotate-keys`, {
      token: h.tokens.editor,
      body: { public_key: next.publicKey },
    });
    expect(mine.status, mine.text).toBe(200);
    expect(mine.body).toMatchObject({ public_key: next.publicKey, has_private_key: false });
    const bad = await h.request("POST", `${peers()}/${supplied.body.id}/rotate-keys`, {
      token: h.tokens.editor,
      body: { public_key: "nope" },
    });
    expect(fieldsOf(bad)).toEqual(["body.public_key"]);
    const viewer = await h.request("POST", `${peers()}/${supplied.body.id}/rotate-keys`, {
      token: h.tokens.viewer,
    });
    expect(viewer.status).toBe(403);
  });
});

describe("usage", () => {
  test("all-time in the device's answers, over time by its history route, live counts added, encrypted DNS closed included", async () => {
    const device = await create({ name: "metered" });
    expect(device.status, device.text).toBe(201);
    const deviceId: string = device.body.id;
    const meters = new RequestMetering({
      redis: h.deps.redis,
      keys: h.deps.keys,
      script: await loadMeteringScriptNode(),
      instance: "gw-wireguard-test",
      intervalMs: 3_600_000,
    });
    // The device's connections, through upstreams the flush does not know (their windows are
    // dropped; the device's and the project's are not).
    const transfer = (i: number): Transfer => ({
      projectId,
      connectorId: crypto.randomUUID(),
      proxyId: crypto.randomUUID(),
      deviceId,
      host: "shop.example",
      sent: 300 + i,
      received: 9_000 + i,
      latencyMs: 12 + i,
      ok: i !== 3,
    });
    const flushed = [0, 1, 2, 3, 4].map(transfer);
    const pending = [5, 6].map(transfer);
    try {
      meter(meters, flushed);
      // Connections closed as encrypted DNS: two flushed, one still in the live window.
      closeEncryptedDns(meters, projectId, deviceId, 2);
      expect(await meters.publishNow()).toBe(true);
      const outcome = await new MetricsFlushJob({
        database: h.deps.database,
        redis: h.deps.redis,
        keys: h.deps.keys,
        logger: h.deps.logger,
      }).flush(`${Date.now()}-1`);
      expect(outcome).toMatchObject({ result: "committed", written: { devices: 1 } });
      meter(meters, pending);
      closeEncryptedDns(meters, projectId, deviceId, 1);
      expect(await meters.publishNow()).toBe(true);
    } finally {
      await meters.close();
    }
    const all = [...flushed, ...pending];
    const rows = await h.deps.database.sql`select protocol, sum(requests)::int as requests,
        sum(encrypted_dns_closed)::int as closed
      from tunnel_device_metrics where device_id = ${deviceId} group by protocol`;
    expect(rows.map((r) => [r.protocol, r.requests, r.closed])).toEqual([["wireguard", 5, 2]]);

    // No requests for the encrypted DNS closed: the usage is the transfers', and beside it.
    const expected = { ...usageOfTransfers(all), encrypted_dns_closed: 3, live_included: true };
    const one = await h.request("GET", `${peers()}/${deviceId}`, { token: h.tokens.viewer });
    expect(one.body.usage).toEqual(expected);
    const listed = await h.request("GET", peers(), { token: h.tokens.viewer });
    expect(listed.body.find((d: { id: string }) => d.id === deviceId).usage).toEqual(expected);

    const history = await h.request("GET", `${peers()}/${deviceId}/metrics/history?range=1h`, {
      token: h.tokens.viewer,
    });
    expect(history.status, history.text).toBe(200);
    // As their strict declarations say (a field added or left out fails).
    expect(v.safeParse(DeviceSeriesAnswer, history.body).issues).toBeUndefined();
    expect(v.safeParse(DeviceAnswer, one.body).issues).toBeUndefined();
    expect(history.body).toMatchObject({ range: "1h", bucket_seconds: 60, live_included: true });
    expect(history.body.points.length).toBeGreaterThanOrEqual(60);
    expect(history.body.points.length).toBeLessThanOrEqual(61);
    type Point = { requests: number; bytes_received: number; encrypted_dns_closed: number };
    const summed = (points: Point[]) =>
      points.reduce(
        (n, p) => ({
          requests: n.requests + p.requests,
          received: n.received + p.bytes_received,
          closed: n.closed + p.encrypted_dns_closed,
        }),
        { requests: 0, received: 0, closed: 0 },
      );
    expect(summed(history.body.points)).toEqual({
      requests: all.length,
      received: usageOfTransfers(all).bytes_received,
      closed: 3,
    });
    // What gateways counted since the flush is in the last bucket.
    expect(history.body.points.at(-1).requests).toBeGreaterThanOrEqual(pending.length);
    expect(history.body.points.at(-1).encrypted_dns_closed).toBeGreaterThanOrEqual(1);
    const week = await h.request("GET", `${peers()}/${deviceId}/metrics/history?range=7d`, {
      token: h.tokens.viewer,
    });
    expect(week.body.bucket_seconds).toBe(3600);
    expect(summed(week.body.points)).toMatchObject({ requests: all.length, closed: 3 });
    // Only a device's series carries it: the project's points are the usage alone.
    const project = await h.request("GET", `/api/v1/projects/${projectId}/metrics/history`, {
      token: h.tokens.viewer,
    });
    expect(project.status, project.text).toBe(200);
    expect(project.body.points.at(-1)).not.toHaveProperty("encrypted_dns_closed");
    // A window that ended before the device's traffic: zeros, no live counts.
    const before = await h.request(
      "GET",
      `${peers()}/${deviceId}/metrics/history?range=1h&end=${
        encodeURIComponent(new Date(Date.now() - 3 * 3_600_000).toISOString())
      }`,
      { token: h.tokens.viewer },
    );
    expect(summed(before.body.points).requests).toBe(0);

    // The project's history query, and its refusals.
    for (
      const [query, field] of [
        ["range=2h", "query.range"],
        ["range=7d&bucket_seconds=60", "query.bucket_seconds"],
      ]
    ) {
      const refused = await h.request("GET", `${peers()}/${deviceId}/metrics/history?${query}`, {
        token: h.tokens.viewer,
      });
      expect(refused.status, query).toBe(422);
      expect(fieldsOf(refused)).toContain(field);
    }
    const unknown = await h.request(
      "GET",
      `${peers()}/${crypto.randomUUID()}/metrics/history`,
      { token: h.tokens.viewer },
    );
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe("Device not found");
    expect(
      (await h.request("DELETE", `${peers()}/${deviceId}`, { token: h.tokens.editor })).status,
    ).toBe(204);
  });
});

describe("keys sealed under another install's secret", () => {
  test("a device's config is a 409 until its keys are rotated", async () => {
    const id = supplied.body.id;
    const sealed = sealWireguardKey(
      "another install's secret",
      KeyPlace.devicePreshared(id),
      newPresharedKey(),
    );
    await h.deps.database.sql`
      update tunnel_devices set preshared_key_sealed = ${sealed} where id = ${id}`;
    const config = `${peers()}/${id}/config`;
    const refused = await h.request("GET", config, { token: h.tokens.editor });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatch(/do not open under this install's secret/);
    const rotated = await h.request("POST", `${peers()}/${id}/rotate-keys`, {
      token: h.tokens.editor,
    });
    expect(rotated.body.has_private_key).toBe(true);
    const served = await h.request("GET", config, { token: h.tokens.editor });
    expect(served.status, served.text).toBe(200);
    const [iface] = parseConfig(served.text);
    expect(publicOf(iface.values.PrivateKey)).toBe(rotated.body.public_key);
  });
});

describe("the subnet", () => {
  test("a block that would strand a device is refused; a full one refuses new devices", async () => {
    const before = (await h.changes()).length;
    for (const subnet of ["10.68.0.0/16", "10.66.0.8/29"]) {
      const answer = await putSettings({ subnet });
      expect(answer.status, subnet).toBe(422);
      expect(fieldsOf(answer), subnet).toEqual(["body.subnet"]);
      expect(answer.body.detail[0].message).toMatch(/^would strand \d of the devices/);
    }
    // 10.66.0.0/29 holds devices .2 to .6: the three there, and two more.
    expect((await putSettings({ subnet: "10.66.0.0/29" })).status).toBe(200);
    expect((await h.changes()).slice(before)).toEqual([{ kind: "tunnel", ref: "wireguard" }]);
    try {
      const made = [await create({ name: "five" }), await create({ name: "six" })];
      expect(made.map((answer) => answer.body.address)).toEqual(["10.66.0.5", "10.66.0.6"]);
      const full = await entriesOf(() => create({ name: "seven" }));
      expect(full.answer.status).toBe(409);
      expect(full.answer.body.error).toMatch(/has no free address left/);
      expect(full.entries).toEqual([]);
      for (const answer of made) {
        await h.request("DELETE", `${peers()}/${answer.body.id}`, { token: h.tokens.editor });
      }
    } finally {
      expect((await putSettings({ subnet: "10.66.0.0/16" })).status).toBe(200);
    }
  });
});

describe("the server key", () => {
  test("a rotation logs its warning, and configs name the new public key", async () => {
    const before = (await h.request("GET", SETTINGS, { token: h.tokens.viewer })).body;
    expect(
      (await h.request("POST", `${SETTINGS}/rotate-key`, { token: h.tokens.editor })).status,
    ).toBe(403);
    const { answer, entries } = await entriesOf(() =>
      h.request("POST", `${SETTINGS}/rotate-key`, { token: h.tokens.admin })
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.public_key).not.toBe(before.public_key);
    expect(answer.body.public_key).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(entries).toEqual([{ kind: "tunnel", ref: "wireguard" }]);
    const warnings = h.lines.filter((line) => line.msg === SERVER_KEY_ROTATED);
    expect(SERVER_KEY_ROTATED).toBe(
      "WireGuard server key rotated; every device config is now invalid",
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: "warn", public_key: answer.body.public_key });
    const config = await h.request("GET", `${peers()}/${generated.body.id}/config`, {
      token: h.tokens.editor,
    });
    const [, peer] = parseConfig(config.text);
    expect(peer.values.PublicKey).toBe(answer.body.public_key);
    expect((await audit("wireguard_settings")).at(-1)).toMatchObject({
      action: "update",
      before: { public_key: before.public_key, private_key_sealed: "********" },
      after: { public_key: answer.body.public_key, private_key_sealed: "********" },
    });
  });
});

describe("the OpenAPI document", () => {
  test("describes the routes from their schemas, the key rotation's body optional", async () => {
    const doc = (await h.request("GET", "/api/v1/openapi.json")).body;
    const peer = "/api/v1/projects/{id}/wireguard/peers/{peer}";
    expect(Object.keys(doc.paths[SETTINGS]).sort()).toEqual(["get", "put"]);
    expect(Object.keys(doc.paths[peer]).sort()).toEqual(["delete", "get", "patch"]);
    const create = doc.paths["/api/v1/projects/{id}/wireguard/peers"].post;
    const schema = create.requestBody.content["application/json"].schema;
    expect(schema.required).toEqual(["name"]);
    expect(schema.additionalProperties).toBe(false);
    expect(create.responses["201"].content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/Device",
    });
    expect(doc.paths[`${peer}/rotate-keys`].post.requestBody.required).toBe(false);
    expect(doc.paths[`${peer}/config`].get.parameters).toContainEqual(
      expect.objectContaining({ name: "format", in: "query", required: false }),
    );
    expect(doc.paths[`${SETTINGS}/rotate-key`].post.description).toMatch(/Role: admin/);
    // The history takes the project's history query; its points carry the encrypted DNS closed.
    const history = doc.paths[`${peer}/metrics/history`].get;
    expect(history.parameters.map((p: { name: string }) => p.name).sort()).toEqual(
      doc.paths["/api/v1/projects/{id}/metrics/history"].get.parameters
        .map((p: { name: string }) => p.name).concat("peer").sort(),
    );
    expect(history.responses["200"].content["application/json"].schema).toEqual({
      $ref: "#/components/schemas/DeviceSeries",
    });
    expect(doc.components.schemas.DeviceSeries.properties.points.items.required)
      .toContain("encrypted_dns_closed");
    expect(doc.components.schemas.Series.properties.points.items.required)
      .not.toContain("encrypted_dns_closed");
  });
});

describe("the feed", () => {
  test("the global section carries the identity and every device by id, keys opened", async () => {
    const options = {
      keys: await deriveFeedKeys(h.settings.internalSecret),
      defaultStrategy: "round_robin" as const,
      providers: new ProviderRegistry(),
    };
    const compiled = await compile(h.deps.database, {
      ...options,
      internalSecret: h.settings.internalSecret,
    });
    const json = compiled.sections.get("global")!.json;
    const global = JSON.parse(json) as GlobalSection;
    const settings = (await h.request("GET", SETTINGS, { token: h.tokens.viewer })).body;
    const tunnels = global.tunnels!;
    expect(tunnels.wireguard).toEqual({
      private_key: expect.any(String),
      public_key: settings.public_key,
      subnet: "10.66.0.0/16",
      listen_port: 51820,
      mtu: 1400,
      persistent_keepalive_seconds: 0,
    });
    expect(publicOf(tunnels.wireguard!.private_key)).toBe(settings.public_key);
    const listed = [
      ...(await h.request("GET", peers(), { token: h.tokens.viewer })).body,
      ...(await h.request("GET", peers(otherProjectId), { token: h.tokens.viewer })).body,
    ];
    expect(tunnels.devices.map((d) => d.id)).toEqual(
      listed.map((d: { id: string }) => d.id).sort(),
    );
    const device = tunnels.devices.find((d) => d.id === generated.body.id)!;
    const config = await h.request("GET", `${peers()}/${generated.body.id}/config`, {
      token: h.tokens.editor,
    });
    const [iface, peer] = parseConfig(config.text);
    expect(device).toEqual({
      id: generated.body.id,
      project_id: projectId,
      protocol: "wireguard",
      name: "Alice's phone",
      address: "10.66.0.2",
      enabled: false,
      public_key: publicOf(iface.values.PrivateKey),
      preshared_key: peer.values.PresharedKey,
      country: "GB",
      state: null,
      city: "new_york",
      session_id: null,
      certificate_serial: null,
    });
    // A device's private key never goes in the feed.
    expect(json).not.toContain(iface.values.PrivateKey);
    // The same definitions compile to the same bytes.
    const again = await compile(h.deps.database, {
      ...options,
      internalSecret: h.settings.internalSecret,
    });
    expect(again.sections.get("global")!.digest).toBe(compiled.sections.get("global")!.digest);
    // Without the secret that opens the keys, no tunnel part at all.
    const without = JSON.parse(
      (await compile(h.deps.database, options)).sections.get("global")!.json,
    );
    expect(without.tunnels).toBeUndefined();
  });
});
