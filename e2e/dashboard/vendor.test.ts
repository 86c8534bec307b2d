/**
 * Vendor accounts in a real browser (Debian's chromium, driven by playwright-core) against a
 * real control process (role all: the api serving the built app, the controller, and a worker
 * whose sync makes a vendor connector's rows), with the vendor API emulator (HTTPS, trusted
 * through OCTOPROX_EGRESS_CA_FILE) behind an admin's custom descriptor:
 *
 * - the Providers page lists the catalogue: Oxylabs with its residential type (sessions,
 *   dynamic sessions, what it renders, its docs), a custom descriptor as custom; a viewer sees
 *   it too;
 * - an Oxylabs credential is made from the form its descriptor draws: a missing password is the
 *   API's 422 at the password field and nothing is stored, then it is stored, masked;
 * - every field type of a descriptor gets its input, and the vendor's own refusal of an account
 *   shows on the account's fields, then the vendor's yes stores it;
 * - a dynamic-sessions Oxylabs connector is made from the form (only Oxylabs credentials
 *   offered, slots only where they apply), listed with its provider, and its sync's one row
 *   shows on its page;
 * - a list connector's rows show, and once the vendor stops answering, its page shows the
 *   sync's last error and how many in a row.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { Cluster } from "../../testkit/cluster.ts";
import {
  startVendorApi,
  type VendorApi,
  vendorApiDescriptorParts,
} from "../../testkit/upstreams/vendor-emulator.ts";

const API_KEY = "right-key";

let cluster: Cluster;
let browser: Browser;
let vendorApi: VendorApi;
let folder: string;
const pages: Page[] = [];

beforeAll(async () => {
  await ensureWebBuild();
  browser = await launchBrowser();
  vendorApi = await startVendorApi({
    apiKey: API_KEY,
    proxies: [
      {
        proxy_address: "127.0.0.1",
        port: 20001,
        username: "list-user",
        password: "list-pass",
        country_code: "de",
      },
      {
        proxy_address: "127.0.0.1",
        port: 20002,
        username: "list-user",
        password: "list-pass",
        country_code: "us",
      },
    ],
  });
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-vendor-web-"));
  const caFile = join(folder, "vendor-ca.pem");
  await writeFile(caFile, vendorApi.ca);
  cluster = await Cluster.create({
    env: {
      OCTOPROX_METRICS_FLUSH_INTERVAL: "3600",
      // The emulator listens on loopback, with the test CA.
      OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
      OCTOPROX_EGRESS_CA_FILE: caFile,
    },
  });
  await cluster.start("all");
  await saveDescriptor(emulatedDescriptor("emulated", "Emulated Vendor", vendorApi));
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  await vendorApi?.close();
  if (folder) await rm(folder, { recursive: true, force: true });
});

/**
 * A vendor on the emulator: a credential of every field type (the account and key the vendor
 * checks), a connector field, and a list type mirroring the emulator's proxies.
 */
function emulatedDescriptor(id: string, name: string, api: VendorApi) {
  const parts = vendorApiDescriptorParts(api, name);
  return {
    id,
    name,
    description: "The vendor emulator's account API",
    docs_url: "https://docs.vendor.example/api",
    credential_fields: [
      { key: "account", label: "Account", type: "text", required: true, help: "Your account id" },
      { key: "api_key", label: "API key", type: "password", secret: true, required: true },
      {
        key: "region",
        label: "Region",
        type: "select",
        options: [{ value: "eu", label: "Europe" }, { value: "us", label: "United States" }],
        default: "eu",
      },
      { key: "max_pages", label: "Pages at most", type: "number", min: 1, max: 100 },
      { key: "verbose", label: "Verbose answers", type: "boolean" },
      { key: "notes", label: "Notes", type: "textarea" },
      { key: "portal", label: "Portal", type: "url" },
      { key: "home", label: "Home country", type: "country" },
    ],
    connector_fields: [
      {
        key: "pool",
        label: "Pool",
        type: "select",
        options: [{ value: "main" }, { value: "backup" }],
        default: "main",
      },
    ],
    proxy_types: [parts.listType],
    auth: parts.auth,
    validation: parts.validation,
  };
}

