/**
 * docs/settings.md is written from the settings table (shared/settings.ts) by `npm run docs`:
 * the page on disk must be what the table writes today, and the table must describe every field.
 */
import { readFile } from "node:fs/promises";
import { expect, it } from "vitest";
import { renderSettingsPage, SETTINGS_PAGE } from "../../scripts/docs/settings.ts";
import { SETTING_NAMES, settingDocs } from "../../shared/settings.ts";

it("every setting of the table has a description and a side", () => {
  const docs = settingDocs();
  expect(docs.map((doc) => doc.name).sort()).toEqual([...SETTING_NAMES]);
  expect(docs.filter((doc) => doc.description.trim() === "").map((doc) => doc.name)).toEqual([]);
  for (const doc of docs) expect(doc.sides.length, doc.name).toBeGreaterThan(0);
});

it("docs/settings.md is what `npm run docs` writes from the table", async () => {
  const page = await readFile(SETTINGS_PAGE, "utf8");
  // On a difference: run `npm run docs` and commit the page.
  expect(page).toBe(renderSettingsPage());
});

it("docs/settings.md names every OCTOPROX_* setting", async () => {
  const page = await readFile(SETTINGS_PAGE, "utf8");
  expect(SETTING_NAMES.filter((name) => !page.includes(`\`${name}\``))).toEqual([]);
});
