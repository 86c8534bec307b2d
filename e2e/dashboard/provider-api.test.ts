/**
 * Issue 16's features in a real browser (Debian's chromium, driven by playwright-core) against a
 * real control process (role all: the api serving the built app, the controller, and a worker
 * whose pool runs fetch from the provider every second), with the provider emulator over HTTPS
 * handing out two real tinyproxy exits with a lifetime:
 *
 * - a provider_api credential is made from the form: a value the API refuses shows at its row
 *   and nothing is stored, then it is stored and its key shows as set;
 * - a provider_api connector is made from the form's JSON editor: a config the API refuses
 *   shows its path under the editor and nothing is stored; then it is stored, and its page's
 *   Pool panel shows the two proxies the pool job fetched and checked, routed, with the fetch
 *   counts; Refill now asks a run;
 * - a sequence of two connectors is set from the form (one alone is refused at the field), shown
 *   with its current connector, and cleared;
 * - a distribution key is made (a bad CIDR refused at its field first), shown once with the
 *   warning, listed by its prefix only, and revoked;
 * - a viewer reads the pool, the sequence and the keys, with no button or input to change them.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { Cluster } from "../../testkit/cluster.ts";
import {
  PROVIDER_EMULATOR_JSON,
  type ProviderEmulator,
  startProviderEmulator,
} from "../../testkit/upstreams/provider-emulator.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { writeCaFile } from "../../testkit/vendors.ts";

const API_KEY = `pk-${randomBytes(6).toString("hex")}`;

let cluster: Cluster;
let browser: Browser;
let folder: string;
let exits: Tinyproxy[];
let provider: ProviderEmulator;
const pages: Page[] = [];

/** Exit i's login: each tinyproxy takes only its own. */
const login = (i: number) => ({ username: `exit${i}`, password: `exit-secret-${i}-${API_KEY}` });

beforeAll(async () => {
  await ensureWebBuild();
  browser = await launchBrowser();
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-pool-web-"));
  const caFile = await writeCaFile(folder, (await testCertificate()).ca);
  exits = await Promise.all(
    [1, 2].map((i) => startTinyproxy({ bindAddress: `127.0.0.${50 + i}`, auth: login(i) })),
  );
  provider = await startProviderEmulator({
    tls: true,
    apiKey: API_KEY,
    exits: exits.map((exit, i) => ({
      host: "127.0.0.1",
      port: exit.port,
      ...login(i + 1),
      country: "DE",
    })),
    perCall: 2,
    ttlSeconds: 600,
  });
  cluster = await Cluster.create({
    env: {
      OCTOPROX_METRICS_FLUSH_INTERVAL: "3600",
      OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
      OCTOPROX_EGRESS_CA_FILE: caFile,
      OCTOPROX_POOL_INTERVAL: "1",
    },
  });
  await cluster.start("all");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  await provider?.close();
  await Promise.all((exits ?? []).map((exit) => exit.close()));
  if (folder) await rm(folder, { recursive: true, force: true });
});

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

async function asViewer(): Promise<Page> {
  const login = { username: `view${randomBytes(3).toString("hex")}`, password: "viewer-pass-1" };
  const made = await cluster.request("POST", "/api/v1/users", { ...login, role: "viewer" });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const page = await signedIn(browser, cluster.api.url, login);
  pages.push(page);
  return page;
}

async function newProject(): Promise<string> {
  const name = `pa${randomBytes(4).toString("hex")}`;
  const project = await cluster.request("POST", "/api/v1/projects", { name, username: name });
  expect(project.status).toBe(201);
  return project.body.id;
}

