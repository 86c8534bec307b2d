/**
 * Vendor connectors through the api: the provider and credential they need, a config checked
 * against the descriptor (422 naming `body.config.<key>`) and stored with the descriptor's
 * defaults, shown in the answer with secret fields masked, the kind still refused, and the
 * sync run a created or edited vendor connector asks for.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let base: string;
let oxylabsCredential: string;
let staticCredential: string;
let brightdataCredential: string;

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Vendor pools", username: "vendor-pools" },
  });
  projectId = project.body.id;
  base = `/api/v1/projects/${projectId}/connectors`;
  const credential = async (name: string, provider: string, config: Record<string, unknown>) => {
    const answer = await h.request("POST", `/api/v1/projects/${projectId}/credentials`, {
      token: h.tokens.editor,
      body: { name, provider, config },
    });
    if (answer.status !== 201) throw new Error(`credential ${name}: ${answer.text}`);
    return answer.body.id as string;
  };
  oxylabsCredential = await credential("Oxylabs", "oxylabs", {
    username: "shop",
    password: "oxy-pass",
  });
  staticCredential = await credential("Default login", "static", { username: "u" });
  brightdataCredential = await credential("Bright Data", "brightdata", { customer_id: "c123" });
});

afterAll(async () => {
  await h?.close();
});

/** The connector ids the sync stream holds run-now requests for, oldest first. */
async function syncRequests(): Promise<string[]> {
  const entries = await h.deps.redis.xrange(h.deps.keys.jobStream(JobKind.sync), "-", "+");
  return entries.map(([, fields]) => fields[fields.indexOf("key") + 1]);
}

async function connectorNames(): Promise<string[]> {
  const rows = await h.deps.database.sql<{ name: string }[]>`
    select name from connectors where project_id = ${projectId} order by created_at`;
  return rows.map((r) => r.name);
}

const oxylabs = (name: string, config?: Record<string, unknown>) => ({
  name,
  kind: "vendor",
  provider: "oxylabs",
  credential_id: oxylabsCredential,
  ...(config === undefined ? {} : { config }),
});

