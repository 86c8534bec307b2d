/**
 * WireGuard and OpenVPN devices in a real browser (Debian's chromium, driven by playwright-core)
 * against a real control process (role all, the api serving the built app):
 *
 * - the WireGuard settings page (admins): an MTU out of range refused at its field with nothing
 *   stored, then the endpoint host, MTU and keepalive saved as the API then answers; the key
 *   rotated only after a confirmation that says every device config becomes invalid, and the
 *   new public key shown with the api's warning;
 * - a project's Devices tab: a device whose city has no country refused at the field, then
 *   added with generated keys and listed (disabled or enabled, online or offline, last seen,
 *   country, state, city, session, address); its `.conf` downloaded (the API's file, with
 *   [Interface] and [Peer]); its QR code shown (the API's SVG); edited; disabled; online once
 *   a sighting is recorded; deleted after a second click; no key shown on the page;
 * - a viewer reads both pages with no input or button to change anything;
 * - the OpenVPN settings page (admins): a subnet overlapping WireGuard's and a keepalive timeout
 *   under twice the interval refused at their fields with nothing stored, then the endpoint
 *   host, transport, port and keepalive saved as the API then answers; the CA certificate shown
 *   and copied; the identity rotated only after a confirmation that says every device profile
 *   becomes invalid, and the new CA shown with the api's warning;
 * - OpenVPN devices on the Devices tab, listed with the WireGuard ones: one added from the form
 *   with the protocol picked, listed with its protocol and address and no QR code; its `.ovpn`
 *   downloaded (the API's file, with `client` and `<cert>`, its key nowhere on the page); a new
 *   certificate issued only after a confirmation that says the old profile stops working;
 *   its usage charted; disabled; deleted after a second click;
 * - a viewer reads the OpenVPN devices and settings with nothing to change.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { OPENVPN_IDENTITY_ROTATED } from "../../control/api/answers/openvpn.ts";
import { SERVER_KEY_ROTATED } from "../../control/api/answers/wireguard.ts";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { Cluster } from "../../testkit/cluster.ts";

let cluster: Cluster;
let browser: Browser;
let folder: string;
const pages: Page[] = [];

beforeAll(async () => {
  await ensureWebBuild();
  browser = await launchBrowser();
  folder = await mkdtemp(join(tmpdir(), "ox-e2e-devices-web-"));
  cluster = await Cluster.create({ env: { OCTOPROX_METRICS_FLUSH_INTERVAL: "3600" } });
  await cluster.start("all");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const page of pages) await page.context().close().catch(() => {});
  await browser?.close();
  await cluster?.close();
  if (folder) await rm(folder, { recursive: true, force: true });
});

async function asAdmin(): Promise<Page> {
  const page = await signedIn(browser, cluster.api.url, cluster.adminLogin);
  pages.push(page);
  return page;
}

async function asViewer(): Promise<Page> {
  const login = { username: `view${randomBytes(3).toString("hex")}`, password: "viewer-pass-1" };
  const made = await cluster.request("POST", "/api/v1/users", { ...login, role: "viewer" });
  expect(made.status, JSON.stringify(made.body)).toBe(201);
  const page = await signedIn(browser, cluster.api.url, login);
  pages.push(page);
  return page;
}

async function settings(protocol = "wireguard"): Promise<Record<string, unknown>> {
  const answer = await cluster.request("GET", `/api/v1/${protocol}/settings`);
  expect(answer.status).toBe(200);
  return answer.body;
}

/** An answer's text as the API gives it (a config, an SVG), with the admin's token. */
async function rawAnswer(path: string): Promise<string> {
  const response = await fetch(`${cluster.api.url}/api/v1${path}`, {
    headers: { authorization: `Bearer ${await cluster.token()}` },
  });
  expect(response.status).toBe(200);
  return await response.text();
}

/** Polls until the assertion holds, with room for a busy machine (the default is 1 s). */
function eventually<T>(read: () => T | Promise<T>, options: { timeout?: number } = {}) {
  return expect.poll(read, { timeout: 15_000, ...options });
}

