/**
 * The provider catalogue and admins' custom descriptors through the api: what a viewer reads of
 * the shipped vendors, and what an admin may store (validated whole, egress hosts confirmed and
 * vetted, versioned, audited, deleted with the connectors it leaves behind named).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createUser } from "../../control/services/users.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
/** A second admin, so the audit log's actor is seen to follow who acted. */
let opsToken: string;

const SHIPPED = ["brightdata", "decodo", "iproyal", "netnut", "oxylabs", "soax", "webshare"];

beforeAll(async () => {
  h = await startHarness();
  await createUser(h.deps, { username: "ops", password: "password-ops", role: "admin" });
  const login = await h.request("POST", "/api/v1/auth/login", {
    body: { username: "ops", password: "password-ops" },
  });
  opsToken = login.body.access_token;
});

afterAll(async () => {
  await h?.close();
});

/** A list vendor whose listing call reaches `host`: the one egress host to confirm. */
function listDescriptor(id: string, host = "api.acme-proxies.example", name = "Acme Proxies") {
  return {
    id,
    name,
    credential_fields: [
      { key: "api_key", label: "API key", type: "password", secret: true, required: true },
    ],
    proxy_types: [{
      id: "proxy_list",
      name: "Proxy list",
      mode: "list",
      call: {
        url: `https://${host}/v1/proxies`,
        headers: { Authorization: "Token {credential.api_key}" },
        items: "results",
      },
      item: { host: "{item.host}", port: "{item.port}" },
    }],
  };
}

/** Whether the catalogue, the descriptor's page and its history know `id`. */
async function stored(id: string): Promise<boolean> {
  const list = await h.request("GET", "/api/v1/providers", { token: h.tokens.viewer });
  const listed = list.body.some((p: { id: string }) => p.id === id);
  const one = await h.request("GET", `/api/v1/providers/${id}`, { token: h.tokens.viewer });
  const history = await h.request("GET", `/api/v1/providers/${id}/history`, {
    token: h.tokens.admin,
  });
  const [{ n }] = await h.deps.database.sql`
    select count(*)::int as n from provider_descriptors where id = ${id}`;
  const known = [listed, one.status === 200, history.status === 200, n > 0];
  // The four views agree, or the test says which one is off.
  expect(new Set(known).size, `catalogue, page, history, row: ${known}`).toBe(1);
  return known[0];
}

