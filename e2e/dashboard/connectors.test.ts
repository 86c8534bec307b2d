/**
 * A project's connectors page in a real browser (Debian's chromium, driven by playwright-core)
 * against a real control process (role all: the api serving the built app, the controller and a
 * worker that takes the traffic decisions). A person creates a connector from its form, is
 * refused a domain allow and deny list together beside the field (nothing changes), sees the
 * share of requests each weight gives, disables and enables a connector from the list, sets a
 * traffic limit and resets it (the pending badge, then not), deletes one after typing its name;
 * a viewer sees every field disabled and no button.
 */
import { randomBytes } from "node:crypto";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { Cluster } from "../../testkit/cluster.ts";

let cluster: Cluster;
let browser: Browser;
const pages: Page[] = [];

beforeAll(async () => {
  await ensureWebBuild();
  browser = await launchBrowser();
  cluster = await Cluster.create({ env: { OCTOPROX_METRICS_FLUSH_INTERVAL: "3600" } });
  await cluster.start("all");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
});

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

async function newProject(): Promise<string> {
  const name = `c${randomBytes(4).toString("hex")}`;
  const project = await cluster.request("POST", "/api/v1/projects", { name, username: name });
  expect(project.status).toBe(201);
  return project.body.id;
}

async function newConnector(projectId: string, body: Record<string, unknown>): Promise<string> {
  const answer = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    kind: "static",
    ...body,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id;
}

async function connector(projectId: string, id: string) {
  return (await cluster.request("GET", `/api/v1/projects/${projectId}/connectors/${id}`)).body;
}

const percent = (ratio: number) => `${(ratio * 100).toFixed(1)} %`;

