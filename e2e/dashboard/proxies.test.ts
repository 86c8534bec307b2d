/**
 * A project's proxies page in a real browser against a real system (a control process of role
 * all with its worker's health checks, a real gateway, a real tinyproxy upstream):
 *
 * - an upload of 1,000 lines (ten bad) shows its progress bar and then the refused lines with
 *   their reasons; the proxies at the tinyproxy turn healthy by real health checks;
 * - paging and a sort change the rows shown, to what the API answers for them;
 * - a connector's rate limit, filled by real requests through the gateway, quarantines its
 *   proxy: the page counts the quarantine down, and Lift ends it (the API agrees);
 * - with 100,000 proxies in the project, the time to the first page of rows is printed;
 * - a viewer sees the rows with no Lift, Delete, Add or Upload.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";

let cluster: Cluster;
let gateway: Gateway;
let tinyproxy: Tinyproxy;
let browser: Browser;
const pages: Page[] = [];
/** The project the 1,000 lines go to, and its connector. */
let uploaded: { projectId: string; connectorId: string };

const HEALTHY_LINES = 5;
const BAD_LINES = 10;
const TOTAL_LINES = 1000;

beforeAll(async () => {
  await ensureWebBuild();
  [tinyproxy, browser] = await Promise.all([startTinyproxy(), launchBrowser()]);
  cluster = await Cluster.create({
    env: {
      OCTOPROX_METRICS_FLUSH_INTERVAL: "3600",
      // New proxies are checked on request, and the dead ones are judged at their third check;
      // re-checking the ~1,000 uploaded ones every second queued a later proxy's first check
      // behind them past its wait on a busy machine.
      OCTOPROX_HEALTH_CHECK_INTERVAL: "3",
    },
  });
  await cluster.start("all");
  gateway = await cluster.startGateway();
  uploaded = await cluster.createConnector();
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

/** The ids of the rows the page shows, top to bottom. */
async function shownIds(page: Page): Promise<string[]> {
  return await page.locator('table[aria-label="Proxies"] tbody tr')
    .evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.proxy ?? ""));
}

/** The ids the API answers for a query of the project's list. */
async function apiIds(projectId: string, query: string): Promise<string[]> {
  const answer = await cluster.request("GET", `/api/v1/projects/${projectId}/proxies?${query}`);
  expect(answer.status).toBe(200);
  return answer.body.items.map((item: { id: string }) => item.id);
}

/**
 * 1,000 lines: five at the real tinyproxy (distinct logins, one upstream), ten that cannot be
 * read, and the rest at a port nobody listens on, which health checks find refused at once.
 */
function uploadFile(): { text: string; badLines: number[] } {
  const lines: string[] = [];
  const badLines: number[] = [];
  const tiny = new URL(tinyproxy.url);
  for (let i = 0; lines.length < TOTAL_LINES; i++) {
    const line = lines.length + 1;
    if (i < HEALTHY_LINES) {
      lines.push(`http://ok${i}:pw@${tiny.hostname}:${tiny.port}`);
    } else if (i % 97 === 0 && badLines.length < BAD_LINES) {
      lines.push(i % 2 === 0 ? `http://bad${i}.example` : `ftp://u:p@bad${i}.example:21`);
      badLines.push(line);
    } else {
      lines.push(`http://dead${i}:pw@127.0.0.1:9`);
    }
  }
  return { text: `${lines.join("\n")}\n`, badLines };
}

