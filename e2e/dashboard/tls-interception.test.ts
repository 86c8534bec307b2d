/**
 * A project's TLS interception in the dashboard, in a real browser (Debian's chromium) against
 * the admin API and its served build: the project form offers every mode, the browser only under
 * override_ua, with Safari disabled and the reason said; a bypass entry the API
 * refuses is shown beside the list with the entry and the API's words, and nothing is stored;
 * plain with a bypass list saves, the form refills with the list as stored, and the projects
 * list shows the mode.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureWebBuild } from "../../scripts/build-web.ts";
import { launchBrowser, signedIn } from "../../testkit/browser.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { SAFARI_UNAVAILABLE } from "../../control/model/tls-mitm.ts";

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

async function as(role: "editor" | "viewer"): Promise<Page> {
  const page = await signedIn(browser, `http://127.0.0.1:${api.port}`, {
    username: role,
    password: `password-${role}`,
  });
  pages.push(page);
  return page;
}

describe("the project form's TLS interception", () => {
  it("offers what this build serves, says why not the rest, and saves plain with a bypass list", async () => {
    const made = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: { name: "Intercepted", username: "intercepted" },
    });
    expect(made.status).toBe(201);
    const page = await as("editor");
    await page.goto(`/projects/${made.body.id}/settings`);
    const form = page.getByRole("form", { name: "Project" });
    const fields = form.getByRole("group", { name: "TLS interception" });
    const mode = fields.locator('select[name="tls_mitm_mode"]');
    await expect.poll(() => mode.inputValue()).toBe("off");
    // Every mode is offered; the browser only under override_ua, Safari disabled with why.
    const options = (select: string) =>
      fields.locator(`select[name="${select}"] option`).evaluateAll((list) =>
        (list as HTMLOptionElement[]).map((o) => [o.value, o.disabled])
      );
    expect(await options("tls_mitm_mode")).toEqual([
      ["off", false],
      ["plain", false],
      ["match_ua", false],
      ["override_ua", false],
    ]);
    expect(await fields.getByTestId("tls-mitm-unavailable").count()).toBe(0);
    const browserSelect = fields.locator('select[name="tls_mitm_browser"]');
    expect(await browserSelect.isDisabled()).toBe(true);
    await mode.selectOption("override_ua");
    await expect.poll(() => browserSelect.isDisabled()).toBe(false);
    expect(await options("tls_mitm_browser")).toEqual([
      ["", false],
      ["chrome", false],
      ["firefox", false],
      ["safari", true],
      ["edge", false],
      ["random", false],
    ]);
    expect(await fields.getByTestId("tls-mitm-browser-unavailable").textContent()).toContain(
      SAFARI_UNAVAILABLE.slice(0, 60),
    );

    // A wildcard is refused beside the list, naming the entry; nothing is stored.
    await mode.selectOption("plain");
    const bypass = fields.locator('textarea[name="tls_mitm_bypass"]');
    await bypass.fill("Bank.Example\n\n.pinned.example\n*.bad.example");
    await form.getByRole("button", { name: "Save changes" }).click();
    const refusal = fields.locator('[data-field="tls_mitm_bypass"] .field-error');
    await expect.poll(() => refusal.textContent()).toContain("*.bad.example");
    expect(await refusal.textContent()).toContain("must not hold a wildcard");
    const unchanged = await h.request("GET", `/api/v1/projects/${made.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(unchanged.body).toMatchObject({ tls_mitm_mode: "off", tls_mitm_bypass: [] });

    // Without it, saved; the form shows the list as stored (lower case).
    await bypass.fill("Bank.Example\n\n.pinned.example\nbank.example");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByRole("status").waitFor();
    const saved = await h.request("GET", `/api/v1/projects/${made.body.id}`, {
      token: h.tokens.viewer,
    });
    expect(saved.body).toMatchObject({
      tls_mitm_mode: "plain",
      tls_mitm_browser: null,
      tls_mitm_bypass: ["bank.example", ".pinned.example"],
    });
    await expect.poll(() => bypass.inputValue()).toBe("bank.example\n.pinned.example");
    expect(await mode.inputValue()).toBe("plain");

    await page.goto("/");
    const row = page.getByRole("row").filter({ hasText: "Intercepted" });
    await expect.poll(() => row.getByTestId("tls-mitm-mode").textContent())
      .toBe("plain (2 bypassed)");
  });

  it("shows a viewer the settings, disabled", async () => {
    const made = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.editor,
      body: {
        name: "Watched",
        username: "watched",
        tls_mitm_mode: "plain",
        tls_mitm_bypass: ["pinned.example"],
      },
    });
    const page = await as("viewer");
    await page.goto(`/projects/${made.body.id}/settings`);
    const fields = page.getByRole("group", { name: "TLS interception" });
    const mode = fields.locator('select[name="tls_mitm_mode"]');
    await expect.poll(() => mode.inputValue()).toBe("plain");
    expect(await mode.isDisabled()).toBe(true);
    const bypass = fields.locator('textarea[name="tls_mitm_bypass"]');
    expect(await bypass.inputValue()).toBe("pinned.example");
    expect(await bypass.isDisabled()).toBe(true);
  });
});