describe("creating a vendor connector", () => {
  test("it needs a provider and a credential of that provider", async () => {
    const noProvider = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "No provider", kind: "vendor", credential_id: oxylabsCredential },
    });
    expect(noProvider.status).toBe(422);
    expect(noProvider.body.detail).toEqual([{
      field: "body.provider",
      message: "a vendor connector needs a provider from GET /api/v1/providers",
    }]);

    const unknown = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Unknown", kind: "vendor", provider: "nobody" },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0].field).toBe("body.provider");
    expect(unknown.body.detail[0].message).toMatch(/no provider nobody/);

    const noCredential = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "No credential", kind: "vendor", provider: "oxylabs" },
    });
    expect(noCredential.status).toBe(422);
    expect(noCredential.body.detail).toEqual([{
      field: "body.credential_id",
      message: "a vendor connector needs a oxylabs credential of this project",
    }]);

    for (
      const [credentialId, provider] of [[staticCredential, "static"], [
        brightdataCredential,
        "brightdata",
      ]]
    ) {
      const other = await h.request("POST", base, {
        token: h.tokens.editor,
        body: { ...oxylabs("Other provider"), credential_id: credentialId },
      });
      expect(other.status, provider).toBe(422);
      expect(other.body.detail, provider).toEqual([{
        field: "body.credential_id",
        message: `the credential is for ${provider}, not oxylabs`,
      }]);
    }
    expect(await connectorNames()).toEqual([]);
  });

  test("a config the descriptor refuses is a 422 naming the key; nothing is stored", async () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [{ slots: 0 }, "body.config.slots", "must be a whole number from 1 to 1000"],
      [{ slots: 2.5 }, "body.config.slots", "must be a whole number from 1 to 1000"],
      [{ session_mode: "weird" }, "body.config.session_mode", "must be pool or dynamic"],
      [{ zone: "eu" }, "body.config.zone", "is not a field of Oxylabs"],
      [
        { proxy_type: "nope" },
        "body.config.proxy_type",
        "must be one of residential, isp, datacenter, dedicated_datacenter",
      ],
      // A port type has no dynamic sessions; a dynamic connector has no slots.
      [
        { proxy_type: "isp", session_mode: "dynamic" },
        "body.config.session_mode",
        "ISP has no dynamic sessions",
      ],
      [
        { session_mode: "dynamic", slots: 5 },
        "body.config.slots",
        "a dynamic-sessions connector has one row, rendered per request",
      ],
    ];
    const before = (await syncRequests()).length;
    for (const [config, field, message] of cases) {
      const answer = await h.request("POST", base, {
        token: h.tokens.editor,
        body: oxylabs("Refused", config),
      });
      expect(answer.status, JSON.stringify(config)).toBe(422);
      expect(answer.body.detail, JSON.stringify(config)).toEqual([{ field, message }]);
    }
    const notAnObject = await h.request("POST", base, {
      token: h.tokens.editor,
      body: oxylabs("Refused", "slots=3" as unknown as Record<string, unknown>),
    });
    expect(notAnObject.status).toBe(422);
    expect(notAnObject.body.detail[0].field).toBe("body.config");
    expect(await connectorNames()).toEqual([]);
    expect((await syncRequests()).length).toBe(before);
  });

  test("a good one is stored with the descriptor's defaults and asks for a sync", async () => {
    const before = await syncRequests();
    const dynamic = await h.request("POST", base, {
      token: h.tokens.editor,
      body: oxylabs("Residential dynamic", { session_mode: "dynamic" }),
    });
    expect(dynamic.status).toBe(201);
    expect(dynamic.body).toMatchObject({
      kind: "vendor",
      provider: "oxylabs",
      credential_id: oxylabsCredential,
      config: { proxy_type: "residential", session_mode: "dynamic" },
    });
    expect(dynamic.body.config).not.toHaveProperty("slots");

    const pool = await h.request("POST", base, {
      token: h.tokens.editor,
      body: oxylabs("Residential pool"),
    });
    expect(pool.status).toBe(201);
    expect(pool.body.config).toEqual({
      proxy_type: "residential",
      session_mode: "pool",
      slots: 10,
    });

    const isp = await h.request("POST", base, {
      token: h.tokens.editor,
      body: oxylabs("ISP", { proxy_type: "isp", slots: 3 }),
    });
    expect(isp.status).toBe(201);
    expect(isp.body.config).toEqual({ proxy_type: "isp", slots: 3 });

    // What the answer shows is what is stored, and what a read answers.
    const [row] = await h.deps.database.sql<{ config: unknown }[]>`
      select config from connectors where id = ${isp.body.id}`;
    expect(row.config).toEqual({ proxy_type: "isp", slots: 3 });
    const read = await h.request("GET", `${base}/${dynamic.body.id}`, { token: h.tokens.viewer });
    expect(read.body.config).toEqual({ proxy_type: "residential", session_mode: "dynamic" });

    // Each vendor connector asked for a sync run of its own at once; a static one asks none.
    expect((await syncRequests()).slice(before.length)).toEqual([
      dynamic.body.id,
      pool.body.id,
      isp.body.id,
    ]);
    const plain = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Own list", kind: "static" },
    });
    expect(plain.status).toBe(201);
    expect(plain.body.config).toEqual({});
    expect((await syncRequests()).length).toBe(before.length + 3);
  });

  test("a secret connector field is required, never answered, and kept by its mask", async () => {
    const body = (config: Record<string, unknown>) => ({
      name: "Bright Data residential",
      kind: "vendor",
      provider: "brightdata",
      credential_id: brightdataCredential,
      config,
    });
    const missing = await h.request("POST", base, {
      token: h.tokens.editor,
      body: body({ zone: "res_zone" }),
    });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual([{
      field: "body.config.zone_password",
      message: "is required",
    }]);
    const badZone = await h.request("POST", base, {
      token: h.tokens.editor,
      body: body({ zone: "res-zone", zone_password: "zone-s3cret" }),
    });
    expect(badZone.status).toBe(422);
    expect(badZone.body.detail).toEqual([{
      field: "body.config.zone",
      message: "is not in the expected form: The zone's name: letters, digits and _",
    }]);

    const created = await h.request("POST", base, {
      token: h.tokens.editor,
      body: body({ zone: "res_zone", zone_password: "zone-s3cret" }),
    });
    expect(created.status).toBe(201);
    expect(created.body.config).toEqual({
      zone: "res_zone",
      zone_password: "********",
      proxy_type: "residential",
      session_mode: "pool",
      slots: 10,
    });
    expect(created.text).not.toContain("zone-s3cret");
    const listed = await h.request("GET", base, { token: h.tokens.viewer });
    expect(listed.text).not.toContain("zone-s3cret");

    // The answer's config sent back (the mask with it) keeps the stored password.
    const item = `${base}/${created.body.id}`;
    const edited = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { ...created.body.config, slots: 4 } },
    });
    expect(edited.status).toBe(200);
    expect(edited.body.config).toMatchObject({ zone_password: "********", slots: 4 });
    const [row] = await h.deps.database.sql<{ config: Record<string, unknown> }[]>`
      select config from connectors where id = ${created.body.id}`;
    expect(row.config).toMatchObject({ zone_password: "zone-s3cret", slots: 4 });
  });
});