describe("the proxies page", () => {
  it(
    "uploads 1,000 lines with a progress bar, lists the refused lines, and the good turn healthy",
    async () => {
      const page = await asAdmin();
      await page.goto(`/projects/${uploaded.projectId}/proxies`);
      const form = page.getByRole("form", { name: "Upload proxies" });
      await form.waitFor();
      const { text, badLines } = uploadFile();
      expect(badLines).toHaveLength(BAD_LINES);
      await form.getByLabel("File").setInputFiles({
        name: "proxies.txt",
        mimeType: "text/plain",
        buffer: Buffer.from(text),
      });
      // Every state the progress bar shows, as the browser renders it.
      await page.evaluate(() => {
        const seen: { max: string | null; value: string | null }[] = [];
        (window as unknown as { progressSeen: typeof seen }).progressSeen = seen;
        new MutationObserver(() => {
          const bar = document.querySelector('progress[aria-label="Upload progress"]');
          if (bar) seen.push({ max: bar.getAttribute("max"), value: bar.getAttribute("value") });
        }).observe(document.body, { subtree: true, childList: true, attributes: true });
      });
      await form.getByRole("button", { name: "Upload" }).click();
      const result = form.getByLabel("Upload result");
      await result.waitFor({ timeout: 30_000 });
      const seen = await page.evaluate(() =>
        (window as unknown as { progressSeen: { max: string; value: string }[] }).progressSeen
      );
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.every((state) => state.max === String(Buffer.byteLength(text)))).toBe(true);
      // The bar is gone once the answer is in.
      expect(await form.locator("progress").count()).toBe(0);

      expect(await result.locator('[data-count="added"]').textContent()).toBe(
        (TOTAL_LINES - BAD_LINES).toLocaleString("en-US"),
      );
      expect(await result.locator('[data-count="duplicates"]').textContent()).toBe("0");
      expect(await result.locator('[data-count="refused"]').textContent()).toBe(String(BAD_LINES));
      const refused = result.getByRole("table", { name: "Refused lines" }).locator("tbody tr");
      expect(await refused.count()).toBe(BAD_LINES);
      const rows = await refused.evaluateAll((trs) =>
        trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent ?? ""))
      );
      expect(rows.map(([line]) => Number(line))).toEqual(badLines);
      for (const [, reason] of rows) expect(reason.length).toBeGreaterThan(5);
      expect(rows.map(([, reason]) => reason).join("\n")).toMatch(/port/);
      expect(rows.map(([, reason]) => reason).join("\n")).toMatch(/scheme/);

      // The list shows them; the real health checks turn the tinyproxy's five healthy.
      await expect.poll(() => page.locator(".page-of").textContent()).toContain("990 proxies");
      await page.getByLabel("Status").selectOption("healthy");
      await cluster.until(async () => {
        await page.getByRole("button", { name: "Next" }).waitFor();
        const shown = await page.locator(".page-of").textContent();
        // The count and the rows of one answer (a refresh may land between the two reads).
        const badges = await page.locator('table[aria-label="Proxies"] tbody .badge.status')
          .count();
        if (shown?.includes(`(${HEALTHY_LINES} proxies)`) && badges === HEALTHY_LINES) return true;
        // The list refreshes itself every 15 s; a filter change asks at once.
        await page.getByLabel("Status").selectOption("");
        await page.getByLabel("Status").selectOption("healthy");
        return false;
      }, { timeoutMs: 90_000, intervalMs: 1_000, message: "five proxies shown healthy" });
      const statuses = await page.locator('table[aria-label="Proxies"] tbody .badge.status')
        .allTextContents();
      expect(statuses).toEqual(Array(HEALTHY_LINES).fill("healthy"));
      const addresses = await page.locator('table[aria-label="Proxies"] tbody code')
        .allTextContents();
      for (const address of addresses) {
        expect(address).toContain(`@${new URL(tinyproxy.url).host}`);
        // The login shows; a password never does.
        expect(address).not.toContain("pw");
      }
      const checked = page.locator('table[aria-label="Proxies"] tbody tr').first().locator("time")
        .first();
      expect(await checked.getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/);
    },
    150_000,
  );

  it("pages and sorts on the server", async () => {
    // The statuses settle first (the dead addresses unhealthy at their third failed check), so
    // a sort by status orders the same rows from one read to the next.
    const base = `/api/v1/projects/${uploaded.projectId}/proxies?page_size=1`;
    await cluster.until(async () => {
      const [unhealthy, healthy] = await Promise.all([
        cluster.request("GET", `${base}&status=unhealthy`),
        cluster.request("GET", `${base}&status=healthy`),
      ]);
      return unhealthy.body.total === TOTAL_LINES - BAD_LINES - HEALTHY_LINES &&
        healthy.body.total === HEALTHY_LINES;
    }, { timeoutMs: 60_000, intervalMs: 500, message: "every status to settle" });
    const page = await asAdmin();
    await page.goto(`/projects/${uploaded.projectId}/proxies`);
    const id = uploaded.projectId;
    await expect.poll(() => shownIds(page)).toEqual(await apiIds(id, "page_size=50"));
    expect(await page.locator(".page-of").textContent()).toContain("Page 1 of 20");

    await page.getByRole("button", { name: "Next" }).click();
    await expect.poll(() => page.locator(".page-of").textContent()).toContain("Page 2 of 20");
    const second = await apiIds(id, "page_size=50&page=2");
    await expect.poll(() => shownIds(page)).toEqual(second);
    expect(second).not.toEqual(await apiIds(id, "page_size=50"));

    // Sorting starts again at page 1; a second click turns the order round.
    await page.getByRole("button", { name: "Status", exact: true }).click();
    await expect.poll(() => page.locator(".page-of").textContent()).toContain("Page 1 of 20");
    const byStatus = await apiIds(id, "page_size=50&sort=status");
    await expect.poll(() => shownIds(page)).toEqual(byStatus);
    expect(await page.locator('th[aria-sort="ascending"]').textContent()).toContain("Status");
    await page.getByRole("button", { name: "Status", exact: true }).click();
    const byStatusDesc = await apiIds(id, "page_size=50&sort=status&direction=desc");
    await expect.poll(() => shownIds(page)).toEqual(byStatusDesc);
    expect(byStatusDesc).not.toEqual(byStatus);
    const shownStatuses = await page.locator('table[aria-label="Proxies"] tbody .badge.status')
      .allTextContents();
    expect(shownStatuses).toEqual([...shownStatuses].sort().reverse());

    await page.getByRole("button", { name: "Created", exact: true }).click();
    await expect.poll(() => shownIds(page)).toEqual(await apiIds(id, "page_size=50"));
    await page.getByLabel("Rows a page").selectOption("100");
    await expect.poll(async () => (await shownIds(page)).length).toBe(100);
    expect(await page.locator(".page-of").textContent()).toContain("Page 1 of 10");
  });

  it("adds one proxy and deletes one after a confirmation", async () => {
    const page = await asAdmin();
    await page.goto(`/projects/${uploaded.projectId}/proxies`);
    const add = page.getByRole("form", { name: "Add a proxy" });
    await add.getByLabel("Proxy URL").fill("http://user:secret@added.example");
    await add.getByRole("button", { name: "Add proxy" }).click();
    await expect.poll(() => add.locator('[data-field="url"] .field-error').textContent())
      .toContain("port");
    await add.getByLabel("Proxy URL").fill("http://user:secret@added.example:3128");
    await add.getByRole("button", { name: "Add proxy" }).click();
    const search = `/api/v1/projects/${uploaded.projectId}/proxies?search=added.example`;
    await cluster.until(async () => (await cluster.request("GET", search)).body.total === 1, {
      message: "the proxy added",
    });
    await page.getByLabel("Host contains").fill("added.example");
    const row = page.locator('table[aria-label="Proxies"] tbody tr');
    await expect.poll(() => row.count(), { timeout: 15_000 }).toBe(1);
    expect(await row.locator("code").textContent()).toBe("http://user@added.example:3128");

    await row.getByRole("button", { name: "Delete" }).click();
    await row.getByRole("button", { name: "Keep" }).click();
    expect(await row.count()).toBe(1);
    await row.getByRole("button", { name: "Delete" }).click();
    await row.getByRole("button", { name: "Yes, delete" }).click();
    await expect.poll(() => row.count(), { timeout: 15_000 }).toBe(0);
    expect((await cluster.request("GET", search)).body.total).toBe(0);
  });

  it("counts a rate-limit quarantine down and lifts it", async () => {
    const project: RoutedProject = await createRoutedProject(cluster, [tinyproxy.url]);
    const edited = await cluster.request(
      "PATCH",
      `/api/v1/projects/${project.projectId}/connectors/${project.connectorId}`,
      {
        rate_limit_config: { max_requests: 2, window_seconds: 300, quarantine_seconds_min: 600 },
      },
    );
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    const [proxyId] = project.proxyIds;
    const proxyPath = `/api/v1/projects/${project.projectId}/proxies/${proxyId}`;
    // Real requests through the gateway until the limit trips the proxy into quarantine.
    await cluster.until(async () => {
      await viaProxy(gateway.proxyPort, project.credentials, `${cluster.api.url}/echo`, {
        timeoutMs: 5_000,
      });
      return (await cluster.request("GET", proxyPath)).body.quarantined === true;
    }, { timeoutMs: 30_000, intervalMs: 200, message: "the proxy to be quarantined" });

    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}/proxies`);
    const badge = page.locator("[data-quarantine]");
    await badge.waitFor();
    const first = await badge.textContent();
    expect(first).toMatch(/^quarantined (9|10):\d\d$/);
    // It ticks in the browser, with no new answer needed.
    await expect.poll(() => badge.textContent(), { timeout: 5_000 }).not.toBe(first);

    await page.getByRole("button", { name: "Lift" }).click();
    await expect.poll(() => badge.count()).toBe(0);
    expect(await page.getByRole("button", { name: "Lift" }).count()).toBe(0);
    expect((await cluster.request("GET", proxyPath)).body).toMatchObject({
      quarantined: false,
      quarantine_remaining_seconds: 0,
    });
  }, 90_000);

  it("shows the first page of 100,000 proxies (the time is printed)", async () => {
    const big = await cluster.createConnector();
    // Disabled, so the worker does not health-check a hundred thousand dead addresses.
    const disabled = await cluster.request(
      "PATCH",
      `/api/v1/projects/${big.projectId}/connectors/${big.connectorId}`,
      { enabled: false },
    );
    expect(disabled.status, JSON.stringify(disabled.body)).toBe(200);
    const insertStart = performance.now();
    await cluster.sql`
      insert into proxies (project_id, connector_id, scheme, host, port, username, country, status)
      select ${big.projectId}::uuid, ${big.connectorId}::uuid, 'http',
        '10.' || (n / 65536) || '.' || (n / 256 % 256) || '.' || (n % 256), 3128, 'u' || n,
        (array['DE', 'US', 'FR', null])[n % 4 + 1],
        (array['healthy', 'degraded', 'unhealthy', 'initializing'])[n % 4 + 1]
      from generate_series(1, 100000) as n`;
    await cluster.sql`analyze proxies`;
    const insertMs = performance.now() - insertStart;

    const page = await asAdmin();
    // Warm: the app's files are cached as a returning user has them.
    await page.goto(`/projects/${big.projectId}`);
    await page.getByRole("link", { name: "Proxies" }).waitFor();
    const firstRow = page.locator('table[aria-label="Proxies"] tbody tr').first();
    const started = performance.now();
    await page.goto(`/projects/${big.projectId}/proxies`);
    await firstRow.waitFor();
    const elapsedMs = performance.now() - started;
    const inPageMs = await page.evaluate(() => performance.now());
    await expect.poll(() => page.locator(".page-of").textContent()).toContain("100,000 proxies");
    console.info(
      `proxies page, 100,000 proxies: first page of rows visible ${elapsedMs.toFixed(0)} ms ` +
        `after navigating (${inPageMs.toFixed(0)} ms by the page's clock; rows inserted in ` +
        `${insertMs.toFixed(0)} ms)`,
    );

    // A sort's first page is served as quickly: by an index.
    const sortStart = performance.now();
    await page.getByRole("button", { name: "Country", exact: true }).click();
    await expect.poll(() => shownIds(page)).toEqual(
      await apiIds(big.projectId, "page_size=50&sort=country"),
    );
    console.info(
      `proxies page, 100,000 proxies: sorted by country in ${
        (performance.now() - sortStart).toFixed(0)
      } ms`,
    );
  }, 120_000);

  it("shows a viewer the rows with no Lift, Delete, Add or Upload", async () => {
    const login = { username: "proxywatcher", password: "watcher-password-1" };
    const user = await cluster.request("POST", "/api/v1/users", { ...login, role: "viewer" });
    expect(user.status).toBe(201);
    // A quarantine the viewer must see and not lift.
    const [first] = await apiIds(uploaded.projectId, "page_size=1");
    await cluster.redis.zadd(cluster.keys.proxyQuarantined, Date.now() + 600_000, first);
    const page = await signedIn(browser, cluster.api.url, login);
    pages.push(page);
    await expect.poll(() => page.locator("[data-role]").textContent()).toBe("viewer");
    await page.goto(`/projects/${uploaded.projectId}/proxies`);
    await page.locator(`tr[data-proxy="${first}"] [data-quarantine]`).waitFor();
    expect((await shownIds(page)).length).toBe(50);
    for (const name of ["Lift", "Delete", "Add proxy", "Upload"]) {
      expect(await page.getByRole("button", { name, exact: true }).count(), name).toBe(0);
    }
    expect(await page.getByRole("form", { name: "Upload proxies" }).count()).toBe(0);
    expect(await page.locator('input[type="file"]').count()).toBe(0);
    // Reading still works: sorting and paging are there.
    await page.getByRole("button", { name: "Next" }).click();
    await expect.poll(() => page.locator(".page-of").textContent()).toContain("Page 2 of 20");
  });
});
