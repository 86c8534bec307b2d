/**
 * `npm run screenshots`: a picture of every dashboard page into docs/screenshots/, for
 * docs/dashboard.md. It brings up the same real system the browser tests use (a control
 * process of role all on a fresh test database, a gateway, a tinyproxy upstream), gives it a
 * project with traffic and a flush and a geofeed placing its exit, and photographs each page in
 * Debian's chromium. Needs the
 * test stores (Postgres on 127.0.0.1:5432, Redis on :6379), as `npm test` does.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { launchBrowser, signedIn } from "../testkit/browser.ts";
import { Cluster } from "../testkit/cluster.ts";
import { startTinyproxy } from "../testkit/upstreams/tinyproxy.ts";
import { testCertificate } from "../testkit/certs.ts";
import {
  PROVIDER_EMULATOR_JSON,
  startProviderEmulator,
} from "../testkit/upstreams/provider-emulator.ts";
import { createRoutedProject } from "../testkit/routing.ts";
import { JobKind } from "../shared/roles.ts";
import { curl } from "../testkit/clients/curl.ts";
import { ensureWebBuild } from "./build-web.ts";

const OUT = fileURLToPath(new URL("../docs/screenshots/", import.meta.url));

async function shoot(page: Page, name: string): Promise<void> {
  // Charts draw on the next frame after their data; give the page a settled state.
  await page.waitForLoadState("networkidle");
  await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
  console.log(`docs/screenshots/${name}.png`);
}

async function main(): Promise<void> {
  await mkdir(OUT, { recursive: true });
  await ensureWebBuild();
  const tinyproxy = await startTinyproxy();
  const browser = await launchBrowser();
  // A provider API (the tests' emulator, over HTTPS) handing out the tinyproxy, for a pool.
  const folder = await mkdtemp(join(tmpdir(), "ox-screenshots-"));
  const caFile = join(folder, "provider-ca.pem");
  await writeFile(caFile, (await testCertificate()).ca);
  const provider = await startProviderEmulator({
    tls: true,
    apiKey: "screenshot-key",
    exits: [{ host: "127.0.0.1", port: tinyproxy.port, country: "DE" }],
    perCall: 1,
    ttlSeconds: 3600,
  });
  const cluster = await Cluster.create({
    env: {
      OCTOPROX_METRICS_FLUSH_INTERVAL: "3600",
      OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true",
      OCTOPROX_EGRESS_CA_FILE: caFile,
      OCTOPROX_POOL_INTERVAL: "1",
    },
  });
  try {
    await cluster.start("all");
    const gateway = await cluster.startGateway();
    const project = await createRoutedProject(cluster, [tinyproxy.url]);
    await cluster.request("PATCH", `/api/v1/projects/${project.projectId}`, {
      name: "Scrapers",
      rate_limit: { requests_per_second: 200, burst: 400 },
      traffic_quota: { limit_bytes: 50_000_000, period: "month", action: "block" },
    });
    // An operator's geofeed places the tinyproxy's exit, for the Exit locations tab.
    const geofeed = await fetch(
      `${cluster.api.url}/api/v1/geo/databases?name=our-exits&format=geofeed`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${await cluster.token()}`, "content-type": "text/csv" },
        body: "127.0.0.1/32,FR,FR-IDF,Paris,\n",
      },
    );
    if (geofeed.status !== 201) throw new Error(`Geofeed refused: ${await geofeed.text()}`);
    const proxy = gateway.proxyUrl(project.credentials.username, project.credentials.password);
    for (let i = 0; i < 40; i++) await curl(["-x", proxy, `${cluster.api.url}/echo`]);
    // A few failures for the failures page: a country no proxy has.
    const elsewhere = gateway.proxyUrl(
      `${project.credentials.username}-cc-de`,
      project.credentials.password,
    );
    for (let i = 0; i < 3; i++) await curl(["-x", elsewhere, `${cluster.api.url}/echo`]);
    await cluster.runNow(JobKind.snapshot);
    await cluster.runNow(JobKind.metricsFlush);

    const context = await browser.newContext({
      baseURL: cluster.api.url,
      viewport: { width: 1280, height: 900 },
    });
    const signIn = await context.newPage();
    await signIn.goto("/");
    await shoot(signIn, "sign-in");
    await context.close();

    const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
    await shoot(page, "projects");
    await page.getByRole("button", { name: "New project" }).click();
    await shoot(page, "project-new");
    await page.goto(`/projects/${project.projectId}`);
    await page.locator('[data-chart="Requests a second"] canvas').waitFor();
    await shoot(page, "overview");
    await page.getByRole("button", { name: "Theme" }).click();
    await shoot(page, "overview-dark");
    await page.getByRole("button", { name: "Theme" }).click();
    await page.goto(`/projects/${project.projectId}/settings`);
    await shoot(page, "project-settings");
    await page.goto(`/projects/${project.projectId}/usage`);
    await page.locator('[data-chart="Requests a second"] canvas').waitFor();
    await shoot(page, "usage");
    await page.goto(`/projects/${project.projectId}/connect`);
    const preview = page.getByRole("form", { name: "Routing preview" });
    await preview.getByRole("button", { name: "Preview" }).click();
    await preview.getByTestId("chosen").waitFor();
    await shoot(page, "connect");
    await page.goto(`/projects/${project.projectId}/connectors`);
    await page.getByRole("link", { name: "static" }).first().waitFor();
    await shoot(page, "connectors");
    await page.goto(`/projects/${project.projectId}/connectors/${project.connectorId}`);
    await page.getByRole("form").first().waitFor();
    await shoot(page, "connector");
    await page.goto(`/projects/${project.projectId}/proxies`);
    await page.locator('table[aria-label="Proxies"] tbody tr').first().waitFor();
    await shoot(page, "proxies");
    // The health checks see the exit through the geofeed within a few observation publishes.
    await cluster.until(async () => {
      const exits = await cluster.request(
        "GET",
        `/api/v1/geo/exits/ips?project_id=${project.projectId}`,
      );
      return exits.body.items.some((exit: { sources: string[] }) => exit.sources.length > 0);
    }, { timeoutMs: 30_000, message: "the exit placed by the geofeed" });
    await page.goto(`/projects/${project.projectId}/exits/ips`);
    await page.locator('table[aria-label="Exit IPs"] tbody tr').first().waitFor();
    await shoot(page, "exit-locations");
    await page.goto(`/projects/${project.projectId}/failures`);
    await shoot(page, "failures");
    await page.goto("/system");
    await page.getByText("leader").first().waitFor();
    await shoot(page, "system");
    await page.goto("/users");
    await shoot(page, "users");
    await page.goto("/tokens");
    await shoot(page, "tokens");

    // Who changed what, and who is told.
    await page.goto("/audit");
    await page.locator("tr[data-audit]").first().waitFor();
    await shoot(page, "audit");
    const channel = await cluster.request("POST", "/api/v1/alerts/channels", {
      name: "ops webhook",
      url: "http://127.0.0.1:9/octoprox",
      allow_private_address: true,
    });
    await cluster.request("POST", "/api/v1/alerts/rules", {
      name: "Pools running dry",
      kind: "pool_depleted",
      severity: "critical",
      channel_ids: [channel.body.id],
    });
    await page.goto("/alerts");
    await page.locator('tr[data-rule="Pools running dry"]').waitFor();
    await shoot(page, "alerts");

    // Issue 16's pages: a provider-API connector's pool, a sequence, distribution keys.
    const projectPath = `/api/v1/projects/${project.projectId}`;
    const credential = await cluster.request("POST", `${projectPath}/credentials`, {
      name: "acme-keys",
      provider: "provider_api",
      config: { api_key: "screenshot-key" },
    });
    const pool = await cluster.request("POST", `${projectPath}/connectors`, {
      name: "acme-pool",
      kind: "provider_api",
      credential_id: credential.body.id,
      config: {
        fetch: {
          url: provider.fetchUrl,
          params: { count: "{count}" },
          auth: { type: "api_key", header: "X-Api-Key", value: "{credential.api_key}" },
          estimated_ips_per_call: 1,
          max_total: 500,
        },
        parser: { format: "json", ...PROVIDER_EMULATOR_JSON },
        pool: { min_size: 1, target_size: 1, max_size: 5 },
      },
    });
    await cluster.request("PUT", `${projectPath}/sequence`, {
      connector_ids: [pool.body.id, project.connectorId],
      on_end: "stay_last",
    });
    await cluster.request("POST", `${projectPath}/distribution-keys`, {
      name: "crawler",
      allowed_cidrs: ["203.0.113.0/24"],
    });
    await page.goto(`/projects/${project.projectId}/connectors/${pool.body.id}`);
    await page.locator('[data-pool="routed"]').filter({ hasText: "1" }).waitFor({
      timeout: 30_000,
    });
    await shoot(page, "connector-pool");
    await page.goto(`/projects/${project.projectId}/sequence`);
    await page.getByRole("region", { name: "Current sequence" }).waitFor();
    await shoot(page, "sequence");
    await page.goto(`/projects/${project.projectId}/distribution-keys`);
    await page.locator('tr[data-key="crawler"]').waitFor();
    await shoot(page, "distribution-keys");
    await page.context().close();
  } finally {
    await browser.close();
    await cluster.close();
    await tinyproxy.close();
    await provider.close();
    await rm(folder, { recursive: true, force: true });
  }
}

await main();
