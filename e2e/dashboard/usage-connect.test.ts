/**
 * The usage and connect pages in a real browser, against a real system: a control process (role
 * all), a real gateway, two real tinyproxies leaving from 127.0.0.2 (a German proxy) and
 * 127.0.0.3 (an American one), and an origin that answers the address a request came from.
 * The routing preview names the proxy a real request with the same username then leaves
 * through; the connect page's lines, run with curl, reach the origin with the options typed;
 * the usage page charts the project and its destination hosts, searched and picked. An
 * operator's geofeed then places the exits (one against the country set by hand): the proxies
 * list, the overview, the Exit locations tab and the System page show where they were seen, and
 * the project form saves the location settings.
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

describe("where exits are", () => {
  interface Located {
    id: string;
    country: string | null;
    location_conflict: boolean;
    location: { ip: string | null; city: string | null } | null;
  }
  const proxies = async () =>
    (await cluster.request("GET", `/api/v1/projects/${project.projectId}/proxies`)).body
      .items as Located[];
  const exitIps = async () =>
    (await cluster.request("GET", `/api/v1/geo/exits/ips?project_id=${project.projectId}`)).body
      .items as { ip: string; sources: string[] }[];

  beforeAll(async () => {
    // The operator's own geofeed: the German proxy's exit in Berlin, the American one's in
    // Britain, against the country set by hand (kept, and a conflict).
    const uploaded = await fetch(
      `${cluster.api.url}/api/v1/geo/databases?name=our-exits&format=geofeed`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${await cluster.token()}`, "content-type": "text/csv" },
        body: `${EXITS[0]}/32,DE,DE-BE,Berlin,\n${EXITS[1]}/32,GB,,,\n`,
      },
    );
    expect(uploaded.status, await uploaded.text()).toBe(201);
    await cluster.until(async () => {
      const [berlin, london] = await proxies().then((rows) =>
        project.proxyIds.map((id) => rows.find((row) => row.id === id))
      );
      // Health checks keep seeing both exits: the exit table follows, placed by the file.
      const exits = await exitIps();
      return berlin?.location?.city === "Berlin" && london?.location_conflict === true &&
        exits.some((e) => e.ip === EXITS[0] && e.sources.includes("our-exits")) &&
        exits.some((e) => e.ip === EXITS[1]);
    }, { timeoutMs: 30_000, message: "the exits placed by the geofeed and observed" });
  }, 60_000);

  it("shows each proxy's country with its source, and the conflict", async () => {
    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}/proxies`);
    const table = page.getByRole("table", { name: "Proxies" });
    const berlin = table.locator(`tr[data-proxy="${project.proxyIds[0]}"] [data-country]`);
    const london = table.locator(`tr[data-proxy="${project.proxyIds[1]}"] [data-country]`);
    await expect.poll(() => berlin.textContent()).toContain("Berlin, DE-BE");
    expect(await berlin.locator("abbr").textContent()).toBe("DE");
    expect(await berlin.locator("[data-source]").textContent()).toBe("manual");
    expect(await berlin.locator("[data-conflict]").count()).toBe(0);
    expect(await london.locator("abbr").textContent()).toBe("US");
    // Set by hand to the US, placed in Britain by the database: the badge says what each said.
    const badge = london.locator("[data-conflict]");
    expect(await badge.textContent()).toBe("sources disagree");
    expect(await badge.getAttribute("title")).toMatch(
      /database \(our-exits\): GB.*set by hand: US/,
    );
  });

  it("lists exits by country on the overview, and the database on the System page", async () => {
    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}`);
    const countries = page.getByRole("table", { name: "Exits by country" });
    await expect.poll(() => countries.locator('[data-country="DE"] [data-exits]').textContent())
      .toBe("1");
    expect(await countries.locator('[data-country="US"] [data-exits]').textContent()).toBe("1");

    await page.goto("/system");
    const databases = page.getByRole("table", { name: "IP databases" });
    const ours = databases.locator('tr[data-database="our-exits"]');
    await expect.poll(() => ours.locator("td").nth(1).textContent()).toBe("geofeed");
    expect(await ours.locator("td").nth(2).textContent()).toBe("yes");
    expect(await ours.locator("[data-age]").textContent()).toMatch(/\d+ (ms|s|min)/);
    expect(await databases.locator("tbody tr").last().textContent()).toContain("shipped");
  });

  it("shows provider accuracy, the exit IPs filtered, and each exit's observations", async () => {
    const page = await asAdmin();
    await page.goto(`/projects/${project.projectId}/exits`);
    const connector = page.getByRole("table", { name: "Connectors' exits" })
      .locator('tr[data-connector="static"]');
    await expect.poll(() => connector.locator("[data-seen]").textContent()).toMatch(/DE 1.*US 1/);
    expect(await connector.textContent()).toContain("not judged");

    await page.getByRole("link", { name: "Exit IPs" }).click();
    const exits = page.getByRole("table", { name: "Exit IPs" });
    const berlin = exits.locator(`tr[data-exit="${EXITS[0]}"]`);
    await expect.poll(() => berlin.locator("td").allTextContents()).toEqual(
      expect.arrayContaining(["DE", "DE-BE", "Berlin", "static"]),
    );
    expect(await berlin.locator("[data-sources]").textContent()).toContain("our-exits");
    // Filtered on the server by the country seen.
    await page.getByLabel("Country seen").fill("us");
    await expect.poll(() => exits.locator("tbody tr").count()).toBe(1);
    expect(await exits.locator("tbody tr").getAttribute("data-exit")).toBe(EXITS[1]);
    await page.getByLabel("Country seen").fill("");
    await expect.poll(() => exits.locator("tbody tr").count()).toBe(2);

    // An address opens its observations: the health checks that saw it.
    await berlin.getByRole("link").click();
    const log = page.getByRole("table", { name: "Observations" });
    await expect.poll(() => log.locator("tbody tr").count()).toBeGreaterThan(0);
    expect(new Set(await log.locator("tbody tr td:nth-child(2)").allTextContents())).toEqual(
      new Set([EXITS[0]]),
    );
    expect(await log.locator("tbody tr").first().locator("td").nth(3).textContent())
      .toBe("health");
    expect(await page.getByRole("alert").count()).toBe(0);
  });

  it("saves the project's location settings, and shows a refusal beside its field", async () => {
    const made = await cluster.request("POST", "/api/v1/projects", {
      name: "located",
      username: "located",
    });
    expect(made.status).toBe(201);
    const page = await asAdmin();
    await page.goto(`/projects/${made.body.id}/settings`);
    const form = page.getByRole("form", { name: "Project" });
    await form.locator('select[name="location_policy"]').selectOption("strict");
    await form.getByLabel(/^The install's \(database, vendor, endpoint\)$/).uncheck();
    await form.getByLabel("vendor", { exact: true }).uncheck();
    await form.getByRole("button", { name: "Move endpoint up" }).click();
    await form.getByRole("button", { name: "Move endpoint up" }).click();
    await form.locator('select[name="location_conflict_rule"]').selectOption("first");
    await form.locator('select[name="location_preflight"]').selectOption("retry");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByRole("status").waitFor();
    const saved = await cluster.request("GET", `/api/v1/projects/${made.body.id}`);
    expect(saved.body).toMatchObject({
      location_policy: "strict",
      location_sources: ["endpoint", "database"],
      location_conflict_rule: "first",
      location_preflight: "retry",
    });
    // The vendor's word alone cannot check an exit: preflight is refused beside its field.
    await form.getByLabel("database", { exact: true }).uncheck();
    await form.getByLabel("endpoint", { exact: true }).uncheck();
    await form.getByLabel("vendor", { exact: true }).check();
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() =>
      form.locator('[data-field="location_preflight"] .field-error').textContent()
    ).toContain("neither database nor endpoint");
    // No source left: the API's words beside the sources, nothing changed.
    await form.getByLabel("vendor", { exact: true }).uncheck();
    await form.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() =>
      form.locator('[data-field="location_sources"] .field-error').textContent()
    ).toContain("at least one source");
    expect((await cluster.request("GET", `/api/v1/projects/${made.body.id}`)).body)
      .toMatchObject({ location_sources: ["endpoint", "database"], location_preflight: "retry" });
  });
});
