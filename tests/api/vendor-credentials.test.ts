/**
 * Vendor credentials through the api: a config checked against its descriptor's credential
 * fields (422 naming the field), secrets answered masked, and the vendor's own check of the
 * credential (a descriptor's token flow and validation call, against the vendor emulator's API)
 * before anything is stored.
 *
 * The harness admits loopback egress (OCTOPROX_EGRESS_ALLOW_LOOPBACK), since the emulator
 * listens on 127.0.0.1. Its certificate is signed by a test CA the system store does not hold:
 * a test trusts it through OCTOPROX_EGRESS_CA_FILE (the settings the call options are read
 * from), or leaves it unset, and the guard's TLS check refuses the vendor, a test of its own.
 */
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  startVendorApi,
  type VendorApi,
  vendorApiDescriptorParts,
} from "../../testkit/upstreams/vendor-emulator.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

/** Trusts the emulator's CA on the service path (a file), or the system store (undefined). */
async function trust(ca: string | undefined): Promise<void> {
  let file: string | undefined;
  if (ca !== undefined) {
    file = join(tmpdir(), `ox-vendor-ca-${process.pid}.pem`);
    await writeFile(file, ca);
  }
  (h.deps.settings as { egressCaFile?: string }).egressCaFile = file;
}

let h: ApiHarness;
let projectId: string;
let base: string;

beforeAll(async () => {
  h = await startHarness({ env: { OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true" } });
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Vendors", username: "vendors" },
  });
  projectId = project.body.id;
  base = `/api/v1/projects/${projectId}/credentials`;
});

afterAll(async () => {
  await h?.close();
});

async function storedCredentials(): Promise<{ name: string; config: Record<string, unknown> }[]> {
  return await h.deps.database.sql<{ name: string; config: Record<string, unknown> }[]>`
    select name, config from credentials where project_id = ${projectId} order by created_at`;
}

describe("a shipped vendor's credential (Oxylabs)", () => {
  test("a missing, empty or unknown field is a 422 naming it, and nothing is stored", async () => {
    const missing = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Oxylabs", provider: "oxylabs", config: { username: "shop" } },
    });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual([{
      field: "body.config.password",
      message: "is required",
    }]);

    const empty = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Oxylabs", provider: "oxylabs", config: { username: "", password: "pw" } },
    });
    expect(empty.status).toBe(422);
    expect(empty.body.detail).toEqual([{ field: "body.config.username", message: "is required" }]);

    const unknown = await h.request("POST", base, {
      token: h.tokens.editor,
      body: {
        name: "Oxylabs",
        provider: "oxylabs",
        config: { username: "shop", password: "pw", zone: "eu" },
      },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toEqual([
      { field: "body.config.zone", message: "is not a field of Oxylabs" },
    ]);

    const wrongType = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Oxylabs", provider: "oxylabs", config: { username: 7, password: "pw" } },
    });
    expect(wrongType.status).toBe(422);
    expect(wrongType.body.detail).toEqual([
      { field: "body.config.username", message: "must be text" },
    ]);

    const nobody = await h.request("POST", base, {
      token: h.tokens.editor,
      body: { name: "Nobody", provider: "nobody", config: { username: "shop" } },
    });
    expect(nobody.status).toBe(422);
    expect(nobody.body.detail).toHaveLength(1);
    expect(nobody.body.detail[0].field).toBe("body.provider");
    expect(nobody.body.detail[0].message).toMatch(/no provider nobody/);

    expect(await storedCredentials()).toEqual([]);
  });

  test("a good one is stored and answered with the password masked", async () => {
    const created = await h.request("POST", base, {
      token: h.tokens.editor,
      body: {
        name: "Oxylabs",
        provider: "OxyLabs",
        config: { username: "shop", password: "oxy-s3cret" },
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "Oxylabs",
      provider: "oxylabs",
      config: { username: "shop", password: "********" },
      has_password: true,
    });
    expect(created.text).not.toContain("oxy-s3cret");
    const read = await h.request("GET", `${base}/${created.body.id}`, { token: h.tokens.viewer });
    expect(read.body).toMatchObject({ config: { password: "********" }, has_password: true });
    expect(read.text).not.toContain("oxy-s3cret");
    const [row] = (await storedCredentials()).filter((c) => c.name === "Oxylabs");
    expect(row.config).toEqual({ username: "shop", password: "oxy-s3cret" });

    // An edit is checked against the descriptor too: the mask keeps the secret, and removing a
    // required field is refused with the stored config unchanged.
    const item = `${base}/${created.body.id}`;
    const renamed = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { username: "shop2", password: "********" } },
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body.config).toEqual({ username: "shop2", password: "********" });
    const removed = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { password: null } },
    });
    expect(removed.status).toBe(422);
    expect(removed.body.detail).toEqual([{
      field: "body.config.password",
      message: "is required",
    }]);
    const unknown = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { country: "DE" } },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0].field).toBe("body.config.country");
    const [after] = (await storedCredentials()).filter((c) => c.name === "Oxylabs");
    expect(after.config).toEqual({ username: "shop2", password: "oxy-s3cret" });

    // A viewer may read, not write.
    const viewer = await h.request("POST", base, {
      token: h.tokens.viewer,
      body: { name: "Nope", provider: "oxylabs", config: { username: "u", password: "p" } },
    });
    expect(viewer.status).toBe(403);
  });
});

