/**
 * The usage and connect pages in a real browser, against a real system: a control process (role
 * all), a real gateway, two real tinyproxies leaving from 127.0.0.2 (a German proxy) and
 * 127.0.0.3 (an American one), and an origin that answers the address a request came from.
 * The routing preview names the proxy a real request with the same username then leaves
 * through; the connect page's lines, run with curl, reach the origin with the options typed;
 * the usage page charts the project and its destination hosts, searched and picked.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { JobKind } from "../../shared/roles.ts";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { exitOf, viaProxy } from "../../testkit/clients/proxy-client.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";

const EXITS = ["127.0.0.2", "127.0.0.3"];

let cluster: Cluster;
let gateway: Gateway;
let tinyproxies: Tinyproxy[];
let origin: Origin;
let browser: Browser;
let project: RoutedProject;
const pages: Page[] = [];

const ipUrl = () => `${origin.url}/ip`;
const as = (options: string) => ({
  username: `${project.credentials.username}${options}`,
  password: project.credentials.password,
});

beforeAll(async () => {
  await ensureWebBuild();
  [tinyproxies, origin, browser] = await Promise.all([
    Promise.all(EXITS.map((bindAddress) => startTinyproxy({ bindAddress }))),
    startOrigin(),
    launchBrowser(),
  ]);
  cluster = await Cluster.create({ env: { OCTOPROX_METRICS_FLUSH_INTERVAL: "3600" } });
  await cluster.start("all");
  gateway = await cluster.startGateway();
  project = await createRoutedProject(cluster, tinyproxies.map((t) => t.url));
  for (const [index, id] of project.proxyIds.entries()) {
    const edit = await cluster.request(
      "PATCH",
      `/api/v1/projects/${project.projectId}/proxies/${id}`,
      {
        country: ["DE", "US"][index],
      },
    );
    expect(edit.status).toBe(200);
  }
  await cluster.until(async () => {
    const answer = await viaProxy(gateway.proxyPort, as("-cc-us"), ipUrl());
    return answer.status === 200 && exitOf(answer) === EXITS[1];
  }, { message: "the gateway to route by country" });
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  await Promise.all([origin, ...(tinyproxies ?? [])].map((server) => server?.close()));
});

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

describe("the connect page", () => {
  it("previews the route a real request with the same username takes, and a refusal", async () => {
    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}/connect`);
    const form = page.getByRole("form", { name: "Routing preview" });
    for (const [options, index] of [["-cc-de", 0], ["-cc-us", 1]] as const) {
      await form.getByLabel("Username", { exact: true }).fill(
        `${project.credentials.username}${options}`,
      );
      await form.getByRole("button", { name: "Preview" }).click();
      const chosen = form.getByTestId("chosen");
      await expect.poll(() => chosen.textContent()).toContain(`:${tinyproxies[index].port}`);
      // A real request with that username leaves through that very proxy.
      const real = await viaProxy(gateway.proxyPort, as(options), ipUrl());
      expect(real.status).toBe(200);
      expect(exitOf(real)).toBe(EXITS[index]);
    }
    // No proxy in that country: the refusal a client would get, and the connector's reason.
    await form.getByLabel("Username", { exact: true }).fill(
      `${project.credentials.username}-cc-fr`,
    );
    await form.getByRole("button", { name: "Preview" }).click();
    await expect.poll(() => form.getByTestId("refusal").textContent()).toMatch(/Refused: \d{3}/);
    const row = form.locator('[data-connector="static"]');
    expect(await row.locator("td").nth(1).textContent()).toBe("no");
    expect(((await row.locator("td").nth(2).textContent()) ?? "").length).toBeGreaterThan(0);
    const real = await viaProxy(gateway.proxyPort, as("-cc-fr"), ipUrl());
    expect(real.status).not.toBe(200);
    // An option written wrong is the gateway's own words, beside the field.
    await form.getByLabel("Username", { exact: true }).fill(
      `${project.credentials.username}-cc-germany`,
    );
    await form.getByRole("button", { name: "Preview" }).click();
    await expect.poll(() => form.locator('[data-field="username"] .field-error').count())
      .toBe(1);
  });

  it("writes client lines that work, with the options typed", async () => {
    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}/connect`);
    await page.getByLabel("Gateway host").fill("127.0.0.1");
    await page.getByLabel("HTTP port").fill(String(gateway.proxyPort));
    await page.getByLabel("Country (-cc-)").fill("us");
    await page.getByLabel("Session (-sessid-)").fill("7");
    const username = `${project.credentials.username}-cc-us-sessid-7`;
    await expect.poll(() => page.getByTestId("username").textContent()).toBe(username);
    const line = await page.locator('[data-example="HTTP (plain requests)"] code').textContent();
    const proxyUrl = /-x '([^']+)'/.exec(line ?? "")?.[1];
    expect(proxyUrl).toBe(
      `http://${username}:${project.credentials.password}@127.0.0.1:${gateway.proxyPort}`,
    );
    const result = await curl(["-x", proxyUrl!, ipUrl()]);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).ip).toBe(EXITS[1]);
  });
});

describe("the usage page", () => {
  it("charts the project and its destination hosts, searched and picked", async () => {
    for (let i = 0; i < 5; i++) {
      expect((await viaProxy(gateway.proxyPort, as("-cc-de"), ipUrl())).status).toBe(200);
    }
    // Hosts are read from the flushed history: flush until the gateway's window has been
    // published and taken.
    await cluster.until(async () => {
      await cluster.runNow(JobKind.metricsFlush);
      const answer = await cluster.request(
        "GET",
        `/api/v1/projects/${project.projectId}/metrics/hosts`,
      );
      return answer.body.total > 0;
    }, { message: "the origin among the flushed hosts" });
    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}/usage`);
    await page.locator('[data-chart="Requests a second"] canvas').waitFor();
    const hosts = page.getByRole("table", { name: "Destination hosts" });
    await hosts.getByRole("row", { name: /127\.0\.0\.1/ }).waitFor();
    // Searched on the server: a part of the name finds it, another finds nothing.
    await page.getByLabel("Search hosts").fill("nothing-like-it");
    await expect.poll(() => page.getByText("No hosts in this range.").count()).toBe(1);
    await page.getByLabel("Search hosts").fill("127.0");
    const row = hosts.getByRole("row", { name: /127\.0\.0\.1/ });
    await row.waitFor();
    // Picked, it gets a chart of its own.
    await row.getByRole("checkbox").check();
    await page.locator('[data-chart="Requests by host"] canvas').waitFor();
    // One connector's own series.
    await page.getByLabel("Of").selectOption({ label: "Connector static" });
    await page.locator('[data-chart="Requests a second"] canvas').waitFor();
    expect(await page.getByRole("alert").count()).toBe(0);
  });
});