async function saveDescriptor(descriptor: Record<string, unknown>): Promise<void> {
  const answer = await cluster.request("POST", "/api/v1/providers", {
    descriptor,
    confirm_hosts: ["127.0.0.1"],
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
}

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

async function newProject(): Promise<string> {
  const name = `v${randomBytes(4).toString("hex")}`;
  const project = await cluster.request("POST", "/api/v1/projects", { name, username: name });
  expect(project.status).toBe(201);
  return project.body.id;
}

async function newCredential(
  projectId: string,
  body: { name: string; provider: string; config: Record<string, unknown> },
): Promise<string> {
  const answer = await cluster.request("POST", `/api/v1/projects/${projectId}/credentials`, body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id;
}

async function credentials(projectId: string) {
  const answer = await cluster.request("GET", `/api/v1/projects/${projectId}/credentials`);
  expect(answer.status).toBe(200);
  return answer.body as Record<string, unknown>[];
}

async function connector(projectId: string, id: string) {
  return (await cluster.request("GET", `/api/v1/projects/${projectId}/connectors/${id}`)).body;
}

async function rowsOf(projectId: string, connectorId: string) {
  const answer = await cluster.request(
    "GET",
    `/api/v1/projects/${projectId}/proxies?connector_id=${connectorId}&page_size=100`,
  );
  expect(answer.status).toBe(200);
  return answer.body.items as { id: string; url: string; status: string; country: string }[];
}

/** Polls until the assertion holds, with room for a busy machine (the default is 1 s). */
function eventually<T>(read: () => T | Promise<T>, options: { timeout?: number } = {}) {
  return expect.poll(read, { timeout: 10_000, ...options });
}

/** The text of each option of a select. */
function optionTexts(select: Locator): Promise<string[]> {
  return select.locator("option").allTextContents();
}

/** The API's message shown beside the field `field` (`config.password`). */
function fieldError(form: Locator, field: string): Locator {
  return form.locator(`[data-field="${field}"] > .field-error`);
}

describe("the Providers page", () => {
  it("lists the catalogue: Oxylabs with its residential type, for a viewer too", async () => {
    const catalogue = (await cluster.request("GET", "/api/v1/providers")).body as {
      id: string;
      name: string;
      proxy_types: { id: string; name: string }[];
    }[];
    const page = await asAdmin();
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Providers" })
      .click();
    await page.getByRole("heading", { name: "Providers", level: 2 }).waitFor();
    const oxylabs = page.getByRole("article", { name: "Oxylabs", exact: true });
    await oxylabs.waitFor();
    // Every descriptor of the catalogue has its card, with every proxy type.
    expect(await page.getByRole("article").count()).toBe(catalogue.length);
    for (const provider of catalogue) {
      const card = page.getByRole("article", { name: provider.name, exact: true });
      expect(await card.locator("tr[data-type]").count(), provider.id).toBe(
        provider.proxy_types.length,
      );
    }

    expect(await oxylabs.locator("[data-source]").textContent()).toBe("builtin");
    expect(await oxylabs.locator("[data-version]").textContent()).toBe("version 1");
    expect(await oxylabs.getByRole("link", { name: "Vendor docs ↗" }).getAttribute("href"))
      .toBe("https://developers.oxylabs.io/proxies/residential-proxies");
    const residential = oxylabs.locator('tr[data-type="residential"]');
    const cells = await residential.locator("td").allTextContents();
    expect(cells).toEqual([
      "Residential residential",
      "sessions",
      "dynamic sessions",
      "pr.oxylabs.io:7777",
      "any",
      "country, state (US), city, session time (1 to 1440 min)",
    ]);
    const isp = await oxylabs.locator('tr[data-type="isp"] td').allTextContents();
    expect(isp.slice(1, 4)).toEqual(["ports", "no", "isp.oxylabs.io:8001 and up"]);
    await oxylabs.getByText("Proxy username* (text), Password* (password, secret)").waitFor();

    // The admin's descriptor is custom, with the hosts its calls reach.
    const emulated = page.getByRole("article", { name: "Emulated Vendor", exact: true });
    expect(await emulated.locator("[data-source]").textContent()).toBe("custom");
    expect(await emulated.locator('tr[data-type="proxy_list"] td').nth(1).textContent())
      .toBe("list");
    await emulated.getByText("With the vendor, before a credential is stored").waitFor();

    // A search keeps the matching cards.
    await page.getByLabel("Search").fill("dynamic sess");
    await eventually(() => page.getByRole("article").count()).toBeLessThan(catalogue.length);
    await page.getByLabel("Search").fill("webshare");
    await eventually(() => page.getByRole("article").count()).toBe(1);
    await page.getByRole("article", { name: "Webshare" }).waitFor();

    // The catalogue is a viewer's to read.
    const login = { username: "provviewer", password: "provviewer-password-1" };
    expect((await cluster.request("POST", "/api/v1/users", { ...login, role: "viewer" })).status)
      .toBe(201);
    const viewer = await signedIn(browser, cluster.api.url, login);
    pages.push(viewer);
    await viewer.getByRole("link", { name: "Providers" }).click();
    await viewer.getByRole("article", { name: "Oxylabs", exact: true })
      .locator('tr[data-type="residential"]').waitFor();
  });
});

describe("vendor credentials", () => {
  it("creates an Oxylabs credential from its fields; a missing password is refused there", async () => {
    const projectId = await newProject();
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}`);
    await page.getByRole("navigation", { name: "Project pages" })
      .getByRole("link", { name: "Credentials" }).click();
    await page.getByText("No credentials yet.").waitFor();
    await page.getByRole("button", { name: "New credential" }).click();
    const form = page.getByRole("form", { name: "Credential" });
    await form.getByLabel("Name", { exact: true }).fill("oxy-main");
    await form.getByLabel(/^Provider/).selectOption("oxylabs");

    // The form is Oxylabs' credential fields: required marked, help shown, the secret masked.
    const username = form.locator('[data-field="config.username"]');
    await username.getByText("Proxy username").waitFor();
    expect(await username.locator(".is-required").count()).toBe(1);
    await username.getByText("The proxy user's name, without the customer- or user- prefix")
      .waitFor();
    const password = form.getByLabel("Password");
    expect(await password.getAttribute("type")).toBe("password");
    expect(await password.getAttribute("aria-required")).toBe("true");
    expect(await form.locator('[data-field="config.password"] .is-required').count()).toBe(1);

    await form.getByLabel("Proxy username").fill("acme");
    await form.getByRole("button", { name: "Create credential" }).click();
    await eventually(() => fieldError(form, "config.password").textContent()).toBe("is required");
    await form.getByText("Some fields need a change: see below.").waitFor();
    expect(await fieldError(form, "config.username").count()).toBe(0);
    expect(await credentials(projectId)).toEqual([]);

    await password.fill("oxy-s3cret");
    await form.getByRole("button", { name: "Create credential" }).click();
    await page.getByRole("heading", { name: "oxy-main" }).waitFor();
    const [stored] = await credentials(projectId);
    expect(stored).toMatchObject({
      name: "oxy-main",
      provider: "oxylabs",
      config: { username: "acme", password: "********" },
      has_password: true,
    });

    // Its page shows the login, never the secret, which stays set when left blank.
    const edit = page.getByRole("form", { name: "Credential" });
    expect(await edit.getByLabel("Proxy username").inputValue()).toBe("acme");
    expect(await edit.getByLabel("Password").inputValue()).toBe("");
    await edit.getByText("Set; leave blank to keep it").waitFor();
    expect(await edit.getByLabel(/^Provider/).isDisabled()).toBe(true);
    await edit.getByLabel("Proxy username").fill("acme2");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    const [edited] = await credentials(projectId);
    expect(edited).toMatchObject({ config: { username: "acme2" }, has_password: true });

    await page.getByRole("link", { name: "← All credentials" }).click();
    const row = page.getByRole("row", { name: /oxy-main/ });
    await eventually(() => row.locator("td").allTextContents()).toEqual([
      "oxy-main",
      "Oxylabs",
      "Proxy username: acme2",
      "Password set",
      "no connector",
      expect.any(String),
    ]);

    // Its page opens a vendor connector's form on it.
    await row.getByRole("link", { name: "oxy-main" }).click();
    await page.getByRole("link", { name: "New connector on this credential" }).click();
    const connectorForm = page.getByRole("form", { name: "Connector" });
    expect(await connectorForm.getByLabel(/^Kind/).inputValue()).toBe("vendor");
    expect(await connectorForm.getByLabel(/^Provider/).inputValue()).toBe("oxylabs");
    expect(await connectorForm.getByLabel(/^Credential/).inputValue()).toBe(stored.id);
  });

  it("draws each field type, and shows the vendor's refusal of the account", async () => {
    const projectId = await newProject();
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/credentials`);
    await page.getByRole("button", { name: "New credential" }).click();
    const form = page.getByRole("form", { name: "Credential" });
    await form.getByLabel("Name", { exact: true }).fill("emulated");
    await form.getByLabel(/^Provider/).selectOption("emulated");
    await form.getByText("Octoprox checks the account with the vendor before storing it.")
      .waitFor();

    // Each descriptor type is its input.
    const field = (key: string) => form.locator(`[data-field="config.${key}"]`);
    expect(await field("account").locator("input").getAttribute("type")).toBe("text");
    await field("account").getByText("Your account id").waitFor();
    expect(await field("api_key").locator("input").getAttribute("type")).toBe("password");
    const region = field("region").locator("select");
    expect(await optionTexts(region)).toEqual(["–", "Europe", "United States"]);
    expect(await region.inputValue()).toBe("eu");
    const pages = field("max_pages").locator("input");
    expect(await pages.getAttribute("type")).toBe("number");
    expect([await pages.getAttribute("min"), await pages.getAttribute("max")]).toEqual([
      "1",
      "100",
    ]);
    await field("max_pages").getByText("From 1 to 100").waitFor();
    expect(await field("verbose").locator("input").getAttribute("type")).toBe("checkbox");
    expect(await field("notes").locator("textarea").count()).toBe(1);
    expect(await field("portal").locator("input").getAttribute("type")).toBe("url");
    const home = field("home").locator("select");
    expect((await optionTexts(home)).length).toBeGreaterThan(240);
    expect(await optionTexts(home)).toContain("DE, Germany");
    expect(await field("account").locator(".is-required").count()).toBe(1);
    expect(await field("region").locator(".is-required").count()).toBe(0);

    // A number out of bounds is the API's message at its field.
    await form.getByLabel(/^Account/).fill("acct-1");
    await form.getByLabel(/^API key/).fill("wrong-key");
    await pages.fill("500");
    await form.getByRole("button", { name: "Create credential" }).click();
    await eventually(() => fieldError(form, "config.max_pages").textContent())
      .toBe("must be at most 100");

    // The vendor refuses the key: its words on the account, nothing stored.
    await pages.fill("20");
    await region.selectOption("us");
    await field("verbose").locator("input").check();
    await home.selectOption("DE");
    await form.getByRole("button", { name: "Create credential" }).click();
    await eventually(() =>
      form.locator('fieldset[data-field="config"] > .field-error').textContent()
    )
      .toBe("Emulated Vendor refused the API key (the vendor answered 401)");
    expect(await fieldError(form, "config.max_pages").count()).toBe(0);
    expect(await credentials(projectId)).toEqual([]);

    // The right key: the vendor says yes, and the config is stored as typed.
    await form.getByLabel(/^API key/).fill(API_KEY);
    await form.getByRole("button", { name: "Create credential" }).click();
    await page.getByRole("heading", { name: "emulated" }).waitFor();
    const [stored] = await credentials(projectId);
    expect(stored).toMatchObject({
      provider: "emulated",
      config: {
        account: "acct-1",
        api_key: "********",
        region: "us",
        max_pages: 20,
        verbose: true,
        home: "DE",
      },
      has_api_key: true,
    });
  });
});

describe("vendor connectors", () => {
  it("creates a dynamic-sessions Oxylabs connector, listed with its provider, and its row shows", async () => {
    const projectId = await newProject();
    const oxyId = await newCredential(projectId, {
      name: "oxy",
      provider: "oxylabs",
      config: { username: "acme", password: "oxy-s3cret" },
    });
    await newCredential(projectId, {
      name: "other-vendor",
      provider: "decodo",
      config: { username: "someone", password: "decodo-s3cret" },
    });
    await newCredential(projectId, { name: "static-login", provider: "static", config: {} });

    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/connectors`);
    await page.getByText("No connectors yet.").waitFor();
    await page.getByRole("button", { name: "New connector" }).click();
    const form = page.getByRole("form", { name: "Connector" });
    await form.getByLabel("Name", { exact: true }).fill("Residential");
    // A static connector is offered static credentials only.
    expect(await optionTexts(form.getByLabel(/^Credential/))).toEqual(["None", "static-login"]);
    await form.getByLabel(/^Kind/).selectOption("vendor");
    // A provider the project has no credential of says so, with the way to make one.
    await form.getByLabel(/^Provider/).selectOption("soax");
    const missing = form.locator('[data-field="credential_id"]');
    await missing.getByText("This project has no SOAX credential yet").waitFor();
    expect(await missing.getByRole("link", { name: "create one" }).getAttribute("href"))
      .toBe(`/projects/${projectId}/credentials?new=soax`);
    await form.getByLabel(/^Provider/).selectOption("oxylabs");

    // Only the project's Oxylabs credentials, the first chosen.
    const credential = form.getByLabel(/^Credential/);
    expect(await optionTexts(credential)).toEqual(["Choose a credential…", "oxy"]);
    expect(await credential.inputValue()).toBe(oxyId);
    const types = await optionTexts(form.getByLabel(/^Proxy type/));
    expect(types).toEqual([
      "Residential (sessions, dynamic sessions)",
      "ISP (ports)",
      "Datacenter (per IP) (ports)",
      "Dedicated datacenter (ports)",
    ]);

    // Slots are for session pools and port pools; a session mode for dynamic-session types.
    const slots = form.locator('input[name="slots"]');
    const sessionMode = form.locator('select[name="session_mode"]');
    expect(await sessionMode.inputValue()).toBe("pool");
    expect(await slots.count()).toBe(1);
    await form.getByLabel(/^Proxy type/).selectOption("isp");
    await eventually(() => sessionMode.count()).toBe(0);
    await slots.waitFor();
    await form.getByLabel(/^Proxy type/).selectOption("residential");
    await sessionMode.selectOption("dynamic");
    await eventually(() => slots.count()).toBe(0);
    await form.getByText("the countries clients may ask for").waitFor();
    await form.getByLabel(/^Countries/).fill("us, de");
    await form.getByRole("button", { name: "Create connector" }).click();
    await page.getByRole("heading", { name: "Residential" }).waitFor();

    const list = await cluster.request("GET", `/api/v1/projects/${projectId}/connectors`);
    expect(list.body).toHaveLength(1);
    const [made] = list.body;
    expect(made).toMatchObject({
      name: "Residential",
      kind: "vendor",
      provider: "oxylabs",
      credential_id: oxyId,
      countries: ["DE", "US"],
      config: { proxy_type: "residential", session_mode: "dynamic" },
    });
    expect(made.config.slots).toBeUndefined();

    // Its page says what it is.
    const facts = page.getByRole("definition");
    await eventually(() => facts.allTextContents()).toEqual([
      "Oxylabs",
      "Residential pr.oxylabs.io:7777",
      "dynamic sessions",
      "oxy",
      expect.stringMatching(/waiting for the first sync…|no errors/),
    ]);
    // The worker's sync makes the one row, which shows on the page as the API lists it.
    const rows = page.getByRole("table", { name: "Connector rows" });
    const row = rows.locator("tbody tr");
    await row.first().waitFor({ timeout: 20_000 });
    const [listed] = await rowsOf(projectId, made.id);
    expect(await row.count()).toBe(1);
    expect(await row.locator("td").allTextContents()).toEqual([
      listed.url,
      "dynamic: rendered per request",
      "any",
      "healthy",
      expect.any(String),
    ]);
    expect(listed.url).toBe("http://customer-acme@pr.oxylabs.io:7777");
    await eventually(() => page.locator('[data-fact="sync"]').textContent()).toBe("no errors");
    await page.getByText("vendor, 1 proxy").waitFor();

    // The list shows it with its provider, type and mode.
    await page.getByRole("link", { name: "← All connectors" }).click();
    const listedRow = page.getByRole("row", { name: /Residential/ });
    await eventually(() => listedRow.locator("[data-provider]").textContent())
      .toBe("OxylabsResidential, dynamic sessions");
    await eventually(() => listedRow.locator("td").nth(7).textContent()).toBe("1");

    // The Proxies tab lists the row under its connector.
    await page.getByRole("link", { name: "Proxies", exact: true }).click();
    const proxyRow = page.getByRole("table", { name: "Proxies" }).locator(
      `tr[data-proxy="${listed.id}"]`,
    );
    await eventually(() => proxyRow.locator("td").nth(3).textContent()).toBe("Residential");
  });

  it("shows a viewer credentials and a vendor connector, every field disabled, no button", async () => {
    const projectId = await newProject();
    const credentialId = await newCredential(projectId, {
      name: "watched-oxy",
      provider: "oxylabs",
      config: { username: "acme", password: "oxy-s3cret" },
    });
    const made = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
      name: "watched-pool",
      kind: "vendor",
      provider: "oxylabs",
      credential_id: credentialId,
      countries: ["FR"],
      config: { slots: 2 },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const login = { username: "vendorviewer", password: "vendorviewer-password-1" };
    expect((await cluster.request("POST", "/api/v1/users", { ...login, role: "viewer" })).status)
      .toBe(201);
    const page = await signedIn(browser, cluster.api.url, login);
    pages.push(page);

    await page.goto(`/projects/${projectId}/credentials`);
    const row = page.getByRole("row", { name: /watched-oxy/ });
    await eventually(() => row.locator("td").nth(4).textContent()).toBe("watched-pool");
    expect(await page.getByRole("button", { name: "New credential" }).count()).toBe(0);
    await row.getByRole("link", { name: "watched-oxy" }).click();
    const form = page.getByRole("form", { name: "Credential" });
    await form.getByText("Your role can see this credential, not change it.").waitFor();
    expect(await form.getByLabel("Proxy username").inputValue()).toBe("acme");
    for (const input of await form.locator("input, select, textarea").all()) {
      expect(await input.isDisabled()).toBe(true);
    }
    expect(await page.getByRole("button").filter({ hasNotText: /theme|Sign out/ }).count())
      .toBe(0);

    await page.getByRole("link", { name: "watched-pool" }).click();
    await eventually(() => page.locator('[data-fact="mode"]').textContent())
      .toBe("session pool, 2 slots per country");
    const connectorForm = page.getByRole("form", { name: "Connector" });
    expect(await connectorForm.locator('input[name="slots"]').inputValue()).toBe("2");
    for (const input of await connectorForm.locator("input, select, textarea").all()) {
      expect(await input.isDisabled()).toBe(true);
    }
    expect(await connectorForm.getByRole("button").count()).toBe(0);
    expect(await page.getByRole("form", { name: "Delete connector" }).count()).toBe(0);
    // The sync's two sessions for France show as rows.
    const rows = page.getByRole("table", { name: "Connector rows" }).locator("tbody tr");
    await eventually(() => rows.count(), { timeout: 20_000 }).toBe(2);
    expect(await rows.locator("td").nth(2).textContent()).toBe("FR");
  });

  it("shows a list connector's rows, then the sync's last error when the vendor stops answering", async () => {
    const stopping = await startVendorApi({
      apiKey: API_KEY,
      proxies: [{
        proxy_address: "127.0.0.1",
        port: 20011,
        username: "u",
        password: "p",
        country_code: "fr",
      }],
    });
    const projectId = await newProject();
    try {
      await saveDescriptor(emulatedDescriptor("stopping", "Stopping Vendor", stopping));
      await newCredential(projectId, {
        name: "stopping-account",
        provider: "stopping",
        config: { account: "acct-2", api_key: API_KEY },
      });
      const page = await asAdmin();
      await page.goto(`/projects/${projectId}/connectors`);
      await page.getByRole("button", { name: "New connector" }).click();
      const form = page.getByRole("form", { name: "Connector" });
      await form.getByLabel("Name", { exact: true }).fill("Mirrored");
      await form.getByLabel(/^Kind/).selectOption("vendor");
      await form.getByLabel(/^Provider/).selectOption("stopping");
      // A list takes neither slots nor a session mode; the descriptor's own field is there.
      expect(await form.locator('input[name="slots"]').count()).toBe(0);
      expect(await form.locator('select[name="session_mode"]').count()).toBe(0);
      await form.getByLabel(/^Pool/).selectOption("backup");
      await form.getByRole("button", { name: "Create connector" }).click();
      await page.getByRole("heading", { name: "Mirrored" }).waitFor();
      await page.locator('[data-fact="mode"]').getByText("the vendor's list").waitFor();

      const rows = page.getByRole("table", { name: "Connector rows" }).locator("tbody tr");
      await rows.first().waitFor({ timeout: 20_000 });
      expect(await rows.locator("td").nth(0).textContent()).toBe("http://u@127.0.0.1:20011");
      expect(await rows.locator("td").nth(1).textContent()).toBe("exit 127.0.0.1");
      expect(await rows.locator("td").nth(2).textContent()).toBe("FR");

      // The vendor goes away; an edit asks for a sync, which fails and says so.
      await stopping.close();
      await form.getByLabel(/^Pool/).selectOption("main");
      await form.getByRole("button", { name: "Save changes" }).click();
      await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
      const id = (await cluster.request("GET", `/api/v1/projects/${projectId}/connectors`))
        .body[0].id as string;
      const failed = await cluster.until(async () => {
        const answer = await connector(projectId, id);
        return answer.last_error ? answer : undefined;
      }, { timeoutMs: 20_000, message: "the sync's error" });
      expect(failed.config.pool).toBe("main");
      const note = page.locator("[data-last-error]");
      await note.waitFor({ timeout: 20_000 });
      await eventually(() => note.textContent()).toMatch(
        /^Last sync error \(\d+ in a row\): /,
      );
      const shown = (await note.textContent())!;
      const [, count, message] = /^Last sync error \((\d+) in a row\): (.*)$/s.exec(shown)!;
      expect(Number(count)).toBeGreaterThanOrEqual(1);
      // What the page shows is what the API answered at its last read.
      const now = await connector(projectId, id);
      expect(message).toBe(now.last_error);
      expect(Number(count)).toBeLessThanOrEqual(now.consecutive_errors);
      await eventually(() => page.locator('[data-fact="sync"]').textContent())
        .toMatch(/^\d+ consecutive errors?$/);
      // Nothing was written: the row is still there.
      expect(await rows.count()).toBe(1);
    } finally {
      await stopping.close();
      // Its failing sync is delivered again and again: the connector goes, and its retries.
      await cluster.request("DELETE", `/api/v1/projects/${projectId}`);
    }
  });
});