describe("the catalogue", () => {
  test("a viewer lists the shipped vendors with their fields and proxy types", async () => {
    const answer = await h.request("GET", "/api/v1/providers", { token: h.tokens.viewer });
    expect(answer.status).toBe(200);
    const builtin = answer.body.filter((p: { source: string }) => p.source === "builtin");
    expect(builtin.map((p: { id: string }) => p.id)).toEqual(SHIPPED);
    for (const provider of builtin) {
      expect(provider.version).toBe(1);
      expect(provider.credential_fields.length, provider.id).toBeGreaterThan(0);
      expect(Array.isArray(provider.connector_fields), provider.id).toBe(true);
      expect(provider.proxy_types.length, provider.id).toBeGreaterThan(0);
      for (const type of provider.proxy_types) {
        expect(["session", "port", "list"]).toContain(type.mode);
        expect(typeof type.dynamic_sessions).toBe("boolean");
        expect(Object.keys(type.renders).sort()).toEqual([
          "city",
          "country",
          "session_time",
          "state",
        ]);
      }
    }
    const byId = Object.fromEntries(builtin.map((p: { id: string }) => [p.id, p]));

    // Oxylabs: a username and a secret password; residential sessions render every option.
    const oxylabs = byId.oxylabs;
    expect(oxylabs.name).toBe("Oxylabs");
    expect(oxylabs.credential_fields.map((f: { key: string }) => f.key)).toEqual([
      "username",
      "password",
    ]);
    expect(oxylabs.credential_fields[1]).toMatchObject({ type: "password", secret: true });
    expect(oxylabs.proxy_types.map((t: { id: string; mode: string }) => `${t.id}:${t.mode}`))
      .toEqual(["residential:session", "isp:port", "datacenter:port", "dedicated_datacenter:port"]);
    expect(oxylabs.proxy_types[0]).toMatchObject({
      host: "pr.oxylabs.io",
      port: 7777,
      dynamic_sessions: true,
      state_countries: ["US"],
      session_time: { unit: "minutes", min_minutes: 1, max_minutes: 1440, default_minutes: 10 },
      renders: { country: true, state: true, city: true, session_time: true },
    });
    expect(oxylabs.proxy_types[1]).toMatchObject({
      host: "isp.oxylabs.io",
      port: 8001,
      dynamic_sessions: false,
      renders: { country: false, state: false, city: false, session_time: false },
    });
    expect(oxylabs.egress_hosts).toEqual([]);
    expect(oxylabs.checks_credentials).toBe(false);

    // Bright Data: the zone and its password are the connector's; no session time to render.
    expect(byId.brightdata.connector_fields.map((f: { key: string }) => f.key)).toEqual([
      "zone",
      "zone_password",
    ]);
    expect(byId.brightdata.connector_fields[1]).toMatchObject({ secret: true, required: true });
    expect(byId.brightdata.proxy_types[0].renders).toEqual({
      country: true,
      state: true,
      city: true,
      session_time: false,
    });
    // Decodo's datacenter is a port pool; Webshare mirrors a list over its API host.
    expect(byId.decodo.proxy_types[1]).toMatchObject({ id: "datacenter", mode: "port" });
    expect(byId.webshare.proxy_types).toEqual([
      expect.objectContaining({ id: "proxy_list", mode: "list", dynamic_sessions: false }),
    ]);
    expect(byId.webshare.egress_hosts).toEqual(["proxy.webshare.io"]);
    // No answer carries the calls' templates (an API key header, say): only the hosts.
    expect(answer.text).not.toContain("{credential.api_key}");
  });

  test("one descriptor is answered whole; an unknown id is a 404", async () => {
    const answer = await h.request("GET", "/api/v1/providers/oxylabs", { token: h.tokens.viewer });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ id: "oxylabs", source: "builtin", version: 1 });
    expect(answer.body.descriptor.id).toBe("oxylabs");
    expect(answer.body.descriptor.proxy_types[0].username.parts[0]).toEqual({
      text: "customer-{credential.username}",
    });
    const missing = await h.request("GET", "/api/v1/providers/nobody", { token: h.tokens.viewer });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatch(/Provider/);
    const anonymous = await h.request("GET", "/api/v1/providers");
    expect(anonymous.status).toBe(401);
  });
});

