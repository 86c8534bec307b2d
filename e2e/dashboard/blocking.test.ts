/**
 * Block verdicts in the dashboard, in a real browser (Debian's chromium) against the admin API and
 * its served build: the project form adds a shipped rule by name and saves the retry budget; a rule
 * the API refuses is listed with its place and the API's words, and nothing is stored; the Domains
 * tab shows what the gateways counted per site (written here by the gateway's own writer), with
 * the blocked attempts' spend, the tier an escalated site is served from, and a site's escalation
 * line and connectors beneath it, and the overview sums today's verdicts up; the form sets
 * escalation's thresholds.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { DomainCounts } from "../../gateway/blocking/domain-counts.ts";
import { runScript } from "../../shared/lua/loader.ts";
import { loadScriptNode } from "../../testkit/metering.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let browser: Browser;
const pages: Page[] = [];

beforeAll(async () => {
  await ensureWebBuild();
  browser = await launchBrowser();
  h = await startHarness();
  api = await listen(h.app);
}, 180_000);

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await api?.close();
  await h?.close();
});

async function asEditor(): Promise<Page> {
  const page = await signedIn(browser, `http://127.0.0.1:${api.port}`, {
    username: "editor",
    password: "password-editor",
  });
  pages.push(page);
  return page;
}

const stored = async (id: string) =>
  (await h.request("GET", `/api/v1/projects/${id}`, { token: h.tokens.viewer })).body;

describe("the project form's block verdicts", () => {
  it("adds a shipped rule, saves the retry budget, and lists a refused rule by its place", async () => {
    const made = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Judged", username: "judged" },
    });
    const page = await asEditor();
    await page.goto(`/projects/${made.body.id}/settings`);
    const form = page.getByRole("form", { name: "Project" });
    const fields = form.getByRole("group", { name: "Block verdicts" });
    const rules = fields.locator('textarea[name="block_rules"]');
    await expect.poll(() => rules.inputValue()).toBe("[]");

    // A rule the API cannot read: listed with its place, nothing stored.
    await rules.fill(
      JSON.stringify([{
        name: "waf",
        header: { name: "x-waf", pattern: "([" },
        verdict: "blocked",
      }]),
    );
    await form.getByRole("button", { name: "Save changes" }).click();
    const refused = fields.getByTestId("block-rules-refused");
    await expect.poll(() => refused.textContent()).toContain("block_rules.0.header.pattern");
    expect(await refused.textContent()).toContain("is not a valid regular expression");
    expect((await stored(made.body.id)).block_rules).toEqual([]);

    // Text that is not JSON is said at once.
    await rules.fill("[{");
    await expect.poll(() => fields.getByTestId("block-rules-json").count()).toBe(1);

    // A preset added by name, a retry budget, saved.
    await rules.fill("[]");
    await fields.locator('select[name="block_preset"]').selectOption("cloudflare-challenge");
    await expect.poll(() => rules.inputValue()).toContain('"preset": "cloudflare-challenge"');
    await fields.locator('input[name="retry_attempts"]').fill("4");
    await fields.locator('input[name="retry_methods"]').fill("GET, POST");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByRole("status").waitFor();
    const saved = await stored(made.body.id);
    expect(saved.block_rules).toEqual([{
      name: "cloudflare-challenge",
      mode: "on",
      preset: "cloudflare-challenge",
      verdict: "blocked",
      cool_down_seconds: 600,
    }]);
    expect(saved.retry).toEqual({
      attempts: 4,
      methods: ["GET", "POST"],
      max_total_seconds: 30,
      rebind_sticky: false,
    });

    // Per-domain routing: a pattern that does not parse is refused with its place, a refusal
    // rule saved.
    const domainRules = fields.locator('textarea[name="domain_rules"]');
    await domainRules.fill(JSON.stringify([{ domains: ["a b.example"], action: "refuse" }]));
    await form.getByRole("button", { name: "Save changes" }).click();
    const domainRefused = fields.getByTestId("domain-rules-refused");
    await expect.poll(() => domainRefused.textContent()).toContain("domain_rules.0.domains.0");
    await domainRules.fill(
      JSON.stringify([{ domains: [".wall.example"], action: "refuse", reason: "Not here" }]),
    );
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(async () => (await stored(made.body.id)).domain_rules).toEqual([
      { domains: [".wall.example"], action: "refuse", reason: "Not here" },
    ]);

    // Escalation between tiers: a threshold out of bounds is refused beside its field.
    await fields.getByLabel(/Escalate sites between connector tiers/).check();
    const upAfter = fields.locator('input[name="escalation_up_after_blocks"]');
    await upAfter.fill("0");
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() =>
      fields.locator('[data-field="escalation.up_after_blocks"]').textContent()
    )
      .toContain("must be a whole number, 1-1000");
    expect((await stored(made.body.id)).escalation).toBeNull();
    await upAfter.fill("2");
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(async () => (await stored(made.body.id)).escalation).toEqual({
      up_after_blocks: 2,
      probe_after_seconds: 600,
      down_after_probes: 3,
    });
  });
});

describe("the Domains tab", () => {
  it("shows each site's counts, the most blocked first, and its connectors", async () => {
    const made = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: {
        name: "Sites",
        username: "sitesdash",
        block_rules: [{ preset: "captcha-page" }],
        escalation: {},
      },
    });
    const id = made.body.id;
    const connector = await h.request("POST", `/api/v1/projects/${id}/connectors`, {
      token: h.tokens.editor,
      body: {
        name: "datacenter",
        kind: "static",
        traffic_config: { limit_bytes: null, period: "day", price_per_gb: 4, currency: "USD" },
      },
    });
    const counts = new DomainCounts({
      redis: h.deps.redis,
      keys: h.deps.keys,
      logger: { info() {}, warn() {} },
      writeTimeoutMs: 2_000,
    });
    counts.judged(id, "news.example", connector.body.id, "ok", 0);
    counts.judged(id, "shop.example", connector.body.id, "blocked", 250_000_000);
    counts.retried(id, "shop.example", connector.body.id);
    counts.judged(id, "shop.example", connector.body.id, "ok", 0);
    await counts.close();
    // A dearer connector, and the gateways' script moving shop.example up to it.
    await h.request("POST", `/api/v1/projects/${id}/connectors`, {
      token: h.tokens.editor,
      body: {
        name: "residential",
        kind: "static",
        traffic_config: { limit_bytes: null, period: "day", price_per_gb: 8, currency: "USD" },
      },
    });
    await runScript(
      h.deps.redis,
      await loadScriptNode("escalation_report"),
      [h.deps.keys.escalation(id), h.deps.keys.escalationVersion(id)],
      [
        String(Date.now()),
        "3",
        "3",
        "600000",
        "1",
        "3600",
        "100",
        "shop.example",
        "0",
        "0",
        "3",
        "1",
        "0",
      ],
    );

    const page = await asEditor();
    await page.goto(`/projects/${id}/domains`);
    expect(await page.getByTestId("block-rules-summary").textContent()).toContain("captcha-page");
    const table = page.getByRole("table", { name: "Sites" });
    const rows = table.locator(":scope > tbody > tr");
    await expect.poll(() => rows.count()).toBe(2);
    const cells = async (index: number) =>
      (await rows.nth(index).locator("td").allTextContents()).map((text) => text.trim());
    expect(await cells(0)).toEqual([
      "shop.example",
      "2",
      "1",
      "0",
      "1",
      "250 MB",
      "1.0000 USD",
      "1.000000 USD",
      "–",
      "0",
      "residential",
    ]);
    expect((await cells(1))[0]).toBe("news.example");
    expect((await cells(1))[10]).toBe("–");

    await rows.nth(0).getByRole("button", { name: "shop.example" }).click();
    expect(await page.getByTestId("escalation-summary").textContent()).toMatch(
      /^shop\.example: residential since \d\d:\d\d UTC after 3 blocks on datacenter; next probe down in 10 min$/,
    );
    const connectors = page.getByRole("table", { name: "Connectors on shop.example" });
    await expect.poll(() => connectors.locator("tbody tr").count()).toBe(1);
    expect(
      (await connectors.locator("tbody tr td").allTextContents()).map((text) => text.trim()),
    ).toEqual(["datacenter", "1", "1", "0", "1", "250 MB", "1.0000 USD", "1.000000 USD"]);

    // The overview sums today's verdicts up and names the most blocked sites.
    await page.goto(`/projects/${id}`);
    const verdicts = page.getByRole("region", { name: "Block verdicts today" });
    const tile = (label: string) =>
      verdicts.locator(`[data-tile="${label}"] .tile-value`).textContent();
    await expect.poll(() => tile("Blocked today")).toBe("1");
    expect(await tile("Judged today")).toBe("3");
    expect(await tile("Retries today")).toBe("1");
    expect(await tile("Spend on blocked today")).toBe("1.00 USD");
    expect(await tile("Sites escalated")).toBe("1");
    expect(await verdicts.getByTestId("most-blocked").textContent()).toContain("shop.example (1)");
  });
});
