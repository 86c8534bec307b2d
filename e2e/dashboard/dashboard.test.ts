/**
 * The dashboard in a real browser (Debian's chromium, driven by playwright-core) against a real
 * system: the control process (role all) serving the built app, a real gateway, and a real
 * tinyproxy upstream. A person signs in and sees their role, switches the theme, creates a
 * project from its form (the API's refusal shown beside the field at fault), sees the overview's
 * counts move after traffic through the gateway and a metrics flush, edits and deletes a project
 * (the typed confirmation); a viewer sees every field and can change none.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject } from "../../testkit/routing.ts";

let cluster: Cluster;
let gateway: Gateway;
let tinyproxy: Tinyproxy;
let browser: Browser;
const pages: Page[] = [];

beforeAll(async () => {
  await ensureWebBuild();
  [tinyproxy, browser] = await Promise.all([startTinyproxy(), launchBrowser()]);
  // Flushes only when a test asks.
  cluster = await Cluster.create({ env: { OCTOPROX_METRICS_FLUSH_INTERVAL: "3600" } });
  await cluster.start("all");
  gateway = await cluster.startGateway();
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  await tinyproxy?.close();
});

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

describe("the dashboard", () => {
  it("signs in with the role shown, keeps the theme, signs out", async () => {
    const page = await asAdmin();
    await expect.poll(() => page.locator("[data-role]").textContent()).toBe("admin");
    const before = await page.evaluate(() => document.documentElement.dataset.theme);
    await page.getByRole("button", { name: "Theme" }).click();
    const after = await page.evaluate(() => document.documentElement.dataset.theme);
    expect(after).not.toBe(before);
    await page.reload();
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe(after);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    // Signed out for good: a reload asks again.
    await page.reload();
    await page.getByRole("button", { name: "Sign in" }).waitFor();
  });

  it("refuses a wrong password in words", async () => {
    const context = await browser.newContext({ baseURL: cluster.api.url });
    const page = await context.newPage();
    pages.push(page);
    await page.goto("/");
    await page.getByLabel("Username").fill("admin");
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toContain(
      "Invalid username or password",
    );
  });

  it("creates a project from its form, showing the API's refusal beside the field", async () => {
    const page = await asAdmin();
    await page.getByRole("button", { name: "New project" }).click();
    const form = page.getByRole("form", { name: "Project" });
    await form.getByLabel("Name", { exact: true }).fill("Browser made");
    await form.getByLabel("Proxy username").fill("browsermade");
    await form.getByLabel("Request-rate limit across every gateway").check();
    await form.getByLabel("Requests a second").fill("0");
    await form.getByLabel("Allowed client blocks").fill("10.0.0.0/33");
    await form.getByRole("button", { name: "Create project" }).click();
    const rateField = form.locator('[data-field="rate_limit.requests_per_second"]');
    await expect.poll(() => rateField.locator(".field-error").textContent()).toBe(
      "must be a whole number from 1 to 1000000",
    );
    await expect.poll(() => form.locator('[data-field="allowed_cidrs"] .field-error').textContent())
      .toContain("must be a CIDR block");
    // Nothing was created by the refused form.
    const before = await cluster.request("GET", "/api/v1/projects");
    expect(before.body.map((p: { username: string }) => p.username)).not.toContain("browsermade");

    await form.getByLabel("Requests a second").fill("25");
    await form.getByLabel("Allowed client blocks").fill("10.0.0.0/8\n127.0.0.0/8");
    await form.getByRole("button", { name: "Create project" }).click();
    await page.getByRole("heading", { name: "Browser made" }).waitFor();
    const after = await cluster.request("GET", "/api/v1/projects");
    const made = after.body.find((p: { username: string }) => p.username === "browsermade");
    expect(made).toMatchObject({
      rate_limit: { requests_per_second: 25, burst: 25 },
      allowed_cidrs: ["10.0.0.0/8", "127.0.0.0/8"],
    });
    // It is listed, with its rate limit.
    await page.getByRole("link", { name: "Projects" }).click();
    const row = page.getByRole("row", { name: /Browser made/ });
    await expect.poll(() => row.textContent()).toContain("25/s");
  });

  it("shows the overview's counts move after traffic through the gateway and a flush", async () => {
    const project = await createRoutedProject(cluster, [tinyproxy.url]);
    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}`);
    const requestsTile = page.locator('[data-tile="Requests in range"] .tile-value');
    await expect.poll(() => requestsTile.textContent()).toBe("0");
    await page.locator('[data-chart="Requests a second"] canvas').waitFor();

    const proxy = gateway.proxyUrl(project.credentials.username, project.credentials.password);
    const sent = 7;
    // The first once the gateway routes the project (a refusal before that is no request).
    await cluster.until(
      async () => (await curl(["-f", "-x", proxy, `${cluster.api.url}/echo`])).code === 0,
      { message: "the gateway to route the project" },
    );
    for (let i = 1; i < sent; i++) {
      const result = await curl(["-f", "-x", proxy, `${cluster.api.url}/echo`]);
      expect(result.code, result.stderr).toBe(0);
    }
    await cluster.runNow(JobKind.metricsFlush);
    // The page reads the series again every 15 s; a reload asks at once. A dash means the
    // answer has not come yet.
    await cluster.until(async () => {
      await page.reload();
      await expect.poll(() => requestsTile.textContent()).not.toBe("–");
      return (await requestsTile.textContent()) === String(sent);
    }, { message: "the overview to count the requests" });
    expect(await page.locator('[data-tile="Success rate in range"] .tile-value').textContent())
      .toBe("100.0 %");
    // The pool: one proxy, healthy; the split names the connector.
    expect(await page.locator('[data-tile="healthy"] .tile-value').textContent()).toBe("1");
    await expect.poll(() => page.getByRole("table", { name: "Traffic split" }).textContent())
      .toContain("static");
  });

  it("edits a project's settings and deletes it only after its name is typed", async () => {
    const created = await cluster.request("POST", "/api/v1/projects", {
      name: "To delete",
      username: "todelete",
    });
    const page = await asAdmin();
    await page.goto(`/projects/${created.body.id}/settings`);
    const form = page.getByRole("form", { name: "Project" });
    await form.getByLabel("Connections at once, per gateway").fill("12");
    // A quota priced in cents: the browser's own number checks must not stop the API's.
    await form.getByLabel("Traffic quota over all connectors").check();
    await form.getByLabel("Bytes a period").fill("5000000");
    await form.getByLabel("Price per GB").fill("2.5");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved" }).waitFor();
    const saved = await cluster.request("GET", `/api/v1/projects/${created.body.id}`);
    expect(saved.body.max_connections).toBe(12);
    expect(saved.body.traffic_quota).toMatchObject({ limit_bytes: 5_000_000, price_per_gb: 2.5 });
    // Its usage bar is shown at once.
    await page.getByLabel("Traffic usage").waitFor();

    const zone = page.getByRole("form", { name: "Delete project" });
    const remove = zone.getByRole("button", { name: "Delete project" });
    expect(await remove.isDisabled()).toBe(true);
    await zone.getByLabel("Project name to confirm").fill("To delet");
    expect(await remove.isDisabled()).toBe(true);
    await zone.getByLabel("Project name to confirm").fill("To delete");
    await remove.click();
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    expect((await cluster.request("GET", `/api/v1/projects/${created.body.id}`)).status).toBe(404);
  });

  it("shows a viewer every field, and lets them change none", async () => {
    const login = { username: "watcher", password: "watcher-password-1" };
    const user = await cluster.request("POST", "/api/v1/users", { ...login, role: "viewer" });
    expect(user.status).toBe(201);
    const created = await cluster.request("POST", "/api/v1/projects", {
      name: "Watched",
      username: "watched",
      rate_limit: { requests_per_second: 9 },
    });
    const page = await signedIn(browser, cluster.api.url, login);
    pages.push(page);
    await expect.poll(() => page.locator("[data-role]").textContent()).toBe("viewer");
    await page.getByRole("link", { name: "Watched" }).waitFor();
    expect(await page.getByRole("button", { name: "New project" }).count()).toBe(0);
    await page.goto(`/projects/${created.body.id}/settings`);
    const form = page.getByRole("form", { name: "Project" });
    const rate = form.getByLabel("Requests a second");
    expect(await rate.inputValue()).toBe("9");
    expect(await rate.isDisabled()).toBe(true);
    expect(await form.getByLabel("Name", { exact: true }).isDisabled()).toBe(true);
    expect(await form.getByRole("button").count()).toBe(0);
    expect(await page.getByRole("form", { name: "Delete project" }).count()).toBe(0);
    await page.getByText("Your role can see this project, not change it.").waitFor();
  });
});
