/**
 * The Inspector page in a real browser (Debian's chromium) against the admin API and its served
 * build, over real Postgres and Redis: captures written into the project's stream as a gateway
 * writes them (encodeMitmCapture) show newest first with their exit by name; new ones show while
 * the page is open, a burst of more than a read's page included; the filters narrow by text,
 * status and method; a row opens the headers before and after the gateway's rewrite (what it took
 * out or added marked), the answer's headers, JA3, JA4, SNI and timings; a viewer reads and has
 * no Clear; an editor clears after a second click; a project whose interception is off says so.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { sampleCapture, writeCaptures } from "../../testkit/mitm-captures.ts";
import type { MitmCapture } from "../../shared/mitm-captures.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let browser: Browser;
const pages: Page[] = [];
let projectId: string;
let connectorId: string;
let proxyId: string;

beforeAll(async () => {
  await ensureWebBuild();
  browser = await launchBrowser();
  h = await startHarness();
  api = await listen(h.app);
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Inspected", username: "inspected", tls_mitm_mode: "plain" },
  });
  expect(project.status, project.text).toBe(201);
  projectId = project.body.id;
  const connector = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name: "residential", kind: "static" },
  });
  connectorId = connector.body.id;
  const proxy = await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connectorId, url: "http://login:proxy-secret@203.0.113.9:3128" },
  });
  expect(proxy.status, proxy.text).toBe(201);
  proxyId = proxy.body.id;
}, 180_000);

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await api?.close();
  await h?.close();
});

async function as(role: "editor" | "viewer"): Promise<Page> {
  const page = await signedIn(browser, `http://127.0.0.1:${api.port}`, {
    username: role,
    password: `password-${role}`,
  });
  pages.push(page);
  return page;
}

const write = (captures: MitmCapture[]) =>
  writeCaptures(h.deps.redis, h.deps.keys, projectId, captures);

/** A capture through the project's exit. */
const through = (overrides: Partial<MitmCapture>) =>
  sampleCapture({ connectorId, proxyId, ...overrides });