describe("the vendor's own check of a credential", () => {
  let api: VendorApi;

  beforeAll(async () => {
    api = await startVendorApi({ apiKey: "right-key" });
    const stored = await h.request("POST", "/api/v1/providers", {
      token: h.tokens.admin,
      body: { descriptor: emulatorDescriptor(api), confirm_hosts: ["127.0.0.1"] },
    });
    if (stored.status !== 201) throw new Error(`descriptor not stored: ${stored.text}`);
  });

  afterAll(async () => {
    await trust(undefined);
    await api?.close();
  });

  const create = (name: string, apiKey: string) =>
    h.request("POST", base, {
      token: h.tokens.editor,
      body: { name, provider: "emulated", config: { account: "acct-1", api_key: apiKey } },
    });

  test("the catalogue says the descriptor checks credentials", async () => {
    const answer = await h.request("GET", "/api/v1/providers/emulated", {
      token: h.tokens.viewer,
    });
    expect(answer.body).toMatchObject({
      source: "custom",
      checks_credentials: true,
      egress_hosts: ["127.0.0.1"],
    });
  });

  test("a vendor whose certificate the system store does not trust is refused: 502", async () => {
    await trust(undefined);
    const before = { ...api.counts };
    const answer = await create("Untrusted", "right-key");
    expect(answer.status).toBe(502);
    expect(answer.body.error).toMatch(/^The vendor did not answer as expected: /);
    expect(answer.body.error).toContain(`${new URL(api.url).host}/auth/token could not be reached`);
    // The TLS check failed before any request: the vendor never saw the key.
    expect(api.counts).toEqual(before);
    expect((await storedCredentials()).map((c) => c.name)).not.toContain("Untrusted");
  });

  test("a key the vendor refuses is a 422 on body.config, and nothing is stored", async () => {
    await trust(api.ca);
    const before = { ...api.counts };
    const answer = await create("Wrong key", "wrong-key");
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toEqual([{
      field: "body.config",
      message: "Emulated Vendor refused the API key (the vendor answered 401)",
    }]);
    expect(answer.text).not.toContain("wrong-key");
    // The token call was refused, so no validation call followed.
    expect(api.counts.token).toBe(before.token + 1);
    expect(api.counts.me).toBe(before.me);
    expect((await storedCredentials()).map((c) => c.name)).not.toContain("Wrong key");
  });

  test("an account the vendor says is inactive is refused the same way", async () => {
    await trust(api.ca);
    api.setActive(false);
    try {
      const answer = await create("Inactive", "right-key");
      expect(answer.status).toBe(422);
      expect(answer.body.detail).toEqual([{
        field: "body.config",
        message: "Emulated Vendor refused the API key (the vendor answered 200)",
      }]);
      expect((await storedCredentials()).map((c) => c.name)).not.toContain("Inactive");
    } finally {
      api.setActive(true);
    }
  });

  test("the right key is checked with the vendor, stored, and answered masked", async () => {
    await trust(api.ca);
    const before = { ...api.counts };
    const answer = await create("Right key", "right-key");
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({
      provider: "emulated",
      config: { account: "acct-1", api_key: "********" },
      has_api_key: true,
    });
    expect(answer.text).not.toContain("right-key");
    expect(api.counts.token).toBe(before.token + 1);
    expect(api.counts.me).toBe(before.me + 1);
    const [row] = (await storedCredentials()).filter((c) => c.name === "Right key");
    expect(row.config).toEqual({ account: "acct-1", api_key: "right-key" });

    const item = `${base}/${answer.body.id}`;
    // An edit that changes a field asks the vendor again: a refused key leaves the stored one.
    const wrong = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { api_key: "stolen-key" } },
    });
    expect(wrong.status).toBe(422);
    expect(wrong.body.detail[0].field).toBe("body.config");
    const [kept] = (await storedCredentials()).filter((c) => c.name === "Right key");
    expect(kept.config).toEqual({ account: "acct-1", api_key: "right-key" });

    // An edit that changes no field (a rename, the mask sent back) asks the vendor nothing.
    const quiet = { ...api.counts };
    const renamed = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { name: "Right key (main)", config: { account: "acct-1", api_key: "********" } },
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: "Right key (main)", has_api_key: true });
    expect(api.counts).toEqual(quiet);

    // A vendor that is gone is no refusal of the key: a 502, and the stored key stays.
    await api.close();
    const down = await h.request("PATCH", item, {
      token: h.tokens.editor,
      body: { config: { account: "acct-2" } },
    });
    expect(down.status).toBe(502);
    expect(down.body.error).toMatch(/could not be reached/);
    const [still] = (await storedCredentials()).filter((c) => c.name === "Right key (main)");
    expect(still.config).toEqual({ account: "acct-1", api_key: "right-key" });
  });
});

/** A vendor described against the emulator: a token flow, then `GET /me` must say active. */
function emulatorDescriptor(api: VendorApi) {
  const parts = vendorApiDescriptorParts(api, "Emulated Vendor");
  return {
    id: "emulated",
    name: "Emulated Vendor",
    credential_fields: [
      { key: "account", label: "Account", type: "text", required: true },
      { key: "api_key", label: "API key", type: "password", secret: true, required: true },
    ],
    proxy_types: [parts.listType],
    auth: parts.auth,
    validation: parts.validation,
  };
}