async function listOf(path: string): Promise<Record<string, unknown>[]> {
  const answer = await cluster.request("GET", `/api/v1${path}`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as Record<string, unknown>[];
}

/** Polls until the assertion holds, with room for a busy machine (the default is 1 s). */
function eventually<T>(read: () => T | Promise<T>, options: { timeout?: number } = {}) {
  return expect.poll(read, { timeout: 15_000, ...options });
}

/** The connector config typed into the editor: the emulator, read with its JSON shape. */
function poolConfig(url: string) {
  return {
    fetch: {
      url,
      params: { count: "{count}" },
      auth: { type: "api_key", header: "X-Api-Key", value: "{credential.api_key}" },
      estimated_ips_per_call: 2,
      request_interval_ms: 0,
      max_in_flight: 1,
      max_total: 100,
    },
    parser: {
      format: "json",
      items: PROVIDER_EMULATOR_JSON.items,
      fields: PROVIDER_EMULATOR_JSON.fields,
      safety_margin_seconds: 5,
    },
    pool: { min_size: 2, target_size: 2, max_size: 4 },
  };
}

const text = async (locator: Locator) => (await locator.textContent())?.trim();

describe("a provider_api credential, connector and pool", () => {
  it(
    "are made from the forms, refusals at their fields, and the pool shows its proxies",
    async () => {
      const projectId = await newProject();
      const page = await asAdmin();

      // The credential: a value longer than the API takes is refused at its row.
      await page.goto(`/projects/${projectId}/credentials`);
      await page.getByRole("button", { name: "New credential" }).click();
      const credentialForm = page.getByRole("form", { name: "Credential" });
      await credentialForm.locator('select[name="provider"]').selectOption("provider_api");
      await credentialForm.locator('input[name="name"]').fill("acme-keys");
      const row = credentialForm.locator('[data-secret-row="api_key"]');
      await row.locator('input[name="secret_value_0"]').fill("x".repeat(5000));
      await credentialForm.getByRole("button", { name: "Create credential" }).click();
      await row.locator(".field-error").waitFor();
      expect(await text(row.locator(".field-error"))).toMatch(/at most 4096/);
      expect(await listOf(`/projects/${projectId}/credentials`)).toEqual([]);

      await row.locator('input[name="secret_value_0"]').fill(API_KEY);
      await credentialForm.getByRole("button", { name: "Create credential" }).click();
      await page.waitForURL(/\/credentials\/[0-9a-f-]{36}$/);
      await page.locator('[data-secret-set="api_key"]').waitFor();
      const [credential] = await listOf(`/projects/${projectId}/credentials`);
      expect(credential).toMatchObject({
        name: "acme-keys",
        provider: "provider_api",
        config: { api_key: "********" },
      });
      // Saved again with the value left blank, the stored secret is kept (the mask sent back).
      await page.getByRole("button", { name: "Save changes" }).click();
      await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
      await page.locator('[data-secret-set="api_key"]').waitFor();

      // The connector: a config the API refuses names its path under the editor.
      await page.goto(`/projects/${projectId}/connectors`);
      await page.getByRole("button", { name: "New connector" }).click();
      const form = page.getByRole("form", { name: "Connector" });
      await form.locator('select[name="kind"]').selectOption("provider_api");
      await form.locator('input[name="name"]').fill("acme-pool");
      expect(await form.locator('select[name="credential_id"]').inputValue()).toBe(credential.id);
      // The editor starts with a working shape to edit.
      expect(JSON.parse(await form.locator('textarea[name="config_json"]').inputValue()))
        .toMatchObject({ fetch: { params: { count: "{count}" } }, parser: { format: "json" } });
      const plain = provider.fetchUrl.replace(/^https:/, "http:");
      await form.locator('textarea[name="config_json"]').fill(
        JSON.stringify(poolConfig(plain), null, 2),
      );
      await form.getByRole("button", { name: "Create connector" }).click();
      const issue = form.locator('[data-issue="body.config.fetch.url"]');
      await issue.waitFor();
      expect(await text(issue)).toMatch(/^config\.fetch\.url: .*https/);
      expect(await listOf(`/projects/${projectId}/connectors`)).toEqual([]);

      await form.locator('textarea[name="config_json"]').fill(
        JSON.stringify(poolConfig(provider.fetchUrl), null, 2),
      );
      await form.getByRole("button", { name: "Create connector" }).click();
      await page.waitForURL(/\/connectors\/[0-9a-f-]{36}$/);
      const [connector] = await listOf(`/projects/${projectId}/connectors`);
      expect(connector).toMatchObject({
        name: "acme-pool",
        kind: "provider_api",
        credential_id: credential.id,
      });

      // The pool job fetches both exits and checks each through itself: both routed.
      const pool = page.getByRole("region", { name: "Pool" });
      await eventually(() => text(pool.locator('[data-pool="routed"]')), { timeout: 30_000 })
        .toBe("2");
      const view = (await cluster.request(
        "GET",
        `/api/v1/projects/${projectId}/connectors/${connector.id}/pool`,
      )).body;
      expect(view.counts.routed).toBe(2);
      await eventually(() => text(pool.locator('[data-pool="success"]')))
        .toBe(String(view.fetch.success));
      expect(view.fetch.success).toBeGreaterThanOrEqual(1);
      expect(await text(pool.locator("[data-pool-live]"))).toMatch(
        /2 live against min 2, target 2, max 4; reserved for gateways: all/,
      );
      expect(await text(pool.locator('[data-pool="ledger"]'))).toMatch(/used, .* pending of 100/);
      expect(await text(pool.locator("[data-pool-depleted]"))).toMatch(/Not depleted/);
      await pool.getByRole("button", { name: "Refill now" }).click();
      await pool.getByRole("status").filter({ hasText: "Pool run asked" }).waitFor();

      // Editing keeps the stored config: the editor shows it, and a save changes nothing of it.
      const stored = JSON.parse(await form.locator('textarea[name="config_json"]').inputValue());
      expect(stored.fetch.url).toBe(provider.fetchUrl);
      await form.getByRole("button", { name: "Save changes" }).click();
      await form.getByRole("status").filter({ hasText: "Saved" }).waitFor();
      const after = (await cluster.request(
        "GET",
        `/api/v1/projects/${projectId}/connectors/${connector.id}`,
      )).body;
      expect(after.config).toEqual(stored);

      // A viewer reads the pool and the config, and can change neither.
      const viewer = await asViewer();
      await viewer.goto(`/projects/${projectId}/connectors/${connector.id}`);
      const viewerPool = viewer.getByRole("region", { name: "Pool" });
      await eventually(() => text(viewerPool.locator('[data-pool="routed"]'))).toBe("2");
      expect(await viewerPool.getByRole("button", { name: "Refill now" }).count()).toBe(0);
      expect(await viewer.locator('textarea[name="config_json"]').isDisabled()).toBe(true);
      await viewer.goto(`/projects/${projectId}/sequence`);
      await viewer.locator("[data-no-sequence]").waitFor();
      expect(await viewer.getByRole("form", { name: "Set the sequence" }).count()).toBe(0);
      await viewer.goto(`/projects/${projectId}/distribution-keys`);
      await viewer.getByRole("table", { name: "Distribution keys" }).waitFor();
      expect(await viewer.getByRole("form", { name: "New distribution key" }).count()).toBe(0);
    },
    120_000,
  );
});

describe("a project's sequence", () => {
  it("is set from the form (one connector alone refused), shown, and cleared", async () => {
    const projectId = await newProject();
    const ids: string[] = [];
    for (const name of ["first", "second"]) {
      const answer = await cluster.request(
        "POST",
        `/api/v1/projects/${projectId}/connectors`,
        { name, kind: "static" },
      );
      expect(answer.status, JSON.stringify(answer.body)).toBe(201);
      ids.push(answer.body.id);
    }
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/sequence`);
    await page.locator("[data-no-sequence]").waitFor();
    const form = page.getByRole("form", { name: "Set the sequence" });
    const add = async (name: string) => {
      const choice = form.locator('select[name="adding"]');
      await choice.selectOption({ label: `${name} (static)` });
      await form.getByRole("button", { name: "Add", exact: true }).click();
    };
    await add("second");
    await form.getByRole("button", { name: "Set the sequence" }).click();
    const error = form.locator('[data-field="connector_ids"] > .field-error');
    await error.waitFor();
    expect(await text(error)).toBeTruthy();
    expect((await cluster.request("GET", `/api/v1/projects/${projectId}/sequence`)).status)
      .toBe(404);

    // Both, ordered first then second, looping at the end.
    await add("first");
    await form.getByRole("button", { name: "Move first up" }).click();
    expect(await form.locator("[data-chosen]").allTextContents()).toEqual([
      expect.stringMatching(/^first/),
      expect.stringMatching(/^second/),
    ]);
    await form.locator('select[name="on_end"]').selectOption("loop");
    await form.getByRole("button", { name: "Set the sequence" }).click();
    const shown = page.getByRole("region", { name: "Current sequence" });
    await shown.waitFor();
    expect(
      await shown.locator("[data-sequence-connector]").evaluateAll((items) =>
        items.map((item) => item.getAttribute("data-sequence-connector"))
      ),
    ).toEqual(["first", "second"]);
    expect(await shown.locator('[data-current="true"]').getAttribute("data-sequence-connector"))
      .toBe("first");
    expect(await text(shown.locator("[data-on-end]"))).toBe("loop");
    expect(await text(shown.locator("[data-on-unavailable]"))).toBe("reject");
    const stored = (await cluster.request("GET", `/api/v1/projects/${projectId}/sequence`)).body;
    expect(stored).toMatchObject({
      connector_ids: ids,
      current_connector_id: ids[0],
      on_end: "loop",
      exhausted: false,
    });

    await page.getByRole("button", { name: "Clear the sequence" }).click();
    await page.getByRole("button", { name: "Clear it now" }).click();
    await page.locator("[data-no-sequence]").waitFor();
    expect((await cluster.request("GET", `/api/v1/projects/${projectId}/sequence`)).status)
      .toBe(404);
  }, 60_000);
});

describe("a project's distribution keys", () => {
  it("are made (shown once, with the warning) and revoked", async () => {
    const projectId = await newProject();
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/distribution-keys`);
    expect(await text(page.locator("[data-raw-warning]"))).toMatch(/raw proxy credentials/);
    const form = page.getByRole("form", { name: "New distribution key" });
    await form.locator('input[name="name"]').fill("crawler");
    await form.locator('textarea[name="allowed_cidrs"]').fill("10.0.0.0/33");
    await form.getByRole("button", { name: "Create key" }).click();
    const error = form.locator('[data-field="allowed_cidrs"] > .field-error');
    await error.waitFor();
    expect(await listOf(`/projects/${projectId}/distribution-keys`)).toEqual([]);

    await form.locator('textarea[name="allowed_cidrs"]').fill("10.0.0.0/8\n127.0.0.1");
    await form.getByRole("button", { name: "Create key" }).click();
    const box = page.getByRole("region", { name: "New distribution key" });
    const key = await box.locator("[data-new-key]").inputValue();
    expect(key).toMatch(/^oxd_[A-Za-z0-9]{43}$/);
    expect(await box.textContent()).toMatch(/will not see it again/);
    expect(await box.textContent()).toMatch(/raw proxy credentials/);
    const [listed] = await listOf(`/projects/${projectId}/distribution-keys`);
    expect(listed.key).toBeUndefined();
    expect(key.startsWith(listed.prefix as string)).toBe(true);

    await box.getByRole("button", { name: "Done" }).click();
    await box.waitFor({ state: "detached" });
    // The key is not on the page any more; the list shows its first characters only.
    expect(await page.content()).not.toContain(key);
    const row = page.locator('tr[data-key="crawler"]');
    expect(await text(row.locator("td").nth(1))).toBe(`${listed.prefix}…`);
    expect(await text(row.locator("td").nth(2))).toBe("10.0.0.0/8, 127.0.0.1");
    expect(await text(row.locator("[data-status]"))).toBe("active");

    await row.getByRole("button", { name: "Revoke" }).click();
    await row.getByRole("button", { name: "Revoke crawler now" }).click();
    await eventually(() => text(row.locator("[data-status]"))).toBe("revoked");
    const [revoked] = await listOf(`/projects/${projectId}/distribution-keys`);
    expect(revoked.revoked_at).not.toBeNull();
    expect(revoked.active).toBe(false);
  }, 60_000);
});