describe("the connectors page", () => {
  it("creates a connector from its form", async () => {
    const projectId = await newProject();
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}`);
    await page.getByRole("link", { name: "Connectors" }).click();
    await page.getByText("No connectors yet.").waitFor();
    await page.getByRole("button", { name: "New connector" }).click();
    const form = page.getByRole("form", { name: "Connector" });
    await form.getByLabel("Name", { exact: true }).fill("Made here");
    await form.getByLabel("Weight").fill("7");
    await form.getByLabel("Countries").fill("de, uk");
    await form.getByLabel("Domain deny list").fill("ads.example\n*.tracker.example");
    await form.getByLabel("Health-check URL").fill("http://127.0.0.1:9/check");
    await form.getByLabel("Request-rate limit per proxy").check();
    await form.getByLabel("Requests a window").fill("10");
    await form.getByLabel("Window (seconds)").fill("60");
    await form.getByRole("button", { name: "Create connector" }).click();
    await page.getByRole("heading", { name: "Made here" }).waitFor();

    const list = await cluster.request("GET", `/api/v1/projects/${projectId}/connectors`);
    expect(list.body).toHaveLength(1);
    expect(list.body[0]).toMatchObject({
      name: "Made here",
      kind: "static",
      enabled: true,
      weight: 7,
      countries: ["DE", "GB"],
      domain_allow: [],
      domain_deny: ["ads.example", "tracker.example"],
      healthcheck_url: "http://127.0.0.1:9/check",
      rate_limit_config: {
        max_requests: 10,
        window_seconds: 60,
        quarantine_seconds_min: 60,
        quarantine_seconds_max: 60,
        sticky_quarantine: false,
      },
      traffic_config: null,
    });
    // The form shows what is stored, and the list has it.
    expect(await form.getByLabel("Countries").inputValue()).toBe("DE, GB");
    await page.getByRole("link", { name: "← All connectors" }).click();
    const row = page.getByRole("row", { name: /Made here/ });
    await expect.poll(() => row.textContent()).toContain("DE, GB");
    expect(await row.locator("[data-share]").textContent()).toBe("100.0 %");
  });

  it("refuses a domain allow and deny list together beside the field, changing nothing", async () => {
    const projectId = await newProject();
    const id = await newConnector(projectId, { name: "lists" });
    const before = await connector(projectId, id);
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/connectors/${id}`);
    const form = page.getByRole("form", { name: "Connector" });
    await form.getByLabel("Domain allow list").fill("only.example");
    await form.getByLabel("Domain deny list").fill("never.example");
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() => form.locator('[data-field="domain_deny"] .field-error').textContent())
      .toBe("domain_allow and domain_deny are mutually exclusive; set one and empty the other");
    await form.getByText("Some fields need a change: see below.").waitFor();
    const after = await connector(projectId, id);
    expect(after).toMatchObject({ domain_allow: [], domain_deny: [] });
    expect(after.updated_at).toBe(before.updated_at);

    // Emptying one list saves the other.
    await form.getByLabel("Domain deny list").fill("");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    expect(await connector(projectId, id)).toMatchObject({
      domain_allow: ["only.example"],
      domain_deny: [],
    });
    expect(await form.locator(".field-error").count()).toBe(0);
  });

  it("shows the share of requests each weight gives among the enabled connectors", async () => {
    const projectId = await newProject();
    const heavy = await newConnector(projectId, { name: "heavy", weight: 3 });
    await newConnector(projectId, { name: "light", weight: 1 });
    await newConnector(projectId, { name: "off", weight: 50, enabled: false });
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/connectors`);
    const share = (name: string) =>
      page.getByRole("row", { name: new RegExp(name) }).locator("[data-share]");
    await expect.poll(() => share("heavy").textContent()).toBe(percent(3 / 4));
    expect(await share("light").textContent()).toBe(percent(1 / 4));
    expect(await share("off").textContent()).toBe("–");

    // In the form, the share follows the weight as it is typed, before any save.
    await page.getByRole("link", { name: "heavy" }).click();
    const form = page.getByRole("form", { name: "Connector" });
    const formShare = form.locator("[data-share]");
    await expect.poll(() => formShare.textContent()).toBe(percent(3 / 4));
    await form.getByLabel("Weight").fill("9");
    await expect.poll(() => formShare.textContent()).toBe(percent(9 / 10));
    await form.getByLabel("Requests may be routed to this connector").uncheck();
    await expect.poll(() => formShare.textContent()).toBe("none");
    expect((await connector(projectId, heavy)).weight).toBe(3);
  });

  it("disables and enables a connector from the list in one click", async () => {
    const projectId = await newProject();
    const id = await newConnector(projectId, { name: "toggled" });
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/connectors`);
    const row = page.getByRole("row", { name: /toggled/ });
    await row.getByRole("button", { name: "Disable" }).click();
    await expect.poll(async () => (await connector(projectId, id)).enabled).toBe(false);
    await expect.poll(() => row.locator("[data-enabled]").textContent()).toBe("disabled");
    expect(await row.locator("[data-share]").textContent()).toBe("–");
    await row.getByRole("button", { name: "Enable" }).click();
    await expect.poll(async () => (await connector(projectId, id)).enabled).toBe(true);
    await expect.poll(() => row.locator("[data-enabled]").textContent()).toBe("enabled");
  });

  it("sets a traffic limit from the form; a reset shows the pending badge until decided", async () => {
    const projectId = await newProject();
    const id = await newConnector(projectId, { name: "metered" });
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/connectors/${id}`);
    const form = page.getByRole("form", { name: "Connector" });
    await form.getByLabel("Traffic limit and price").check();
    await form.getByLabel("Bytes a period").fill("5000000");
    await form.getByLabel("At the limit").selectOption("block");
    await form.getByLabel("Price per GB").fill("2.5");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    expect((await connector(projectId, id)).traffic_config).toMatchObject({
      limit_bytes: 5_000_000,
      action: "block",
      price_per_gb: 2.5,
      period: "month",
    });
    const bar = page.getByLabel("Traffic usage");
    await expect.poll(() => bar.textContent()).toContain("0 B of 5.0 MB this month");
    const badge = bar.getByText("pending decision");
    // The edit's own decision lands first.
    await cluster.until(async () => (await badge.count()) === 0, {
      message: "the limit edit's decision",
    });

    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith(`/connectors/${id}/traffic/reset`)),
      bar.getByRole("button", { name: "Reset usage" }).click(),
    ]);
    // Pending as answered, unless a worker decided before the answer was read back (the API
    // reads the mark again for its answer); the page shows what the answer says.
    if ((await answer.json()).traffic_usage.pending === true) await badge.waitFor();
    // The worker decides; the page reads the connector again and the badge goes.
    await cluster.until(async () => (await badge.count()) === 0, {
      timeoutMs: 20_000,
      message: "the pending badge to go",
    });
    expect((await connector(projectId, id)).traffic_usage).toMatchObject({
      pending: false,
      blocked: false,
    });
    // The list shows the same usage.
    await page.getByRole("link", { name: "← All connectors" }).click();
    await expect.poll(() => page.getByRole("row", { name: /metered/ }).textContent())
      .toContain("of 5.0 MB");
  });

  it("deletes a connector only after its name is typed", async () => {
    const projectId = await newProject();
    const id = await newConnector(projectId, { name: "doomed" });
    const page = await asAdmin();
    await page.goto(`/projects/${projectId}/connectors/${id}`);
    const zone = page.getByRole("form", { name: "Delete connector" });
    const remove = zone.getByRole("button", { name: "Delete connector" });
    expect(await remove.isDisabled()).toBe(true);
    await zone.getByLabel("Connector name to confirm").fill("doome");
    expect(await remove.isDisabled()).toBe(true);
    await zone.getByLabel("Connector name to confirm").fill("doomed");
    await remove.click();
    await page.getByText("No connectors yet.").waitFor();
    const gone = await cluster.request("GET", `/api/v1/projects/${projectId}/connectors/${id}`);
    expect(gone.status).toBe(404);
  });

  it("shows a viewer every field disabled, and no button", async () => {
    const login = { username: "conviewer", password: "conviewer-password-1" };
    expect((await cluster.request("POST", "/api/v1/users", { ...login, role: "viewer" })).status)
      .toBe(201);
    const projectId = await newProject();
    await newConnector(projectId, {
      name: "watched",
      weight: 4,
      traffic_config: { limit_bytes: 1_000_000 },
    });
    const page = await signedIn(browser, cluster.api.url, login);
    pages.push(page);
    await page.goto(`/projects/${projectId}/connectors`);
    const row = page.getByRole("row", { name: /watched/ });
    await expect.poll(() => row.locator("[data-share]").textContent()).toBe("100.0 %");
    expect(await page.getByRole("button", { name: "New connector" }).count()).toBe(0);
    expect(await row.getByRole("button").count()).toBe(0);

    await page.getByRole("link", { name: "watched" }).click();
    const form = page.getByRole("form", { name: "Connector" });
    const weight = form.getByLabel("Weight");
    expect(await weight.inputValue()).toBe("4");
    expect(await weight.isDisabled()).toBe(true);
    expect(await form.getByLabel("Bytes a period").inputValue()).toBe("1000000");
    for (const input of await form.locator("input, select, textarea").all()) {
      expect(await input.isDisabled()).toBe(true);
    }
    expect(await form.getByRole("button").count()).toBe(0);
    expect(await page.getByRole("button", { name: "Reset usage" }).count()).toBe(0);
    expect(await page.getByRole("form", { name: "Delete connector" }).count()).toBe(0);
    await page.getByText("Your role can see this connector, not change it.").waitFor();
    await page.getByLabel("Traffic usage").waitFor();
  });
});