describe("the Inspector", () => {
  it("shows captures live, filters them, and opens one's headers and fingerprints", async () => {
    await write([
      through({ path: "/home", host: "shop.example:443" }),
      through({
        method: "POST",
        path: "/checkout?…",
        host: "pay.example:443",
        status: 201,
        bytesUp: 2_048,
        bytesDown: 700,
        totalMs: 1_530,
        firstByteMs: 1_200,
      }),
      sampleCapture({
        path: "/limited",
        host: "api.example:443",
        status: 429,
        proxyStatus: "rate_limited",
        firstByteMs: null,
        totalMs: 1,
      }),
    ]);
    const page = await as("viewer");
    await page.goto(`/projects/${projectId}`);
    await page.getByRole("link", { name: "Inspector" }).click();
    await page.getByRole("heading", { name: "Inspector" }).waitFor();
    const table = page.getByRole("table", { name: "Intercepted requests" });
    const rows = table.locator("tbody tr[data-capture]");
    await expect.poll(() => rows.count()).toBe(3);
    // Newest first, with their exit by name and address (never the proxy's login).
    const texts = await rows.allTextContents();
    expect(texts[0]).toContain("/limited");
    expect(texts[0]).toContain("rate limited");
    expect(texts[0]).toContain("429");
    expect(texts[1]).toContain("POST");
    expect(texts[1]).toContain("pay.example:443");
    expect(texts[1]).toContain("1.53 s");
    expect(texts[1]).toContain("residential · 203.0.113.9:3128");
    expect(texts[1]).toContain("2.0 KB / 700 B");
    expect(texts[2]).toContain("/home");
    expect(await page.content()).not.toContain("proxy-secret");
    // A viewer reads; clearing is for editors.
    expect(await page.getByRole("button", { name: "Clear" }).count()).toBe(0);

    // New captures show while the page is open: one, then a burst past a read's page (100).
    await write([through({ path: "/live-one", host: "news.example:443" })]);
    await expect.poll(() => rows.first().textContent(), { timeout: 10_000 }).toContain(
      "/live-one",
    );
    const burst = Array.from(
      { length: 150 },
      (_, i) => through({ path: `/burst/${i}`, host: "burst.example:443" }),
    );
    await write(burst);
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(154);
    expect(await rows.first().textContent()).toContain("/burst/149");
    expect(await rows.nth(149).textContent()).toContain("/burst/0");
    expect(await rows.nth(150).textContent()).toContain("/live-one");

    // Filters: text, status class, method; each narrows what is loaded.
    const search = page.getByLabel("Search");
    await search.fill("burst.example");
    await expect.poll(() => rows.count()).toBe(150);
    await search.fill("");
    await page.locator('select[name="status"]').selectOption({ label: "4xx" });
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain("/limited");
    await page.locator('select[name="status"]').selectOption({ label: "The gateway's own answer" });
    await expect.poll(() => rows.count()).toBe(1);
    await page.locator('select[name="status"]').selectOption({ label: "Any status" });
    await page.locator('select[name="method"]').selectOption("POST");
    await expect.poll(() => rows.count()).toBe(1);
    await search.fill("nothing-matches-this");
    await page.getByText("No capture loaded matches the filters.").waitFor();
    await search.fill("");

    // A row opens its details beneath it.
    await rows.first().getByRole("button", { name: "/checkout?…" }).click();
    const details = page.getByRole("region", { name: "Request details" });
    await details.waitFor();
    expect(await details.getByRole("heading").first().textContent()).toContain(
      "POST pay.example:443/checkout?…",
    );
    const fact = (name: string) => details.locator(`[data-fact="${name}"] dd`).textContent();
    expect(await fact("JA3")).toBe("cd08e31494f9531f560d64c695473da9");
    expect(await fact("JA4")).toBe("t13d1516h2_8daaf6152771_e5627efa2ab1");
    expect(await fact("SNI")).toBe("shop.example");
    expect(await fact("First byte")).toBe("1.20 s");
    expect(await fact("Total")).toBe("1.53 s");
    expect(await fact("Status")).toBe("201");
    expect(await fact("Exit")).toBe("residential · 203.0.113.9:3128");
    expect(await fact("Interception")).toBe("plain");
    // Before and after the rewrite: what the gateway took out is marked; secrets scrubbed.
    const client = details.getByRole("table", { name: "Headers from the client" });
    const sent = details.getByRole("table", { name: "Headers sent to the target" });
    const answer = details.getByRole("table", { name: "Response headers" });
    const clientSession = client.getByRole("row", { name: /X-Octoprox-Session/ });
    expect(await clientSession.textContent()).toContain("taken out");
    expect(await client.getByRole("row", { name: /Authorization/ }).textContent()).toContain(
      "[scrubbed]",
    );
    expect(await client.getByRole("row", { name: /User-Agent/ }).getAttribute("data-mark"))
      .toBeNull();
    expect(await sent.locator("tr").count()).toBe(2);
    expect(await sent.textContent()).not.toContain("X-Octoprox-Session");
    expect(await answer.getByRole("row", { name: /Set-Cookie/ }).textContent()).toContain(
      "[scrubbed]",
    );
    // It stays open while new captures come, and closes.
    await write([through({ path: "/while-open" })]);
    await page.locator('select[name="method"]').selectOption("");
    await expect.poll(() => rows.first().textContent(), { timeout: 10_000 }).toContain(
      "/while-open",
    );
    expect(await details.isVisible()).toBe(true);
    await details.getByRole("button", { name: "Close" }).click();
    await expect.poll(() => details.count()).toBe(0);

    // Live off: nothing new shows until it is on again.
    await page.getByLabel("Live").uncheck();
    await write([through({ path: "/paused" })]);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await rows.first().textContent()).not.toContain("/paused");
    await page.getByLabel("Live").check();
    await expect.poll(() => rows.first().textContent(), { timeout: 10_000 }).toContain(
      "/paused",
    );
  });

  it("pages back to older captures, and lets an editor clear them after a second click", async () => {
    await h.deps.redis.del(h.deps.keys.mitmRequests(projectId));
    await write(Array.from({ length: 130 }, (_, i) => through({ path: `/page/${i}` })));
    const page = await as("editor");
    await page.goto(`/projects/${projectId}/inspector`);
    const rows = page.getByRole("table", { name: "Intercepted requests" }).locator(
      "tbody tr[data-capture]",
    );
    await expect.poll(() => rows.count()).toBe(100);
    await page.getByRole("button", { name: "Load older" }).click();
    await expect.poll(() => rows.count()).toBe(130);
    expect(await rows.last().textContent()).toContain("/page/0");
    expect(await page.getByRole("button", { name: "Load older" }).count()).toBe(0);

    await page.getByRole("button", { name: "Clear", exact: true }).click();
    await page.getByRole("button", { name: "Keep" }).click();
    expect(await rows.count()).toBe(130);
    await page.getByRole("button", { name: "Clear", exact: true }).click();
    await page.getByRole("button", { name: "Clear them now" }).click();
    await page.getByText("Nothing captured yet.").waitFor();
    expect(await rows.count()).toBe(0);
    expect(await h.deps.redis.exists(h.deps.keys.mitmRequests(projectId))).toBe(0);
    // The next capture shows as the list starts again.
    await write([through({ path: "/after-clear" })]);
    await expect.poll(() => rows.first().textContent(), { timeout: 10_000 }).toContain(
      "/after-clear",
    );
  });

  it("says when the project's interception is off", async () => {
    const off = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Raw", username: "raw" },
    });
    const page = await as("viewer");
    await page.goto(`/projects/${off.body.id}/inspector`);
    await page.getByRole("note").waitFor();
    expect(await page.getByRole("note").textContent()).toContain(
      "TLS interception is off for this project",
    );
    await page.getByText("Nothing captured yet.").waitFor();
  });
});
