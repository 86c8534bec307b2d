/**
 * A TLS interception CA rotated with an overlap, against a real system: the install's CA made
 * and rotated as `npm run ca:create` and `npm run ca:rotate -- --overlap-days 7` do
 * (scripts/mitm-ca-files.ts), a control process (role all) and gateways given the rotation's
 * settings, a tinyproxy upstream, an HTTPS origin the gateways trust through
 * OCTOPROX_UPSTREAM_CA_FILE, and a project that intercepts (`plain`):
 *
 * - while the overlap lasts, a gateway signs with the previous CA: a client that trusts only the
 *   previous CA keeps working, and so does one given the download (a bundle of both) or
 *   Chromium given both SPKI hashes; one that trusts only the new CA does not yet;
 * - the System page shows both CAs, the previous one marked as what gateways sign with, and the
 *   overlap's end; the Connect page shows both hashes (its Chromium line takes the list), says
 *   the overlap, and downloads the bundle;
 * - a gateway started after the overlap's end signs with the new CA: the bundle and the new CA
 *   work, the previous CA alone no longer does.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import {
  type CaFiles,
  ensureCaFiles,
  rotateCaFiles,
  type Rotated,
} from "../../scripts/mitm-ca-files.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

let dir: string;
let files: CaFiles;
let rotated: Rotated;
let upstreamCa: string;
let cluster: Cluster;
let during: Gateway;
let tinyproxy: Tinyproxy;
let origin: Origin;
let browser: Browser;
let project: RoutedProject;
let bundle: string;
const pages: Page[] = [];

/** The rotation's settings for a gateway, the overlap ending at `until`. */
function gatewayEnv(until: string): Record<string, string> {
  return {
    OCTOPROX_TLS_MITM_CA_CERT_PATH: files.certPath,
    OCTOPROX_TLS_MITM_CA_KEY_PATH: files.keyPath,
    OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: rotated.record.previous_cert_path,
    OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH: rotated.record.previous_key_path,
    OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: until,
    OCTOPROX_UPSTREAM_CA_FILE: upstreamCa,
  };
}

/** What curl trusting `cacert` alone gets through `gateway` from the HTTPS origin. */
async function through(gateway: Gateway, cacert: string): Promise<{ code: number; body: string }> {
  const result = await curl([
    "--cacert",
    cacert,
    "-x",
    gateway.proxyUrl(project.credentials.username, project.credentials.password),
    `${origin.url}/ip`,
  ]);
  return { code: result.code, body: result.stdout };
}