describe("custom descriptors", () => {
  test("only an admin stores one; an editor and a viewer get 403 and nothing is stored", async () => {
    for (const role of ["editor", "viewer"] as const) {
      const answer = await h.request("POST", "/api/v1/providers", {
        token: h.tokens[role],
        body: {
          descriptor: listDescriptor("not-mine"),
          confirm_hosts: ["api.acme-proxies.example"],
        },
      });
      expect(answer.status, role).toBe(403);
    }
    expect(await stored("not-mine")).toBe(false);
  });

  test("a call host left unconfirmed is a 409 naming it, and nothing is stored", async () => {
    const answer = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor("unconfirmed"), confirm_hosts: ["other.example"] },
    });
    expect(answer.status).toBe(409);
    expect(answer.body.unconfirmed_hosts).toEqual(["api.acme-proxies.example"]);
    expect(answer.body.error).toMatch(/confirm_hosts/);
    expect(await stored("unconfirmed")).toBe(false);
  });

  test("a descriptor object with its hosts confirmed is stored as version 1", async () => {
    const answer = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      // Hosts are confirmed regardless of case and surrounding space.
      body: { descriptor: listDescriptor("acme"), confirm_hosts: [" API.Acme-Proxies.example "] },
    });
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({
      id: "acme",
      name: "Acme Proxies",
      source: "custom",
      version: 1,
      egress_hosts: ["api.acme-proxies.example"],
      checks_credentials: false,
      proxy_types: [{ id: "proxy_list", mode: "list", dynamic_sessions: false }],
    });
    expect(await stored("acme")).toBe(true);
    const list = await h.request("GET", "/api/v1/providers", { token: h.tokens.viewer });
    expect(list.body.find((p: { id: string }) => p.id === "acme")?.source).toBe("custom");

    const again = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor("acme"), confirm_hosts: ["api.acme-proxies.example"] },
    });
    expect(again.status).toBe(400);
    expect(again.body.error).toMatch(/exists/);
  });

  test("YAML (or JSON) text is read as a descriptor; text that is neither is a 422", async () => {
    const yaml = [
      "id: yaml-vendor",
      "name: YAML Vendor",
      "credential_fields:",
      "  - key: username",
      "    label: Username",
      "    type: text",
      "    required: true",
      "proxy_types:",
      "  - id: residential",
      "    name: Residential",
      "    mode: session",
      "    host: gw.yaml-vendor.example",
      "    port: 9000",
      "    dynamic_sessions: true",
      '    username: "{credential.username}-country-{country|lower}"',
      "",
    ].join("\n");
    const answer = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: yaml },
    });
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({
      id: "yaml-vendor",
      source: "custom",
      version: 1,
      egress_hosts: [],
      proxy_types: [{
        id: "residential",
        mode: "session",
        host: "gw.yaml-vendor.example",
        port: 9000,
        dynamic_sessions: true,
        max_slots: 1000,
        renders: { country: true, state: false, city: false, session_time: false },
      }],
    });
    const json = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: JSON.stringify({ ...listDescriptor("json-vendor"), proxy_types: [] }) },
    });
    expect(json.status).toBe(422);
    expect(json.body.detail).toContainEqual({
      field: "body.descriptor.proxy_types",
      message: "a descriptor needs a proxy type",
    });

    const garbage = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: "id: [unclosed" },
    });
    expect(garbage.status).toBe(422);
    expect(garbage.body.detail).toEqual([
      { field: "body.descriptor", message: "is not valid YAML or JSON" },
    ]);
    expect(await stored("json-vendor")).toBe(false);
  });

  test("a call to a private, metadata or loopback host is a 422, confirmed or not", async () => {
    const cases = [
      { id: "to-private", url: "https://10.0.0.1/x", why: /private/ },
      { id: "to-metadata-ip", url: "https://169.254.169.254/", why: /metadata/ },
      { id: "to-metadata-name", url: "https://metadata.google.internal/", why: /metadata/ },
      { id: "to-loopback", url: "https://localhost/", why: /loopback/ },
    ];
    for (const { id, url, why } of cases) {
      const host = new URL(url).hostname;
      const descriptor = listDescriptor(id, host);
      descriptor.proxy_types[0].call.url = url;
      const answer = await h.request("POST", "/api/v1/providers", {
        token: h.tokens.admin,
        body: { descriptor, confirm_hosts: [host] },
      });
      expect(answer.status, url).toBe(422);
      expect(answer.body.detail, url).toHaveLength(1);
      expect(answer.body.detail[0].field, url).toBe("body.descriptor");
      expect(answer.body.detail[0].message, url).toContain(host);
      expect(answer.body.detail[0].message, url).toMatch(why);
      expect(await stored(id), url).toBe(false);
    }
  });

  test("a shipped vendor's id cannot be taken", async () => {
    const answer = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor("oxylabs"), confirm_hosts: ["api.acme-proxies.example"] },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toEqual([
      { field: "body.descriptor.id", message: "oxylabs is a shipped descriptor's id" },
    ]);
    const oxylabs = await h.request("GET", "/api/v1/providers/oxylabs", {
      token: h.tokens.viewer,
    });
    expect(oxylabs.body).toMatchObject({ name: "Oxylabs", source: "builtin" });
  });

  test("an invalid descriptor is a 422 naming each field at fault; nothing is stored", async () => {
    const descriptor = {
      id: "broken",
      name: "Broken",
      proxy_types: [
        { id: "a", name: "A", mode: "weird", host: "gw.example", port: 1 },
        { id: "b", name: "B", mode: "session", port: 2 },
        { id: "c", name: "C", mode: "port", host: "gw.example", port: 70000 },
      ],
    };
    const answer = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor },
    });
    expect(answer.status).toBe(422);
    const fields = answer.body.detail.map((d: { field: string }) => d.field);
    expect(fields).toContain("body.descriptor.proxy_types.0.mode");
    expect(fields).toContain("body.descriptor.proxy_types.1");
    expect(fields).toContain("body.descriptor.proxy_types.2.port");
    expect(answer.body.detail).toContainEqual({
      field: "body.descriptor.proxy_types.0.mode",
      message: "mode must be one of session, port, list",
    });
    expect(answer.body.detail).toContainEqual({
      field: "body.descriptor.proxy_types.1",
      message: "session and port types need a host",
    });

    // A template naming a field the descriptor lacks is a rule over the whole document: it is
    // answered on body.descriptor with the type and template it is in.
    const template = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: {
        descriptor: {
          id: "broken",
          name: "Broken",
          proxy_types: [{
            id: "res",
            name: "R",
            mode: "session",
            host: "gw.example",
            port: 1,
            username: "{credential.nope}",
          }],
        },
      },
    });
    expect(template.status).toBe(422);
    expect(template.body.detail).toEqual([{
      field: "body.descriptor",
      message: "proxy type res username: {credential.nope} names no credential field",
    }]);

    const notADescriptor = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: 42 },
    });
    expect(notADescriptor.status).toBe(422);
    expect(notADescriptor.body.detail[0].field).toBe("body.descriptor");
    expect(await stored("broken")).toBe(false);
  });

  test("PUT bumps the version; the audit log names each save and delete with its admin", async () => {
    const created = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor("audited"), confirm_hosts: ["api.acme-proxies.example"] },
    });
    expect(created.status).toBe(201);

    // An editor may not replace it, nor read its history.
    const editorPut = await h.request("PUT", "/api/v1/providers/audited", {
      token: h.tokens.editor,
      body: {
        descriptor: listDescriptor("audited", undefined, "Hijacked"),
        confirm_hosts: ["api.acme-proxies.example"],
      },
    });
    expect(editorPut.status).toBe(403);
    const editorHistory = await h.request("GET", "/api/v1/providers/audited/history", {
      token: h.tokens.editor,
    });
    expect(editorHistory.status).toBe(403);

    // A new host must be confirmed again: refused, the stored version stays.
    const moved = await h.request("PUT", "/api/v1/providers/audited", {
      token: opsToken,
      body: {
        descriptor: listDescriptor("audited", "api.elsewhere.example"),
        confirm_hosts: ["api.acme-proxies.example"],
      },
    });
    expect(moved.status).toBe(409);
    expect(moved.body.unconfirmed_hosts).toEqual(["api.elsewhere.example"]);
    // The id cannot change through a PUT.
    const renamed = await h.request("PUT", "/api/v1/providers/audited", {
      token: opsToken,
      body: { descriptor: listDescriptor("other-id"), confirm_hosts: ["api.acme-proxies.example"] },
    });
    expect(renamed.status).toBe(422);
    expect(renamed.body.detail[0].field).toBe("body.descriptor.id");
    const still = await h.request("GET", "/api/v1/providers/audited", { token: h.tokens.viewer });
    expect(still.body).toMatchObject({ version: 1, name: "Acme Proxies" });

    const updated = await h.request("PUT", "/api/v1/providers/audited", {
      token: opsToken,
      body: {
        descriptor: listDescriptor("audited", "api.elsewhere.example", "Acme Proxies v2"),
        confirm_hosts: ["api.elsewhere.example"],
      },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      version: 2,
      name: "Acme Proxies v2",
      egress_hosts: ["api.elsewhere.example"],
    });
    const read = await h.request("GET", "/api/v1/providers/audited", { token: h.tokens.viewer });
    expect(read.body).toMatchObject({ version: 2, name: "Acme Proxies v2" });
    expect(read.body.descriptor.proxy_types[0].call.url).toBe(
      "https://api.elsewhere.example/v1/proxies",
    );

    const deleted = await h.request("DELETE", "/api/v1/providers/audited", { token: opsToken });
    expect(deleted.status).toBe(200);

    const history = await h.request("GET", "/api/v1/providers/audited/history", {
      token: h.tokens.admin,
    });
    expect(history.status).toBe(200);
    expect(
      history.body.map((e: { version: number; action: string; actor: string }) =>
        `${e.version} ${e.action} ${e.actor}`
      ),
    ).toEqual(["2 deleted ops", "2 updated ops", "1 created admin"]);
    expect(history.body[0].descriptor).toBeNull();
    expect(history.body[1].descriptor.name).toBe("Acme Proxies v2");
    expect(history.body[2].descriptor.name).toBe("Acme Proxies");
    for (const entry of history.body) expect(Date.parse(entry.at)).not.toBeNaN();

    // Unknown ids: nothing to replace, delete or show.
    const ghost = await h.request("PUT", "/api/v1/providers/ghost", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor("ghost"), confirm_hosts: ["api.acme-proxies.example"] },
    });
    expect(ghost.status).toBe(404);
    expect(
      (await h.request("DELETE", "/api/v1/providers/ghost", { token: h.tokens.admin }))
        .status,
    ).toBe(404);
    expect(
      (await h.request("GET", "/api/v1/providers/ghost/history", { token: h.tokens.admin }))
        .status,
    ).toBe(404);
    // Shipped descriptors are not an admin's to replace or delete.
    const shippedPut = await h.request("PUT", "/api/v1/providers/oxylabs", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor("oxylabs"), confirm_hosts: ["api.acme-proxies.example"] },
    });
    expect(shippedPut.status).toBe(422);
    const shippedDelete = await h.request("DELETE", "/api/v1/providers/oxylabs", {
      token: h.tokens.admin,
    });
    expect(shippedDelete.status).toBe(404);
    expect(
      (await h.request("GET", "/api/v1/providers/oxylabs", { token: h.tokens.viewer }))
        .status,
    ).toBe(200);
  });

  test("DELETE names the connectors left without a provider; it leaves the catalogue", async () => {
    const created = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: listDescriptor("leaving"), confirm_hosts: ["api.acme-proxies.example"] },
    });
    expect(created.status).toBe(201);
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Leaving", username: "leaving" },
    });
    const base = `/api/v1/projects/${project.body.id}`;
    const credential = await h.request("POST", `${base}/credentials`, {
      token: h.tokens.editor,
      body: { name: "Acme key", provider: "leaving", config: { api_key: "acme-secret-key" } },
    });
    expect(credential.status).toBe(201);
    expect(credential.body).toMatchObject({ config: { api_key: "********" }, has_api_key: true });
    const names = ["Zeta pool", "Alpha pool"];
    for (const name of names) {
      const connector = await h.request("POST", `${base}/connectors`, {
        token: h.tokens.editor,
        body: { name, kind: "vendor", provider: "leaving", credential_id: credential.body.id },
      });
      expect(connector.status, connector.text).toBe(201);
    }
    const editor = await h.request("DELETE", "/api/v1/providers/leaving", {
      token: h.tokens.editor,
    });
    expect(editor.status).toBe(403);
    expect(await stored("leaving")).toBe(true);

    const deleted = await h.request("DELETE", "/api/v1/providers/leaving", {
      token: h.tokens.admin,
    });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({
      deleted: "leaving",
      orphaned_connectors: ["Alpha pool", "Zeta pool"],
    });
    const list = await h.request("GET", "/api/v1/providers", { token: h.tokens.viewer });
    expect(list.body.map((p: { id: string }) => p.id)).not.toContain("leaving");
    expect(
      (await h.request("GET", "/api/v1/providers/leaving", { token: h.tokens.viewer }))
        .status,
    ).toBe(404);
    // The connectors stay (left out of the feed), and the credential's secret stays hidden.
    const connectors = await h.request("GET", `${base}/connectors`, { token: h.tokens.viewer });
    expect(connectors.body.map((c: { name: string }) => c.name)).toEqual(names);
    const credentials = await h.request("GET", `${base}/credentials`, { token: h.tokens.viewer });
    expect(credentials.text).not.toContain("acme-secret-key");
    // A new vendor connector cannot name the gone provider.
    const late = await h.request("POST", `${base}/connectors`, {
      token: h.tokens.editor,
      body: {
        name: "Late",
        kind: "vendor",
        provider: "leaving",
        credential_id: credential.body.id,
      },
    });
    expect(late.status).toBe(422);
    expect(late.body.detail[0].field).toBe("body.provider");
    expect(
      (await h.request("DELETE", "/api/v1/providers/leaving", { token: h.tokens.admin }))
        .status,
    ).toBe(404);
  });
});