const text = async (locator: Locator) => (await locator.textContent())?.trim();

describe("the WireGuard settings page", () => {
  it("saves the settings, refuses a value at its field, and rotates the key once confirmed", async () => {
    const page = await asAdmin();
    await page.goto("/");
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "WireGuard" })
      .click();
    await page.waitForURL(/\/wireguard$/);
    const form = page.getByRole("form", { name: "WireGuard settings" });
    await form.locator('[data-endpoint="none"]').waitFor();
    expect(await form.getByLabel("Subnet").inputValue()).toBe("10.66.0.0/16");
    expect(await form.getByLabel("Listen port").inputValue()).toBe("51820");

    // Out of range: the API's words beside the field, and nothing stored.
    await form.getByLabel("MTU").fill("9000");
    await form.getByRole("button", { name: "Save settings" }).click();
    await form.locator('[data-field="mtu"] .field-error').waitFor();
    expect(await settings()).toMatchObject({ mtu: 1420, endpoint_host: null });

    await form.getByLabel("Endpoint host").fill("VPN.example.com");
    await form.getByLabel("MTU").fill("1380");
    await form.getByLabel("Keepalive (seconds)").fill("15");
    await form.getByRole("button", { name: "Save settings" }).click();
    await form.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    expect(await settings()).toMatchObject({
      endpoint_host: "vpn.example.com",
      mtu: 1380,
      persistent_keepalive_seconds: 15,
      listen_port: 51820,
    });
    // The form refills with the values as stored.
    expect(await form.getByLabel("Endpoint host").inputValue()).toBe("vpn.example.com");
    expect(await form.locator('[data-endpoint="none"]').count()).toBe(0);

    // The rotation asks first, saying what it breaks.
    const before = (await settings()).public_key as string;
    expect(await text(page.locator("[data-public-key]"))).toBe(before);
    const rotation = page.getByRole("region", { name: "Rotate the server key" });
    await rotation.getByRole("button", { name: "Rotate key" }).click();
    expect(await text(rotation.locator("[data-confirm]"))).toContain(
      "Every device config becomes invalid until it is downloaded again.",
    );
    await rotation.getByRole("button", { name: "Keep the key" }).click();
    expect((await settings()).public_key).toBe(before);
    await rotation.getByRole("button", { name: "Rotate key" }).click();
    await rotation.getByRole("button", { name: "Rotate the key now" }).click();
    await page.locator("[data-rotated]").waitFor();
    expect(await text(page.locator("[data-rotated]"))).toContain(SERVER_KEY_ROTATED);
    const after = (await settings()).public_key as string;
    expect(after).not.toBe(before);
    expect(await text(page.locator("[data-public-key]"))).toBe(after);
    await cluster.logged(cluster.api, SERVER_KEY_ROTATED);
  });
});

