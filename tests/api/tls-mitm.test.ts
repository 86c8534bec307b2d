/**
 * A project's TLS interception fields through every way in: the api's create and edit, a
 * configuration file, and what the feed carries. One rule holds on each: the mode keeps the
 * browser it uses and clears it otherwise, a write lacking one the mode needs is refused, and the
 * browser-grade modes are a 422 with the reason (this build cannot serve them). The bypass list
 * is stored as the gateway matches it: lower case, IDNA ASCII, deduplicated, no port, no
 * wildcard but the leading dot.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { SAFARI_UNAVAILABLE } from "../../control/model/tls-mitm.ts";
import { settleProject } from "../../control/services/projects.ts";
import { compile } from "../../control/feed/compile.ts";
import type { GlobalSection } from "../../shared/feed/models.ts";
import { deriveFeedKeys } from "../../shared/feed/codec.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";

let h: ApiHarness;

beforeAll(async () => {
  h = await startHarness();
});

afterAll(async () => {
  await h?.close();
});

const create = (body: Record<string, unknown>) =>
  h.request("POST", "/api/v1/projects", { token: h.tokens.editor, body });
const edit = (id: string, body: Record<string, unknown>) =>
  h.request("PATCH", `/api/v1/projects/${id}`, { token: h.tokens.editor, body });
const stored = async (id: string) => {
  const [row] = await h.deps.database.sql`
    select tls_mitm_mode, tls_mitm_browser, tls_mitm_bypass from projects where id = ${id}`;
  return row;
};

const noSafari = {
  field: "body.tls_mitm_browser",
  message: `cannot be safari: ${SAFARI_UNAVAILABLE}`,
};

describe("the api", () => {
  it("creates with interception off, no browser, no bypass; plain with a bypass list", async () => {
    const plainDefault = await create({ name: "Off", username: "off" });
    expect(plainDefault.status).toBe(201);
    expect(plainDefault.body).toMatchObject({
      tls_mitm_mode: "off",
      tls_mitm_browser: null,
      tls_mitm_bypass: [],
    });
    const made = await create({
      name: "Plain",
      username: "plain",
      tls_mitm_mode: "plain",
      tls_mitm_bypass: [
        " Bank.Example. ",
        ".Pinned.example",
        "bücher.example",
        "bank.example",
        "2001:DB8::1",
      ],
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      tls_mitm_mode: "plain",
      tls_mitm_browser: null,
      tls_mitm_bypass: ["bank.example", ".pinned.example", "xn--bcher-kva.example", "2001:db8::1"],
    });
    const read = await h.request("GET", `/api/v1/projects/${made.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(read.body.tls_mitm_bypass).toEqual(made.body.tls_mitm_bypass);
  });

  it("takes the browser-grade modes; override_ua needs a browser, and Safari is refused", async () => {
    const before = (await h.request("GET", "/api/v1/projects", { token: h.tokens.viewer })).body;
    const matched = await create({ name: "Match", username: "match", tls_mitm_mode: "match_ua" });
    expect(matched.status).toBe(201);
    expect(matched.body).toMatchObject({ tls_mitm_mode: "match_ua", tls_mitm_browser: null });
    const overridden = await create({
      name: "Override",
      username: "override",
      tls_mitm_mode: "override_ua",
    });
    expect(overridden.status).toBe(422);
    expect(overridden.body.detail).toEqual([
      {
        field: "body.tls_mitm_browser",
        message: "is required by tls_mitm_mode override_ua: one of chrome, firefox, edge, random",
      },
    ]);
    const safari = await create({
      name: "Override",
      username: "override",
      tls_mitm_mode: "override_ua",
      tls_mitm_browser: "safari",
    });
    expect(safari.status).toBe(422);
    expect(safari.body.detail).toEqual([noSafari]);
    const after = (await h.request("GET", "/api/v1/projects", { token: h.tokens.viewer })).body;
    expect(after.length).toBe(before.length + 1);

    const project = await create({ name: "Edited", username: "edited", tls_mitm_mode: "plain" });
    const refused = await edit(project.body.id, {
      tls_mitm_mode: "override_ua",
      tls_mitm_browser: "safari",
    });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toEqual([noSafari]);
    expect(await stored(project.body.id)).toMatchObject({ tls_mitm_mode: "plain" });
    const edge = await edit(project.body.id, {
      tls_mitm_mode: "override_ua",
      tls_mitm_browser: "edge",
    });
    expect(edge.status).toBe(200);
    expect(await stored(project.body.id)).toMatchObject({
      tls_mitm_mode: "override_ua",
      tls_mitm_browser: "edge",
    });
  });

  it("clears the browser under a mode that does not use it, and says what it stored", async () => {
    const made = await create({
      name: "Browser",
      username: "browser",
      tls_mitm_mode: "plain",
      tls_mitm_browser: "chrome",
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ tls_mitm_mode: "plain", tls_mitm_browser: null });
    const before = (await h.changes()).length;
    // A browser alone under plain: nothing the rule keeps, so nothing changes, no entry.
    const same = await edit(made.body.id, { tls_mitm_browser: "safari" });
    expect(same.status).toBe(200);
    expect(same.body.tls_mitm_browser).toBeNull();
    expect(same.body.updated_at).toBe(made.body.updated_at);
    expect((await h.changes()).length).toBe(before);
    // Off keeps the bypass list (ready for later); the feed leaves it out.
    const off = await edit(made.body.id, {
      tls_mitm_mode: "off",
      tls_mitm_bypass: ["keep.example"],
    });
    expect(off.body).toMatchObject({
      tls_mitm_mode: "off",
      tls_mitm_browser: null,
      tls_mitm_bypass: ["keep.example"],
    });
    expect(await stored(made.body.id)).toEqual({
      tls_mitm_mode: "off",
      tls_mitm_browser: null,
      tls_mitm_bypass: ["keep.example"],
    });
  });

  it("names each bypass entry it refuses by its index, and a list past 1000", async () => {
    const project = await create({ name: "Bypass", username: "bypass" });
    const bad = await edit(project.body.id, {
      tls_mitm_bypass: ["ok.example", "*.example.com", "example.com:443", "a b", ".1.2.3.4", ""],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toEqual([
      {
        field: "body.tls_mitm_bypass.1",
        message: "must not hold a wildcard: write .example.com for every name under example.com",
      },
      {
        field: "body.tls_mitm_bypass.2",
        message: "must not hold a port: write the host alone, such as example.com",
      },
      {
        field: "body.tls_mitm_bypass.3",
        message: expect.stringContaining("must be a host name"),
      },
      {
        field: "body.tls_mitm_bypass.4",
        message: "an IP address matches itself only: write it without the leading dot",
      },
      { field: "body.tls_mitm_bypass.5", message: "must not be empty" },
    ]);
    const many = Array.from({ length: 1001 }, (_, i) => `h${i}.example`);
    const tooMany = await edit(project.body.id, { tls_mitm_bypass: many });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail).toEqual([
      { field: "body.tls_mitm_bypass", message: "must hold at most 1000 hosts" },
    ]);
    const wrongMode = await edit(project.body.id, { tls_mitm_mode: "on" });
    expect(wrongMode.body.detail).toEqual([{
      field: "body.tls_mitm_mode",
      message: "must be one of off, plain, match_ua, override_ua",
    }]);
    const wrongBrowser = await edit(project.body.id, { tls_mitm_browser: "opera" });
    expect(wrongBrowser.body.detail[0].field).toBe("body.tls_mitm_browser");
    expect(await stored(project.body.id)).toEqual({
      tls_mitm_mode: "off",
      tls_mitm_browser: null,
      tls_mitm_bypass: [],
    });
  });

  it("reaches the feed as the gateway applies it: the mode with its list", async () => {
    const project = await create({
      name: "Fed",
      username: "fed",
      tls_mitm_mode: "plain",
      tls_mitm_bypass: [".Bank.example"],
    });
    const compiled = await compile(h.deps.database, {
      keys: await deriveFeedKeys("tls-mitm-test-secret-0123456789abcdef"),
      defaultStrategy: "round_robin",
      providers: new ProviderRegistry(),
      projectId: project.body.id,
    });
    const global = JSON.parse(compiled.sections.get("global")!.json) as GlobalSection;
    expect(global.projects[0].tls_mitm).toEqual({
      mode: "plain",
      browser: null,
      bypass: [".bank.example"],
    });
  });
});

describe("the one rule", () => {
  it("keeps the browser only under override_ua", () => {
    const fields = { tlsMitmMode: "override_ua", tlsMitmBrowser: "edge" as string | null };
    expect(settleProject(fields)).toBe(fields);
    for (const mode of ["off", "plain", "match_ua"]) {
      expect(settleProject({ ...fields, tlsMitmMode: mode }).tlsMitmBrowser).toBeNull();
    }
  });
});

describe("a configuration file", () => {
  const document = (project: Record<string, unknown>) => ({
    version: 1,
    projects: [{ name: "Filed", username: "filed", password: "filed-secret-1", ...project }],
  });
  const post = (path: string, body: unknown) =>
    h.request("POST", `/api/v1/config/${path}`, { token: h.tokens.editor, body });

  it("keeps the rule as the api does, and exports only what is not the default", async () => {
    const applied = await post("apply", {
      config: document({
        tls_mitm_mode: "plain",
        tls_mitm_browser: "chrome",
        tls_mitm_bypass: ["Pinned.Example", "pinned.example"],
      }),
    });
    expect(applied.status).toBe(200);
    const [row] = await h.deps.database.sql`
      select id, tls_mitm_mode, tls_mitm_browser, tls_mitm_bypass from projects
      where username = 'filed'`;
    expect(row).toMatchObject({
      tls_mitm_mode: "plain",
      tls_mitm_browser: null,
      tls_mitm_bypass: ["pinned.example"],
    });
    // The same file again: the browser it names is cleared again, so nothing to change.
    const again = await post("diff", {
      config: document({
        tls_mitm_mode: "plain",
        tls_mitm_browser: "chrome",
        tls_mitm_bypass: ["pinned.example"],
      }),
    });
    expect(again.body.changes).toEqual([]);
    const exported = await h.request("GET", "/api/v1/config", { token: h.tokens.viewer });
    const filed = exported.body.config.projects.find((p: { name: string }) => p.name === "Filed");
    expect(filed).toMatchObject({ tls_mitm_mode: "plain", tls_mitm_bypass: ["pinned.example"] });
    expect(filed).not.toHaveProperty("tls_mitm_browser");
    const off = exported.body.config.projects.find((p: { name: string }) => p.name === "Off");
    expect(off).not.toHaveProperty("tls_mitm_mode");
    expect(off).not.toHaveProperty("tls_mitm_bypass");
  });

  it("refuses override_ua without a browser, or with Safari, with its path, and changes nothing", async () => {
    const answer = await post("apply", {
      config: document({ tls_mitm_mode: "override_ua" }),
    });
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toEqual([
      {
        field: "config.projects.0.tls_mitm_browser",
        message: expect.stringContaining("is required by tls_mitm_mode override_ua"),
      },
    ]);
    const safari = await post("apply", {
      config: document({ tls_mitm_mode: "override_ua", tls_mitm_browser: "safari" }),
    });
    expect(safari.status).toBe(422);
    expect(safari.body.detail).toEqual([
      { field: "config.projects.0.tls_mitm_browser", message: noSafari.message },
    ]);
    const bad = await post("apply", {
      config: document({ tls_mitm_bypass: ["*.example.com"] }),
    });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].field).toBe("config.projects.0.tls_mitm_bypass.0");
    const [row] = await h.deps.database.sql`
      select tls_mitm_mode from projects where username = 'filed'`;
    expect(row.tls_mitm_mode).toBe("plain");
  });
});
