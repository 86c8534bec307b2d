/**
 * The dashboard's failures, system, users and API-token pages in a real browser against a real
 * system (a control process of role all, a real gateway, a tinyproxy upstream). Failing traffic
 * through the gateway shows on a project's Failures tab with its example after a flush; the
 * System page lists the running processes with their heartbeat and the leader, and tells a
 * viewer or an editor it is for admins; an admin creates a user who then signs in, and invites
 * one who chooses a password through the link (once) and signs in; an API token
 * is shown once, works as a Bearer token, and stops working once revoked; the audit page shows
 * a change made in the dashboard with its fields before and after.
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

async function as(login: { username: string; password: string }): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, login);
  pages.push(page);
  return page;
}

async function makeUser(username: string, role: string) {
  const login = { username, password: `${username}-password-1` };
  const made = await cluster.request("POST", "/api/v1/users", { ...login, role });
  expect(made.status).toBe(201);
  return login;
}

describe("the failures page", () => {
  it("shows failure kinds after failing traffic and a flush, and their examples", async () => {
    const project = await createRoutedProject(cluster, [tinyproxy.url]);
    const { username, password } = project.credentials;
    // Routed first: the gateway has the project's feed.
    await cluster.until(
      async () =>
        (await curl(["-f", "-x", gateway.proxyUrl(username, password), `${cluster.api.url}/echo`]))
          .code === 0,
      { message: "a request through the gateway" },
    );
    // No proxy of the project is in the country asked for (its proxy has none): the gateway's
    // own refusal.
    const refused = await curl([
      "-x",
      gateway.proxyUrl(`${username}-cc-de`, password),
      `${cluster.api.url}/echo`,
    ]);
    expect(refused.code, refused.stderr).toBe(0);
    // A tunnel to a closed port: tinyproxy refuses the CONNECT.
    const tunnel = await curl([
      "-p",
      "-x",
      gateway.proxyUrl(username, password),
      "http://127.0.0.1:1/",
    ]);
    expect(tunnel.code).not.toBe(0);

    const base = `/api/v1/projects/${project.projectId}`;
    // The gateway's windows reach Redis within a metering interval; each flush takes what came.
    await cluster.until(async () => {
      await cluster.runNow(JobKind.metricsFlush);
      const kinds = (await cluster.request("GET", `${base}/failures?range=1h`)).body.by_kind
        .map((row: { kind: string }) => row.kind);
      return kinds.includes("no_proxy_available") && kinds.includes("upstream_refused");
    }, { message: "the failures to be flushed", timeoutMs: 30_000, intervalMs: 500 });

    const page = await as(cluster.adminLogin);
    await page.goto(`/projects/${project.projectId}`);
    await page.getByRole("link", { name: "Failures" }).click();
    const byKind = page.getByRole("table", { name: "Failures by kind" });
    await expect.poll(() => byKind.textContent()).toContain("no proxy available");
    expect(await byKind.textContent()).toContain("upstream refused");
    // Split by connector: the refusal has none, the refused tunnel is the connector's.
    const byConnector = page.getByRole("table", { name: "Failures by connector" });
    const refusedRow = byConnector.getByRole("row", { name: /upstream refused/ });
    await expect.poll(() => refusedRow.textContent()).toContain("static");
    const noProxyRow = byConnector.getByRole("row", { name: /no proxy available/ });
    expect(await noProxyRow.textContent()).toContain("none: the gateway refused it");

    // Clicking a kind shows its examples, scrubbed, newest first.
    await byKind.getByRole("button", { name: "no proxy available" }).click();
    await page.getByRole("heading", { name: "Examples: no proxy available" }).waitFor();
    const examples = page.getByRole("table", { name: "Failure examples" });
    // The example of the refusal for DE (the gateways send examples every few seconds).
    await expect.poll(async () => {
      const text = await examples.textContent();
      if (!text?.includes("No upstream proxy available for DE")) {
        await page.getByRole("button", { name: "Refresh" }).click();
      }
      return text;
    }).toContain("No upstream proxy available for DE");
    const rows = examples.locator("tbody tr");
    // A Refresh clicked in the last round of the poll may empty the list once more after it
    // passed: its rows come back with that read.
    await expect.poll(() => rows.count()).toBeGreaterThanOrEqual(1);
    for (const text of await rows.allTextContents()) expect(text).toContain("no proxy available");
    expect(await examples.textContent()).not.toContain(password);

    // The connector filter narrows the counts to the connector's own failures.
    await page.locator('select[name="connector"]').selectOption({ label: "static" });
    await expect.poll(() => byKind.textContent()).not.toContain("no proxy available");
    expect(await byKind.textContent()).toContain("upstream refused");

    // The overview's top failures name the same kinds with their counts.
    await page.goto(`/projects/${project.projectId}`);
    const top = page.getByRole("table", { name: "Top failures" });
    await expect.poll(() => top.textContent()).toContain("no proxy available");
    expect(await top.textContent()).toContain("upstream refused");
    expect(await top.textContent()).not.toContain("[object Object]");
  });
});

describe("the system page", () => {
  it("lists the running processes with a ticking heartbeat, the leader and the feed", async () => {
    await cluster.runNow(JobKind.snapshot);
    const page = await as(cluster.adminLogin);
    await page.getByRole("link", { name: "System" }).click();
    const processes = page.getByRole("table", { name: "Processes" });
    const control = processes.locator(`tr[data-instance="${cluster.api.instance}"]`);
    const gatewayRow = processes.locator(`tr[data-instance="${gateway.instance}"]`);
    await control.waitFor();
    await gatewayRow.waitFor();
    expect(await control.textContent()).toContain("all");
    expect(await gatewayRow.textContent()).toContain("gateway");
    // The heartbeat's age, counted on in the browser between reads.
    const heartbeat = control.locator("[data-heartbeat]");
    expect(await heartbeat.textContent()).toMatch(/\d+ (ms|s) ago/);
    const first = await heartbeat.textContent();
    await expect.poll(() => heartbeat.textContent(), { timeout: 5_000 }).not.toBe(first);
    // The control process leads, and is marked so.
    expect(await page.locator("[data-leader]").textContent()).toBe(cluster.api.instance);
    expect(await control.textContent()).toContain("leader");
    // The gateway has applied the feed's head (as its next heartbeat says, read within 5 s).
    const feed = page.getByRole("table", { name: "Gateways against the feed" });
    await expect.poll(
      () => feed.locator(`tr[data-instance="${gateway.instance}"]`).textContent(),
      { timeout: 20_000 },
    ).toContain("current");
    // The work streams, and the storage figures from the snapshot's reading.
    await expect.poll(() => page.getByRole("table", { name: "Work streams" }).textContent())
      .toContain("jobs.health");
    await expect.poll(() => page.locator('[data-tile="Database"] .tile-value').textContent(), {
      timeout: 15_000,
    }).toMatch(/\d+(\.\d)? (KB|MB|GB)/);
    // One reading so far: its trends draw from the second.
    await page.getByText("One reading so far").waitFor();
  });

  it("tells a viewer and an editor it is for admins only", async () => {
    for (const role of ["viewer", "editor"]) {
      const page = await as(await makeUser(`sys${role}`, role));
      expect(await page.getByRole("link", { name: "System" }).count()).toBe(0);
      await page.goto("/system");
      const alert = page.getByRole("alert");
      await expect.poll(() => alert.textContent()).toContain("Admins only.");
      expect(await alert.textContent()).toContain(`you are ${role}`);
      expect(await page.getByRole("table", { name: "Processes" }).count()).toBe(0);
    }
  });
});

describe("users", () => {
  it("creates a viewer who can then sign in, and refuses an admin's removal of itself", async () => {
    const page = await as(cluster.adminLogin);
    await page.getByRole("link", { name: "Users" }).click();
    await page.getByRole("button", { name: "New user" }).click();
    const form = page.getByRole("form", { name: "New user" });
    await form.getByLabel("Username").fill("newviewer");
    await form.getByLabel("Password").fill("short");
    await form.getByRole("button", { name: "Create user" }).click();
    await expect.poll(() => form.locator('[data-field="password"] .field-error').textContent())
      .toBe("must be at least 8 characters");
    await form.getByLabel("Password").fill("newviewer-pass-1");
    await form.getByLabel("Email").fill("viewer@example.com");
    await form.getByRole("button", { name: "Create user" }).click();
    const row = page.locator('tr[data-user="newviewer"]');
    await row.waitFor();
    expect(await row.textContent()).toContain("viewer@example.com");
    expect(await row.locator("select").inputValue()).toBe("viewer");

    const viewer = await as({ username: "newviewer", password: "newviewer-pass-1" });
    await expect.poll(() => viewer.locator("[data-role]").textContent()).toBe("viewer");
    expect(await viewer.getByRole("link", { name: "Users" }).count()).toBe(0);

    // A role change in place, then a deactivation: the API holds both.
    await row.locator("select").selectOption("editor");
    await expect.poll(async () =>
      (await cluster.request("GET", "/api/v1/users")).body.find((u: { username: string }) =>
        u.username === "newviewer"
      ).role
    ).toBe("editor");
    await row.getByRole("button", { name: "Deactivate" }).click();
    await expect.poll(() => row.textContent()).toContain("deactivated");
    const login = await fetch(`${cluster.api.url}/api/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "newviewer", password: "newviewer-pass-1" }),
    });
    expect(login.status).toBe(401);

    // Deleting oneself is refused in the API's words.
    const self = page.locator('tr[data-user="admin"]');
    await self.getByRole("button", { name: "Delete" }).click();
    await self.getByRole("button", { name: "Delete admin for good" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toContain(
      "You cannot delete your own account",
    );
    await page.reload();
    await page.locator('tr[data-user="admin"]').waitFor();

    // Deleting another user.
    await row.getByRole("button", { name: "Delete" }).click();
    await row.getByRole("button", { name: "Delete newviewer for good" }).click();
    await expect.poll(() => row.count()).toBe(0);
  });
});

describe("the audit page", () => {
  it("shows a change made in the dashboard, by whom and how, and its fields before and after", async () => {
    const page = await as(cluster.adminLogin);
    const made = await cluster.request("POST", "/api/v1/users", {
      username: "audited",
      password: "audited-password-1",
      role: "viewer",
    });
    expect(made.status).toBe(201);
    await page.getByRole("link", { name: "Users" }).click();
    const row = page.locator('tr[data-user="audited"]');
    await row.waitFor();
    await row.locator("select").selectOption("editor");
    await expect.poll(async () =>
      (await cluster.request("GET", "/api/v1/users")).body.find((u: { username: string }) =>
        u.username === "audited"
      ).role
    ).toBe("editor");

    await page.getByRole("link", { name: "Audit" }).click();
    await page.getByRole("combobox", { name: "Entity" }).selectOption("user");
    const entry = page.locator("tr[data-audit]").filter({ hasText: "dashboard" }).first();
    await entry.waitFor();
    expect(await entry.textContent()).toContain('role: "viewer" → "editor"');
    expect(await entry.textContent()).toContain("audited");
    await entry.getByRole("button", { name: "Details" }).click();
    const after = page.getByLabel("After");
    await expect.poll(() => after.textContent()).toContain('"role": "editor"');
    // The user's creation, through the api by the same admin: the hash is masked.
    const created = page.locator("tr[data-audit]").filter({ hasText: "create" }).first();
    await created.getByRole("button", { name: "Details" }).click();
    await expect.poll(() => page.getByLabel("After").last().textContent()).toContain(
      '"password_hash": "********"',
    );
  });
});

describe("invitations", () => {
  it("invites a user who chooses a password through the link once, then signs in", async () => {
    const page = await as(cluster.adminLogin);
    await page.getByRole("link", { name: "Users" }).click();
    await page.getByRole("button", { name: "New user" }).click();
    const form = page.getByRole("form", { name: "New user" });
    await form.getByLabel("Username").fill("invitee");
    await form.getByLabel(/^Invite:/).check();
    expect(await form.getByLabel("Password").count()).toBe(0);
    await form.getByRole("button", { name: "Invite user" }).click();
    const url = await page.getByTestId("invite-url").textContent();
    expect(url).toMatch(/\/set-password\?token=/);

    // The link, in a browser nobody signed in to.
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const guest = await context.newPage();
      await guest.goto(url!);
      const screen = guest.getByRole("form", { name: "Set your password" });
      await screen.getByLabel("New password", { exact: true }).fill("invitee-pass-1");
      await screen.getByLabel("New password again").fill("invitee-pass-1");
      await screen.getByRole("button", { name: "Set password" }).click();
      await expect.poll(() => screen.getByRole("status").textContent()).toContain(
        "Your password is set",
      );
      // The same link again: said so, and nothing changes.
      await guest.goto(url!);
      await screen.getByLabel("New password", { exact: true }).fill("other-pass-22");
      await screen.getByLabel("New password again").fill("other-pass-22");
      await screen.getByRole("button", { name: "Set password" }).click();
      await expect.poll(() => screen.getByRole("alert").last().textContent()).toContain(
        "was used already",
      );
    } finally {
      await context.close();
    }
    const invitee = await as({ username: "invitee", password: "invitee-pass-1" });
    await expect.poll(() => invitee.locator("[data-role]").textContent()).toBe("viewer");
  });
});

describe("API tokens", () => {
  it("shows a new token once; it works as a Bearer token until revoked", async () => {
    const page = await as(await makeUser("tokenowner", "viewer"));
    await page.getByRole("link", { name: "API tokens" }).click();
    const form = page.getByRole("form", { name: "New API token" });
    await form.getByLabel("Name").fill("ci");
    await form.getByLabel("Expires after (days)").fill("0");
    await form.getByRole("button", { name: "Create token" }).click();
    await expect.poll(() =>
      form.locator('[data-field="expires_in_days"] .field-error').textContent()
    )
      .toBe("must be a whole number from 1 to 3650");
    await form.getByLabel("Expires after (days)").fill("30");
    await form.getByRole("button", { name: "Create token" }).click();

    const box = page.getByRole("region", { name: "New token" });
    await box.getByText("you will not see it again").waitFor();
    const token = await box.getByLabel("The new token").inputValue();
    expect(token).toMatch(/^oxp_/);
    const me = (bearer: string) =>
      fetch(`${cluster.api.url}/api/v1/auth/me`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
    const answer = await me(token);
    expect(answer.status).toBe(200);
    expect((await answer.json()).username).toBe("tokenowner");

    // Listed by its prefix; after a reload the token itself is nowhere on the page.
    const row = page.locator('tr[data-token="ci"]');
    await expect.poll(() => row.textContent()).toContain(token.slice(0, 12));
    await page.reload();
    await row.waitFor();
    expect(await page.getByRole("region", { name: "New token" }).count()).toBe(0);
    expect(await page.content()).not.toContain(token);
    expect(await row.textContent()).toContain("active");

    await row.getByRole("button", { name: "Revoke" }).click();
    await row.getByRole("button", { name: "Revoke ci now" }).click();
    await expect.poll(() => row.textContent()).toContain("revoked");
    expect(await row.getByRole("button").count()).toBe(0);
    expect((await me(token)).status).toBe(401);
  });
});