describe("a project's Devices tab", () => {
  let projectId: string;
  let page: Page;

  beforeAll(async () => {
    const made = await cluster.request("POST", "/api/v1/projects", {
      name: "phones",
      username: "phones",
    });
    expect(made.status).toBe(201);
    projectId = made.body.id;
    const set = await cluster.request("PUT", "/api/v1/wireguard/settings", {
      endpoint_host: "vpn.example.com",
    });
    expect(set.status).toBe(200);
    page = await asAdmin();
  });

  const peers = () => `/projects/${projectId}/wireguard/peers`;
  const row = () => page.locator('tr[data-device="pixel"]');

  it("adds a device with generated keys, and lists it", async () => {
    await page.goto(`/projects/${projectId}`);
    await page.getByRole("navigation", { name: "Project pages" }).getByRole("link", {
      name: "Devices",
    }).click();
    await page.waitForURL(/\/devices$/);
    await page.getByRole("button", { name: "New device" }).click();
    const form = page.getByRole("form", { name: "New device" });
    await form.getByLabel(/^Name/).fill("pixel");
    // A city needs a country: the API's refusal beside the city, and nothing stored.
    await form.getByLabel(/^City/).fill("berlin");
    await form.getByRole("button", { name: "Add device" }).click();
    await form.locator('[data-field="city"] .field-error').waitFor();
    expect(await text(form.locator('[data-field="city"] .field-error'))).toContain(
      "need a country",
    );
    expect((await cluster.request("GET", `/api/v1${peers()}`)).body).toEqual([]);

    await form.getByLabel(/^Country/).fill("de");
    await form.getByLabel(/^Session/).fill("42");
    await form.getByRole("button", { name: "Add device" }).click();
    await page.locator('[data-added="pixel"]').waitFor();
    expect(await text(page.locator('[data-added="pixel"]'))).toContain("The server made its keys");
    await row().waitFor();
    const [device] = (await cluster.request("GET", `/api/v1${peers()}`)).body;
    expect(device).toMatchObject({
      name: "pixel",
      address: "10.66.0.2",
      enabled: true,
      country: "DE",
      city: "berlin",
      session_id: "42",
      has_private_key: true,
      online: false,
      last_seen_at: null,
    });
    const cells = await row().locator("td").allTextContents();
    expect(cells.slice(0, 9)).toEqual([
      "pixel",
      "WireGuard",
      "enabledoffline",
      "never",
      "DE",
      "–",
      "berlin",
      "42",
      "10.66.0.2",
    ]);
  });

  it("downloads the config and shows its QR code, with no key on the page", async () => {
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      row().getByRole("button", { name: "Download .conf" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe("pixel.conf");
    const saved = join(folder, "pixel.conf");
    await download.saveAs(saved);
    const config = await readFile(saved, "utf8");
    expect(config).toContain("[Interface]");
    expect(config).toContain("[Peer]");
    expect(config).toContain("Address = 10.66.0.2/32");
    expect(config).toContain("Endpoint = vpn.example.com:51820");
    const [device] = (await cluster.request("GET", `/api/v1${peers()}`)).body;
    expect(config).toBe(await rawAnswer(`${peers()}/${device.id}/config`));

    await row().getByRole("button", { name: "QR code" }).click();
    const qr = page.getByRole("region", { name: "QR code of pixel" });
    const image = qr.getByRole("img", { name: "The WireGuard config of pixel" });
    await image.waitFor();
    await eventually(() => image.evaluate((img: HTMLImageElement) => img.naturalWidth))
      .toBeGreaterThan(0);
    // The image is the API's SVG of the same config.
    const svg = await image.evaluate(async (img: HTMLImageElement) =>
      await (await fetch(img.src)).text()
    );
    expect(svg).toMatch(/^<svg /);
    expect(svg).toBe(await rawAnswer(`${peers()}/${device.id}/config?format=qr`));
    await row().getByRole("button", { name: "QR code" }).click();
    expect(await qr.count()).toBe(0);

    const keys = config.split("\n").filter((line) => /^(PrivateKey|PresharedKey) = /.test(line))
      .map((line) => line.split(" = ")[1]);
    expect(keys).toHaveLength(2);
    const html = await page.content();
    for (const key of keys) expect(html).not.toContain(key);
    expect(await page.getByRole("alert").count()).toBe(0);
  });

  it("edits a device, disables it, shows it online once seen, and deletes it after a second click", async () => {
    await row().getByRole("button", { name: "Edit" }).click();
    const edit = page.getByRole("form", { name: "Edit pixel" });
    expect(await edit.getByLabel(/^Country/).inputValue()).toBe("DE");
    await edit.getByLabel(/^City/).fill("munich");
    await edit.getByLabel(/^State/).fill("by");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await eventually(async () => (await row().locator("td").allTextContents()).slice(4, 7))
      .toEqual(["DE", "BY", "munich"]);
    expect(await edit.count()).toBe(0);

    await row().getByRole("button", { name: "Disable" }).click();
    await eventually(() => row().locator("[data-enabled]").getAttribute("data-enabled"))
      .toBe("false");
    const [disabled] = (await cluster.request("GET", `/api/v1${peers()}`)).body;
    expect(disabled.enabled).toBe(false);
    await row().getByRole("button", { name: "Enable" }).click();
    await eventually(() => row().locator("[data-enabled]").getAttribute("data-enabled"))
      .toBe("true");

    // A gateway's sighting, as tunnel_last_seen records it: online, seen now (the page reads
    // the list again within 15 s).
    await cluster.sql`update tunnel_devices set last_seen_at = now() where id = ${disabled.id}`;
    await eventually(() => row().locator("[data-online]").getAttribute("data-online"), {
      timeout: 30_000,
    }).toBe("true");
    expect(await text(row().locator("[data-last-seen]"))).not.toBe("never");

    await row().getByRole("button", { name: "Delete", exact: true }).click();
    await row().getByRole("button", { name: "Keep" }).click();
    expect((await cluster.request("GET", `/api/v1${peers()}`)).body).toHaveLength(1);
    await row().getByRole("button", { name: "Delete", exact: true }).click();
    await row().getByRole("button", { name: "Delete pixel for good" }).click();
    await eventually(() => row().count()).toBe(0);
    expect((await cluster.request("GET", `/api/v1${peers()}`)).body).toEqual([]);
    await page.getByText("No devices yet.").waitFor();
  });

  it("shows a viewer the devices and the settings with nothing to change", async () => {
    const added = await cluster.request("POST", `/api/v1${peers()}`, { name: "tablet" });
    expect(added.status).toBe(201);
    const viewer = await asViewer();
    await viewer.goto(`/projects/${projectId}/devices`);
    await viewer.locator('tr[data-device="tablet"]').waitFor();
    expect(await viewer.getByRole("button", { name: "New device" }).count()).toBe(0);
    expect(await viewer.getByRole("button", { name: "Download .conf" }).count()).toBe(0);
    expect(await viewer.getByRole("button", { name: "Delete" }).count()).toBe(0);

    expect(
      await viewer.getByRole("navigation", { name: "Main" }).getByRole("link", {
        name: "WireGuard",
      }).count(),
    ).toBe(0);
    await viewer.goto("/wireguard");
    const form = viewer.getByRole("form", { name: "WireGuard settings" });
    await form.waitFor();
    expect(await form.getByLabel("Endpoint host").inputValue()).toBe("vpn.example.com");
    for (const label of ["Endpoint host", "Listen port", "Subnet", "MTU", "Keepalive (seconds)"]) {
      expect(await form.getByLabel(label).isDisabled(), label).toBe(true);
    }
    expect(await viewer.getByRole("button", { name: "Save settings" }).count()).toBe(0);
    expect(await viewer.getByRole("button", { name: "Rotate key" }).count()).toBe(0);
  });
});

describe("the OpenVPN settings page", () => {
  it("saves the settings, refuses values at their fields, shows the CA, and rotates the identity once confirmed", async () => {
    const page = await asAdmin();
    await page.goto("/");
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "OpenVPN" })
      .click();
    await page.waitForURL(/\/openvpn$/);
    const form = page.getByRole("form", { name: "OpenVPN settings" });
    await form.locator('[data-endpoint="none"]').waitFor();
    expect(await form.getByLabel("Subnet").inputValue()).toBe("10.67.0.0/16");
    expect(await form.getByLabel("Listen port").inputValue()).toBe("1194");
    expect(await form.getByLabel("Transport").inputValue()).toBe("udp");
    const stored = await settings("openvpn");

    // The CA certificate as the API answers it, and its copy.
    const ca = stored.ca_certificate as string;
    expect(ca).toContain("-----BEGIN CERTIFICATE-----");
    expect(await text(page.locator("[data-ca-certificate]"))).toBe(ca.trim());
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"]);
    const copy = page.getByRole("button", { name: "Copy the CA certificate" });
    await copy.click();
    await eventually(() => page.evaluate(() => navigator.clipboard.readText())).toBe(ca);

    // A subnet overlapping WireGuard's (10.66.0.0/16): the API's words beside it, nothing stored.
    await form.getByLabel("Subnet").fill("10.66.128.0/17");
    await form.getByRole("button", { name: "Save settings" }).click();
    await form.locator('[data-field="subnet"] .field-error').waitFor();
    expect(await text(form.locator('[data-field="subnet"] .field-error'))).toContain(
      "overlaps the WireGuard subnet",
    );
    expect(await settings("openvpn")).toMatchObject({ subnet: "10.67.0.0/16" });

    // A timeout under twice the interval: refused beside the timeout, nothing stored.
    await form.getByLabel("Subnet").fill("10.67.0.0/16");
    await form.getByLabel("Keepalive interval (seconds)").fill("30");
    await form.getByLabel("Keepalive timeout (seconds)").fill("40");
    await form.getByRole("button", { name: "Save settings" }).click();
    await form.locator('[data-field="keepalive_timeout_seconds"] .field-error').waitFor();
    expect(
      await text(form.locator('[data-field="keepalive_timeout_seconds"] .field-error')),
    ).toContain("at least twice the interval");
    expect(await form.locator('[data-field="subnet"] .field-error').count()).toBe(0);
    expect(await settings("openvpn")).toMatchObject({
      keepalive_interval_seconds: 10,
      keepalive_timeout_seconds: 60,
      endpoint_host: null,
    });

    await form.getByLabel("Keepalive timeout (seconds)").fill("90");
    await form.getByLabel("Endpoint host").fill("OVPN.example.com");
    await form.getByLabel("Transport").selectOption("tcp");
    await form.getByLabel("Listen port").fill("443");
    await form.getByRole("button", { name: "Save settings" }).click();
    await form.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    expect(await settings("openvpn")).toMatchObject({
      endpoint_host: "ovpn.example.com",
      transport: "tcp",
      listen_port: 443,
      keepalive_interval_seconds: 30,
      keepalive_timeout_seconds: 90,
      subnet: "10.67.0.0/16",
      mtu: 1500,
    });
    // The form refills with the values as stored.
    expect(await form.getByLabel("Endpoint host").inputValue()).toBe("ovpn.example.com");
    expect(await form.locator('[data-endpoint="none"]').count()).toBe(0);

    // The rotation asks first, saying what it breaks.
    const rotation = page.getByRole("region", { name: "Rotate the identity" });
    await rotation.getByRole("button", { name: "Rotate identity" }).click();
    expect(await text(rotation.locator("[data-confirm]"))).toContain(
      "Every device profile becomes invalid until it is downloaded again.",
    );
    await rotation.getByRole("button", { name: "Keep the identity" }).click();
    expect((await settings("openvpn")).ca_certificate).toBe(ca);
    await rotation.getByRole("button", { name: "Rotate identity" }).click();
    await rotation.getByRole("button", { name: "Rotate the identity now" }).click();
    await page.locator("[data-rotated]").waitFor();
    expect(await text(page.locator("[data-rotated]"))).toContain(OPENVPN_IDENTITY_ROTATED);
    const after = (await settings("openvpn")).ca_certificate as string;
    expect(after).not.toBe(ca);
    expect(await text(page.locator("[data-ca-certificate]"))).toBe(after.trim());
    await cluster.logged(cluster.api, OPENVPN_IDENTITY_ROTATED);
  });
});