beforeAll(async () => {
  await ensureWebBuild();
  dir = await mkdtemp(join(tmpdir(), "ox-tls-ca-rotation-"));
  files = { certPath: join(dir, "mitm-ca.pem"), keyPath: join(dir, "mitm-ca-key.pem") };
  await ensureCaFiles(files, { create: true });
  rotated = await rotateCaFiles(files, { overlapDays: 7 });
  upstreamCa = join(dir, "upstream-ca.pem");
  await writeFile(upstreamCa, (await testCertificate()).ca);
  [tinyproxy, origin, browser] = await Promise.all([
    startTinyproxy(),
    startOrigin({ tls: true }),
    launchBrowser(),
  ]);
  cluster = await Cluster.create({
    env: {
      OCTOPROX_TLS_MITM_CA_CERT_PATH: files.certPath,
      OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: rotated.record.previous_cert_path,
      OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: rotated.record.overlap_until,
    },
  });
  // Both keys belong in their files alone.
  cluster.secretsScan.addFileOnly("the new CA's key", await readFile(files.keyPath, "utf8"));
  cluster.secretsScan.addFileOnly(
    "the previous CA's key",
    await readFile(rotated.record.previous_key_path, "utf8"),
  );
  await cluster.start("all");
  during = await cluster.startGateway({ env: gatewayEnv(rotated.record.overlap_until) });
  project = await createRoutedProject(cluster, [tinyproxy.url], {
    project: { tls_mitm_mode: "plain" },
  });
  // The origin's own answer: curl exits 0 on the gateway's refusal too (a proxy not checked yet).
  await cluster.until(
    async () => {
      const result = await through(during, rotated.record.previous_cert_path);
      return result.code === 0 && result.body.startsWith("{");
    },
    { timeoutMs: 30_000, message: "an intercepted request through the gateway" },
  );
  // The download, as a client fetches it during the overlap.
  const answer = await fetch(`${cluster.apiUrl}/api/v1/projects/ca-certificate`, {
    headers: { authorization: `Bearer ${await cluster.token()}` },
  });
  bundle = join(dir, "bundle.pem");
  await writeFile(bundle, await answer.text());
}, 180_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  await Promise.all([origin, tinyproxy].map((server) => server?.close()));
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("during the overlap", () => {
  it("signs with the previous CA: its clients keep working, and so does the bundle", async () => {
    expect(await readFile(bundle, "utf8")).toBe(
      rotated.current.certPem + rotated.previous.certPem,
    );
    for (const cacert of [rotated.record.previous_cert_path, bundle]) {
      const result = await through(during, cacert);
      expect(result.code, cacert).toBe(0);
      expect(JSON.parse(result.body)).toEqual({ ip: "127.0.0.1" });
    }
    // The new CA alone is not enough yet: curl refuses the certificate (60).
    expect((await through(during, files.certPath)).code).toBe(60);
    const loaded = during.logs().find((line) => line.msg === "TLS interception CA loaded");
    expect(loaded).toMatchObject({
      signing: "previous",
      spki_sha256: rotated.previous.spkiSha256,
    });
  });

  it("lets Chromium through with both SPKI hashes, as the api lists them", async () => {
    const spki = await fetch(`${cluster.apiUrl}/api/v1/projects/ca-certificate?format=spki`, {
      headers: { authorization: `Bearer ${await cluster.token()}` },
    });
    const list = (await spki.text()).trim();
    expect(list).toBe(`${rotated.current.spkiSha256},${rotated.previous.spkiSha256}`);
    const { username, password } = project.credentials;
    const other = await chromium.launch({
      executablePath: process.env.OCTOPROX_TEST_CHROMIUM ?? "/usr/bin/chromium",
      headless: true,
      proxy: { server: `http://127.0.0.1:${during.proxyPort}`, username, password },
      args: [
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--proxy-bypass-list=<-loopback>",
        `--ignore-certificate-errors-spki-list=${list}`,
      ],
    });
    try {
      const tab = await (await other.newContext()).newPage();
      const answer = await tab.goto(`${origin.url}/ip`);
      expect(answer?.status()).toBe(200);
    } finally {
      await other.close();
    }
  });

  it("shows both CAs on the System page, the previous one signing, and the overlap's end", async () => {
    const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
    pages.push(page);
    await page.goto("/system");
    const table = page.getByRole("table", { name: "TLS interception CA" });
    const current = table.locator('tr[data-tls-ca="current"]');
    const previous = table.locator('tr[data-tls-ca="previous"]');
    await previous.waitFor();
    expect(await current.locator("[data-spki]").textContent()).toBe(rotated.current.spkiSha256);
    expect(await previous.locator("[data-spki]").textContent()).toBe(rotated.previous.spkiSha256);
    expect(await previous.locator(".badge.ok").textContent()).toBe("signs");
    expect(await current.locator(".badge.ok").count()).toBe(0);
    const note = page.locator('[data-rotation="overlap"]');
    expect(await note.locator("time").getAttribute("datetime")).toBe(
      rotated.record.overlap_until,
    );
    expect(await page.getByRole("alert").count()).toBe(0);
  });

  it("gives the Connect page both hashes, its lines the list, and says the overlap", async () => {
    const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
    pages.push(page);
    await page.goto(`/projects/${project.projectId}/connect`);
    const section = page.getByRole("region", { name: "TLS interception" });
    const list = `${rotated.current.spkiSha256},${rotated.previous.spkiSha256}`;
    await expect.poll(() => section.getByTestId("spki").textContent()).toBe(list);
    expect(
      await section.locator('[data-example="TLS Playwright (Chromium)"] pre').textContent(),
    ).toContain(`--ignore-certificate-errors-spki-list=${list}`);
    expect(await section.locator('[data-rotation="overlap"] time').getAttribute("datetime"))
      .toBe(rotated.record.overlap_until);
    // The PEM download is the bundle.
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      section.getByRole("button", { name: "Download PEM (octoprox-ca.pem)" }).click(),
    ]);
    const saved = join(dir, "connect-bundle.pem");
    await download.saveAs(saved);
    expect(await readFile(saved, "utf8")).toBe(await readFile(bundle, "utf8"));
  });
});

describe("after the overlap", () => {
  let after: Gateway;

  beforeAll(async () => {
    // A gateway that starts once the overlap has ended (its end set a moment ago).
    after = await cluster.startGateway({
      env: gatewayEnv(new Date(Date.now() - 1000).toISOString()),
    });
    await cluster.until(async () => {
      const result = await through(after, files.certPath);
      return result.code === 0 && result.body.startsWith("{");
    }, {
      timeoutMs: 30_000,
      message: "the later gateway to route",
    });
  });

  it("signs with the new CA: the bundle and the new CA work, the previous alone no longer", async () => {
    for (const cacert of [files.certPath, bundle]) {
      const result = await through(after, cacert);
      expect(result.code, cacert).toBe(0);
      expect(JSON.parse(result.body)).toEqual({ ip: "127.0.0.1" });
    }
    expect((await through(after, rotated.record.previous_cert_path)).code).toBe(60);
    expect(after.logs().find((line) => line.msg === "TLS interception CA loaded")).toMatchObject({
      signing: "current",
      spki_sha256: rotated.current.spkiSha256,
    });
  });
});