describe("editing a vendor connector", () => {
  let item: string;
  let id: string;

  beforeAll(async () => {
    const created = await h.request("POST", base, {
      token: h.tokens.editor,
      body: oxylabs("Edited", { session_mode: "dynamic" }),
    });
    id = created.body.id;
    item = `${base}/${id}`;
  });

  test("a config edit is checked against the descriptor and asks for a sync", async () => {
    const before = (await syncRequests()).length;
    for (
      const [config, field] of [
        [{ slots: 0 }, "body.config.slots"],
        [{ session_mode: "weird" }, "body.config.session_mode"],
        [{ region: "eu" }, "body.config.region"],
        [{ proxy_type: "nope" }, "body.config.proxy_type"],
      ] as const
    ) {
      const answer = await h.request("PATCH", item, { token: h.tokens.editor, body: { config } });
      expect(answer.status, JSON.stringify(config)).toBe(422);
      expect(answer.body.detail.map((d: { field: string }) => d.field)).toEqual([field]);
    }
    const unchanged = await h.request("GET", item, { token: h.tokens.viewer });
    expect(unchanged.body.config).toEqual({ proxy_type: "residential", session_mode: "dynamic" });
    expect((await syncRequests()).length).toBe(before);

    // The config is replaced whole, and the descriptor fills what it leaves out.
    const edited = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { proxy_type: "datacenter" } },
    });
    expect(edited.status).toBe(200);
    expect(edited.body.config).toEqual({ proxy_type: "datacenter", slots: 10 });
    expect((await syncRequests()).slice(before)).toEqual([id]);

    // The same config again changes nothing and asks for nothing.
    const same = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { proxy_type: "datacenter", slots: 10 } },
    });
    expect(same.status).toBe(200);
    expect(same.body.updated_at).toBe(edited.body.updated_at);
    expect((await syncRequests()).length).toBe(before + 1);
  });

  test("the provider and the kind cannot change; the credential stays one of its provider", async () => {
    const provider = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { provider: "brightdata" },
    });
    expect(provider.status).toBe(422);
    expect(provider.body.detail).toEqual([{
      field: "body.provider",
      message: "cannot be changed; create another connector",
    }]);
    const kind = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { kind: "static" },
    });
    expect(kind.status).toBe(422);
    expect(kind.body.detail[0].field).toBe("body.kind");

    const cleared = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { credential_id: null },
    });
    expect(cleared.status).toBe(422);
    expect(cleared.body.detail[0].field).toBe("body.credential_id");
    const other = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { credential_id: staticCredential },
    });
    expect(other.status).toBe(422);
    expect(other.body.detail).toEqual([{
      field: "body.credential_id",
      message: "the credential is for static, not oxylabs",
    }]);

    const read = await h.request("GET", item, { token: h.tokens.viewer });
    expect(read.body).toMatchObject({ provider: "oxylabs", credential_id: oxylabsCredential });
  });
});

describe("what a vendor connector does not take", () => {
  test("a cloud connector names a cloud, not a vendor", async () => {
    const answer = await h.request("POST", base, {
      token: h.tokens.editor,
      body: {
        name: "A cloud",
        kind: "cloud",
        provider: "oxylabs",
        credential_id: oxylabsCredential,
      },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toEqual([{
      field: "body.provider",
      message: "a cloud connector's provider is one of aws, gcp, azure",
    }]);
    expect(await connectorNames()).not.toContain("A cloud");
  });

  test("a provider_api connector does not take a vendor's provider or credential", async () => {
    const answer = await h.request("POST", base, {
      token: h.tokens.editor,
      body: {
        name: "A provider_api",
        kind: "provider_api",
        provider: "oxylabs",
        credential_id: oxylabsCredential,
      },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toEqual([{
      field: "body.provider",
      message: "a provider_api connector's provider is provider_api; leave it out",
    }]);
    expect(await connectorNames()).not.toContain("A provider_api");
  });

  test("a static connector takes neither a provider nor a config", async () => {
    const withConfig = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Static with config", kind: "static", config: { slots: 1 } },
    });
    expect(withConfig.status).toBe(422);
    expect(withConfig.body.detail).toEqual([{
      field: "body.config",
      message: "a static connector takes no config",
    }]);
    const withProvider = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Static with provider", kind: "static", provider: "oxylabs" },
    });
    expect(withProvider.status).toBe(422);
    expect(withProvider.body.detail).toEqual([{
      field: "body.provider",
      message: "only vendor connectors name a provider",
    }]);
    expect(await connectorNames()).not.toContain("Static with config");

    const created = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Static list", kind: "static" },
    });
    const edit = await h.request("PATCH", `${base}/${created.body.id}`, {
      token: h.tokens.editor,
      body: { config: { proxy_type: "residential" } },
    });
    expect(edit.status).toBe(422);
    expect(edit.body.detail[0].field).toBe("body.config");
  });
});