describe("OpenVPN devices on a project's Devices tab", () => {
  let projectId: string;
  let page: Page;

  beforeAll(async () => {
    const made = await cluster.request("POST", "/api/v1/projects", {
      name: "laptops",
      username: "laptops",
    });
    expect(made.status).toBe(201);
    projectId = made.body.id;
    const set = await cluster.request("PUT", "/api/v1/openvpn/settings", {
      endpoint_host: "vpn.example.com",
      transport: "udp",
      listen_port: 1194,
    });
    expect(set.status).toBe(200);
    // A WireGuard device of the same project, listed beside the OpenVPN one.
    const phone = await cluster.request("POST", `/api/v1/projects/${projectId}/wireguard/peers`, {
      name: "phone",
    });
    expect(phone.status).toBe(201);
    page = await asAdmin();
  });

  const peers = () => `/projects/${projectId}/openvpn/peers`;
  const row = () => page.locator('tr[data-device="laptop"][data-protocol="openvpn"]');
  const device = async () => {
    const listed = (await cluster.request("GET", `/api/v1${peers()}`)).body;
    expect(listed).toHaveLength(1);
    return listed[0];
  };

  it("adds an OpenVPN device with the protocol picked, and lists it with its address", async () => {
    await page.goto(`/projects/${projectId}/devices`);
    await page.locator('tr[data-device="phone"][data-protocol="wireguard"]').waitFor();
    await page.getByRole("button", { name: "New device" }).click();
    const form = page.getByRole("form", { name: "New device" });
    expect(await form.getByLabel(/^Protocol/).inputValue()).toBe("wireguard");
    await form.getByLabel(/^Protocol/).selectOption("openvpn");
    // An OpenVPN device's key is the server's: no field for one of its own.
    expect(await form.getByLabel(/^Its own public key/).count()).toBe(0);
    await form.getByLabel(/^Name/).fill("laptop");
    await form.getByLabel(/^Country/).fill("us");
    await form.getByRole("button", { name: "Add device" }).click();
    await page.locator('[data-added="laptop"]').waitFor();
    expect(await text(page.locator('[data-added="laptop"]'))).toContain(
      "OpenVPN device “laptop” added at 10.67.0.2",
    );
    await row().waitFor();
    expect(await device()).toMatchObject({
      name: "laptop",
      protocol: "openvpn",
      address: "10.67.0.2",
      enabled: true,
      country: "US",
      online: false,
      last_seen_at: null,
    });
    const cells = await row().locator("td").allTextContents();
    expect(cells.slice(0, 9)).toEqual([
      "laptop",
      "OpenVPN",
      "enabledoffline",
      "never",
      "US",
      "–",
      "–",
      "–",
      "10.67.0.2",
    ]);
    expect(cells[9]).toContain("0 req");
    // The WireGuard device stays listed beside it, each with its own file; no QR for OpenVPN.
    expect(await page.locator("tbody tr[data-device]").count()).toBe(2);
    expect(await row().getByRole("button", { name: "QR code" }).count()).toBe(0);
    expect(await row().getByRole("button", { name: "Download .conf" }).count()).toBe(0);
    const phone = page.locator('tr[data-device="phone"]');
    expect(await phone.getByRole("button", { name: "Download .ovpn" }).count()).toBe(0);
    expect(await phone.getByRole("button", { name: "New certificate" }).count()).toBe(0);
  });

  it("downloads its .ovpn profile, with no key on the page", async () => {
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      row().getByRole("button", { name: "Download .ovpn" }).click(),
    ]);
    expect(download.suggestedFilename()).toBe("laptop.ovpn");
    const saved = join(folder, "laptop.ovpn");
    await download.saveAs(saved);
    const profile = await readFile(saved, "utf8");
    expect(profile).toMatch(/^client$/m);
    expect(profile).toContain("<cert>");
    expect(profile).toContain("remote vpn.example.com 1194");
    const { id } = await device();
    expect(profile).toBe(await rawAnswer(`${peers()}/${id}/config`));

    const key = /<key>\n([^]*?)<\/key>/.exec(profile)?.[1]
      .split("\n").filter((line) => line !== "" && !line.startsWith("-----"));
    expect(key?.length).toBeGreaterThan(0);
    const html = await page.content();
    for (const line of key!) expect(html).not.toContain(line);
    expect(await page.getByRole("alert").count()).toBe(0);
  });

  it("issues a new certificate only once confirmed", async () => {
    const before = await device();
    await row().getByRole("button", { name: "New certificate" }).click();
    const confirmation = page.locator("[data-confirm]");
    expect(await text(confirmation)).toContain("the .ovpn profile it has stops working");
    await page.getByRole("button", { name: "Keep the certificate" }).click();
    expect(await confirmation.count()).toBe(0);
    expect((await device()).certificate_serial).toBe(before.certificate_serial);

    await row().getByRole("button", { name: "New certificate" }).click();
    await page.getByRole("button", { name: "Issue the new certificate" }).click();
    await page.locator('[data-renewed="laptop"]').waitFor();
    const after = await device();
    expect(after.certificate_serial).not.toBe(before.certificate_serial);
    expect(await text(page.locator('[data-renewed="laptop"] [data-serial]'))).toBe(
      after.certificate_serial,
    );
    await eventually(() => confirmation.count()).toBe(0);
    // The profile now carries the new certificate.
    const profile = await rawAnswer(`${peers()}/${after.id}/config`);
    expect(profile).toContain(after.certificate.trim());
    expect(profile).not.toContain(before.certificate.trim());
  });

  it("charts its usage, disables it, and deletes it after a second click", async () => {
    await row().getByRole("button", { name: "Usage" }).click();
    const usage = page.getByRole("region", { name: "Usage of laptop" });
    await usage.waitFor();
    expect(await text(usage.locator("p").first())).toContain("All-time: 0 requests");
    expect(await text(usage.locator("p").first())).toContain(
      "0 encrypted DNS connections closed",
    );
    // The device's history, read from the OpenVPN path, drawn as the charts.
    await usage.locator(".charts").waitFor();
    expect(await usage.getByRole("alert").count()).toBe(0);
    await row().getByRole("button", { name: "Usage" }).click();
    expect(await usage.count()).toBe(0);

    await row().getByRole("button", { name: "Disable" }).click();
    await eventually(() => row().locator("[data-enabled]").getAttribute("data-enabled"))
      .toBe("false");
    expect((await device()).enabled).toBe(false);

    await row().getByRole("button", { name: "Delete", exact: true }).click();
    await row().getByRole("button", { name: "Delete laptop for good" }).click();
    await eventually(() => row().count()).toBe(0);
    expect((await cluster.request("GET", `/api/v1${peers()}`)).body).toEqual([]);
    // The WireGuard device is still there.
    expect(await page.locator('tr[data-device="phone"]').count()).toBe(1);
  });

  it("shows a viewer the OpenVPN devices and settings with nothing to change", async () => {
    const added = await cluster.request("POST", `/api/v1${peers()}`, { name: "desktop" });
    expect(added.status).toBe(201);
    const viewer = await asViewer();
    await viewer.goto(`/projects/${projectId}/devices`);
    await viewer.locator('tr[data-device="desktop"][data-protocol="openvpn"]').waitFor();
    expect(await viewer.getByRole("button", { name: "New device" }).count()).toBe(0);
    expect(await viewer.getByRole("button", { name: "Download .ovpn" }).count()).toBe(0);
    expect(await viewer.getByRole("button", { name: "New certificate" }).count()).toBe(0);
    expect(await viewer.getByRole("button", { name: "Disable" }).count()).toBe(0);

    expect(
      await viewer.getByRole("navigation", { name: "Main" }).getByRole("link", {
        name: "OpenVPN",
      }).count(),
    ).toBe(0);
    await viewer.goto("/openvpn");
    const form = viewer.getByRole("form", { name: "OpenVPN settings" });
    await form.waitFor();
    expect(await form.getByLabel("Endpoint host").inputValue()).toBe("vpn.example.com");
    for (
      const label of [
        "Endpoint host",
        "Transport",
        "Listen port",
        "Subnet",
        "MTU",
        "Keepalive interval (seconds)",
        "Keepalive timeout (seconds)",
      ]
    ) {
      expect(await form.getByLabel(label).isDisabled(), label).toBe(true);
    }
    expect(await text(viewer.locator("[data-ca-certificate]"))).toContain(
      "-----BEGIN CERTIFICATE-----",
    );
    expect(await viewer.getByRole("button", { name: "Save settings" }).count()).toBe(0);
    expect(await viewer.getByRole("button", { name: "Rotate identity" }).count()).toBe(0);
  });
});
