/**
 * A real browser for the dashboard's tests: Debian's chromium driven by playwright-core,
 * headless. Each test takes a context of its own (its own storage, so its own sign-in).
 */
import { existsSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";

const CHROMIUM = process.env.OCTOPROX_TEST_CHROMIUM ?? "/usr/bin/chromium";

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`No chromium at ${CHROMIUM}: install Debian's chromium (.ci/run does)`);
  }
  return await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // As root (CI), chromium's sandbox cannot start; the pages are our own.
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
}

/** A fresh page signed in through the sign-in form. */
export async function signedIn(
  browser: Browser,
  baseUrl: string,
  login: { username: string; password: string },
): Promise<Page> {
  const context = await browser.newContext({
    baseURL: baseUrl,
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  await page.goto("/");
  await page.getByLabel("Username").fill(login.username);
  await page.getByLabel("Password").fill(login.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
  return page;
}
