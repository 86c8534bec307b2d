/**
 * The Alerts page in a real browser against a control process of role all: an admin adds a
 * webhook channel to a receiver of the test's own (its signing secret shown once), presses Send
 * test and sees the delivery in the log with its try; a rule's threshold out of range is named
 * on the field, and a good one is listed; a rule is narrowed to one connector of a project.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { signBody } from "../../control/alerts/signature.ts";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { Cluster } from "../../testkit/cluster.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../../testkit/webhook-receiver.ts";

let cluster: Cluster;
let browser: Browser;
let receiver: WebhookReceiver;
let page: Page | undefined;

beforeAll(async () => {
  await ensureWebBuild();
  [browser, receiver] = await Promise.all([launchBrowser(), startWebhookReceiver([500])]);
  cluster = await Cluster.create({ env: { OCTOPROX_ALERT_RETRY_BASE_DELAY: "0.1" } });
  await cluster.start("all");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await page?.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  await receiver?.close();
});

describe("the Alerts page", () => {
  it("adds a channel, sends a test and shows the delivery with its tries", async () => {
    page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
    await page.getByRole("link", { name: "Alerts" }).click();
    const form = page.getByRole("form", { name: "New channel" });
    await form.getByLabel("Channel name").fill("receiver");
    await form.getByLabel("Channel URL").fill(receiver.url);
    await form.getByRole("button", { name: "Add channel" }).click();
    // Loopback without the leave: refused on the URL's field.
    await expect.poll(() => form.locator('[data-field="url"] .field-error').textContent())
      .toContain("loopback");
    await form.getByLabel("Allow a private or loopback address").check();
    await form.getByRole("button", { name: "Add channel" }).click();

    const box = page.getByRole("region", { name: "New channel secret" });
    await box.getByText("you will not see it again").waitFor();
    const secret = await box.getByLabel("The signing secret").inputValue();
    expect(secret).toMatch(/^whsec_/);
    cluster.secretsScan.add("alert channel secret", secret);
    await box.getByRole("button", { name: "Done" }).click();

    const row = page.locator('tr[data-channel="receiver"]');
    await row.getByRole("button", { name: "Send test" }).click();
    // The receiver answers 500 first: the log shows that try, then the one it took.
    const log = page.getByRole("table", { name: "Delivery log" });
    await expect.poll(() => log.textContent(), { timeout: 15_000 }).toContain("delivered");
    const text = await log.textContent();
    expect(text).toContain("answered 500");
    expect(text).toContain("answered 200");
    expect(text).toContain("test");
    expect(receiver.received.map((r) => r.status)).toEqual([500, 200]);
    const [, taken] = receiver.received;
    const timestamp = Number(taken.headers["x-octoprox-timestamp"]);
    expect(taken.headers["x-octoprox-signature"]).toBe(signBody(secret, timestamp, taken.body));
    expect(await page.content()).not.toContain(secret);
  });

  it("names a threshold out of range on its field, and lists a good rule", async () => {
    page ??= await signedIn(browser, cluster.api.url, cluster.adminLogin);
    await page.getByRole("link", { name: "Alerts" }).click();
    const form = page.getByRole("form", { name: "New rule" });
    await form.getByLabel("Rule name").fill("backlog");
    await form.getByLabel("Watches").selectOption("job_backlog");
    await form.getByLabel("Threshold (entries)").fill("0");
    await form.getByRole("button", { name: "Add rule" }).click();
    await expect.poll(() => form.locator('[data-field="threshold"] .field-error').textContent())
      .toContain("must be a number from 1 to 10000000");
    await form.getByLabel("Threshold (entries)").fill("500");
    await form.getByLabel("receiver").check();
    await form.getByRole("button", { name: "Add rule" }).click();
    const rule = page.locator('tr[data-rule="backlog"]');
    await rule.waitFor();
    expect(await rule.textContent()).toContain("receiver");
  });

  it("scopes a rule to one connector of a project", async () => {
    const project = await cluster.request("POST", "/api/v1/projects", {
      name: "watched",
      username: "watched",
    });
    expect(project.status).toBe(201);
    const connector = await cluster.request(
      "POST",
      `/api/v1/projects/${project.body.id}/connectors`,
      { name: "cheap pool", kind: "static" },
    );
    expect(connector.status).toBe(201);
    page ??= await signedIn(browser, cluster.api.url, cluster.adminLogin);
    await page.getByRole("link", { name: "Alerts" }).click();
    await page.reload();
    const form = page.getByRole("form", { name: "New rule" });
    await form.getByLabel("Rule name").fill("quarantines");
    await form.getByLabel("Watches").selectOption("quarantine_storm");
    await form.getByLabel("Threshold (proxies)").fill("5");
    await form.getByLabel(/^Project/).selectOption({ label: "watched" });
    await form.getByLabel(/^Connector/).selectOption({ label: "cheap pool" });
    await form.getByRole("button", { name: "Add rule" }).click();
    await page.locator('tr[data-rule="quarantines"]').waitFor();
    const rules = await cluster.request("GET", "/api/v1/alerts/rules");
    expect(rules.body.find((r: { name: string }) => r.name === "quarantines")).toMatchObject({
      project_id: null,
      connector_id: connector.body.id,
      threshold: 5,
    });
  });
});
