/**
 * The install's TLS interception CA on the dashboard, in a real browser (Debian's chromium)
 * against a real system: a control process (role all) and a gateway given a CA of their own
 * that expires in twenty days, a tinyproxy upstream, and an HTTPS origin the gateway trusts
 * through OCTOPROX_UPSTREAM_CA_FILE; the project intercepts (`plain`).
 *
 * - The System page shows the CA (subject, end, days left, SPKI hash), marked as expiring soon;
 *   the gateway warned of it in its log and carries its end on /metrics.
 * - The Connect page's TLS interception part says the project's mode, downloads the CA as PEM and
 *   DER (the files the api answers), shows its SPKI hash, and its lines work as shown: the curl
 *   line and the Python requests line, run with the downloaded file, and Chromium launched with
 *   the Playwright line's proxy and SPKI flag, each reach the HTTPS origin through the gateway's
 *   interception.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { createCa, loadCa, type MitmCa } from "../../shared/tls/ca.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { testCertificate } from "../../testkit/certs.ts";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { curl } from "../../testkit/clients/curl.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";
import { type Origin, startOrigin } from "../../testkit/upstreams/origin.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

const run = promisify(execFile);
const DAY_MS = 86_400_000;
const EXPIRY = "octoprox_gateway_tls_mitm_ca_expiry_timestamp_seconds";

let dir: string;
let ca: MitmCa;
let caFiles: { cert: string; key: string };
let cluster: Cluster;
let gateway: Gateway;
let tinyproxy: Tinyproxy;
let origin: Origin;
let browser: Browser;
let project: RoutedProject;
const pages: Page[] = [];

beforeAll(async () => {
  await ensureWebBuild();
  dir = await mkdtemp(join(tmpdir(), "ox-tls-ca-page-"));
  // Ten years less twenty days ago: twenty days left.
  const pem = await createCa({ now: new Date(Date.now() - (3652 - 20) * DAY_MS) });
  ca = await loadCa(pem);
  caFiles = { cert: join(dir, "mitm-ca.pem"), key: join(dir, "mitm-ca-key.pem") };
  await writeFile(caFiles.cert, pem.certPem);
  await writeFile(caFiles.key, pem.keyPem, { mode: 0o600 });
  const upstreamCa = join(dir, "upstream-ca.pem");
  await writeFile(upstreamCa, (await testCertificate()).ca);
  [tinyproxy, origin, browser] = await Promise.all([
    startTinyproxy(),
    startOrigin({ tls: true }),
    launchBrowser(),
  ]);
  cluster = await Cluster.create({ env: { OCTOPROX_TLS_MITM_CA_CERT_PATH: caFiles.cert } });
  // This key, too, belongs in its file alone.
  cluster.secretsScan.addFileOnly("this test's CA key", pem.keyPem);
  await cluster.start("all");
  gateway = await cluster.startGateway({
    env: {
      OCTOPROX_TLS_MITM_CA_CERT_PATH: caFiles.cert,
      OCTOPROX_TLS_MITM_CA_KEY_PATH: caFiles.key,
      OCTOPROX_UPSTREAM_CA_FILE: upstreamCa,
    },
  });
  project = await createRoutedProject(cluster, [tinyproxy.url], {
    project: { tls_mitm_mode: "plain" },
  });
  // Intercepted end to end: curl trusting the CA alone reaches the HTTPS origin.
  await cluster.until(async () => {
    const result = await curl([
      "--cacert",
      caFiles.cert,
      "-x",
      gateway.proxyUrl(project.credentials.username, project.credentials.password),
      `${origin.url}/ip`,
    ]);
    return result.code === 0 && result.stdout.includes('"ip"');
  }, { timeoutMs: 30_000, message: "an intercepted request through the gateway" });
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

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

describe("the System page", () => {
  it("shows the CA with its end and days left, marked as expiring soon", async () => {
    const page = await asAdmin();
    await page.goto("/system");
    const row = page.getByRole("table", { name: "TLS interception CA" }).locator(
      'tr[data-tls-ca="current"]',
    );
    await row.waitFor();
    const text = await row.textContent();
    expect(text).toContain(ca.certificate.subject);
    expect(text).toContain(caFiles.cert);
    expect(await row.locator("[data-spki]").textContent()).toBe(ca.spkiSha256);
    const days = Number((await row.locator("[data-days-left]").textContent())!.match(/^\d+/)![0]);
    expect(days).toBeGreaterThanOrEqual(18);
    expect(days).toBeLessThan(30);
    expect(await row.locator(".badge.warning").textContent()).toBe("expires soon: rotate it");
    // The gateway said so too, and /metrics carries the end.
    const warned = gateway.logs().find((line) =>
      line.msg === "The TLS interception CA expires within 30 days; rotate it " +
          "(docs/tls-interception.md)"
    );
    expect(warned).toMatchObject({ level: "warn", spki_sha256: ca.spkiSha256 });
    expect(await gateway.metric(EXPIRY)).toBe(
      Math.floor(ca.notAfter.getTime() / 1000),
    );
  });
});

describe("the Connect page's TLS interception", () => {
  let page: Page;
  let pemPath: string;
  const section = () => page.getByRole("region", { name: "TLS interception" });
  const line = async (title: string) =>
    (await section().locator(`[data-example="TLS ${title}"] pre`).textContent())!;

  beforeAll(async () => {
    page = await asAdmin();
    await page.goto(`/projects/${project.projectId}/connect`);
    // The gateway's address as this machine's clients reach it.
    await page.getByLabel("Gateway host").fill("127.0.0.1");
    await page.getByLabel("HTTP port").fill(String(gateway.proxyPort));
    await section().getByTestId("spki").waitFor();
  });

  it("says the project's mode, and downloads the CA as PEM and DER", async () => {
    expect(await section().locator("[data-mitm-mode]").getAttribute("data-mitm-mode")).toBe(
      "plain",
    );
    expect(await section().getByTestId("spki").textContent()).toBe(ca.spkiSha256);
    const [pem] = await Promise.all([
      page.waitForEvent("download"),
      section().getByRole("button", { name: "Download PEM (octoprox-ca.pem)" }).click(),
    ]);
    expect(pem.suggestedFilename()).toBe("octoprox-ca.pem");
    pemPath = join(dir, "downloaded.pem");
    await pem.saveAs(pemPath);
    expect(await readFile(pemPath, "utf8")).toBe(ca.certPem);
    const [der] = await Promise.all([
      page.waitForEvent("download"),
      section().getByRole("button", { name: "Download DER (octoprox-ca.cer)" }).click(),
    ]);
    expect(der.suggestedFilename()).toBe("octoprox-ca.cer");
    const derPath = join(dir, "downloaded.cer");
    await der.saveAs(derPath);
    expect(Buffer.from(await readFile(derPath)).equals(Buffer.from(ca.certificate.certDer)))
      .toBe(true);
    expect(await page.getByRole("alert").count()).toBe(0);
  });

  it("gives a curl line that reaches an HTTPS origin through the interception", async () => {
    const { username, password } = project.credentials;
    const text = await line("curl");
    expect(text).toBe(
      `curl --cacert octoprox-ca.pem -x 'http://${username}:${password}@127.0.0.1:` +
        `${gateway.proxyPort}' https://example.com/`,
    );
    // Run as shown, with the downloaded file and the test's origin for example.com.
    const command = text.replace("octoprox-ca.pem", pemPath).replace(
      "https://example.com/",
      `${origin.url}/ip`,
    );
    const { stdout } = await run("sh", ["-c", `${command} -sS --max-time 20`]);
    expect(JSON.parse(stdout)).toEqual({ ip: "127.0.0.1" });
  });

  it("gives a Python requests line that does the same", async () => {
    const text = await line("Python (requests)");
    expect(text).toContain('verify="octoprox-ca.pem"');
    const script = text.replace('"octoprox-ca.pem"', JSON.stringify(pemPath)).replace(
      '"https://example.com/"',
      JSON.stringify(`${origin.url}/ip`),
    ).replace("print(r.status_code)", "print(r.status_code, r.text)");
    const { stdout } = await run("python3", ["-c", script], {
      // No proxy of this machine's environment in the way.
      env: { PATH: process.env.PATH ?? "" },
      timeout: 30_000,
    });
    expect(stdout.trim()).toBe('200 {"ip":"127.0.0.1"}');
  });

  it("gives a Node line trusting the CA through NODE_EXTRA_CA_CERTS", async () => {
    const text = await line("Node");
    expect(text).toContain("NODE_EXTRA_CA_CERTS=./octoprox-ca.pem node app.mjs");
    expect(text).toContain(
      `new ProxyAgent("http://${project.credentials.username}:${project.credentials.password}` +
        `@127.0.0.1:${gateway.proxyPort}")`,
    );
  });

  it("gives a Playwright line whose Chromium loads an HTTPS page through the interception", async () => {
    const text = await line("Playwright (Chromium)");
    const { username, password } = project.credentials;
    expect(text).toContain(
      `proxy: { server: "http://127.0.0.1:${gateway.proxyPort}", username: "${username}", ` +
        `password: "${password}" }`,
    );
    const flag = text.match(/"(--ignore-certificate-errors-spki-list=[^"]+)"/)![1];
    expect(flag).toBe(`--ignore-certificate-errors-spki-list=${ca.spkiSha256}`);
    // Launched as the line says (with the test's own chromium and sandbox flags).
    const other = await chromium.launch({
      executablePath: process.env.OCTOPROX_TEST_CHROMIUM ?? "/usr/bin/chromium",
      headless: true,
      proxy: { server: `http://127.0.0.1:${gateway.proxyPort}`, username, password },
      // Chromium sends loopback destinations straight unless told: through the proxy here.
      args: ["--no-sandbox", "--disable-dev-shm-usage", "--proxy-bypass-list=<-loopback>", flag],
    });
    try {
      const context = await other.newContext();
      const tab = await context.newPage();
      const answer = await tab.goto(`${origin.url}/ip`);
      expect(answer?.status()).toBe(200);
      expect(JSON.parse(await tab.locator("body").textContent() ?? "")).toEqual({
        ip: "127.0.0.1",
      });
    } finally {
      await other.close();
    }
  });
});
