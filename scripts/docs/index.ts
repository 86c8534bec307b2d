/**
 * `npm run docs`: rewrites the generated parts of the docs from their one source each:
 * docs/settings.md from the settings table, and architecture.md's "Layers" section from the
 * floor plan. tests/docs/ fails when either is stale.
 */
import { readFile, writeFile } from "node:fs/promises";
import { renderSettingsPage, SETTINGS_PAGE } from "./settings.ts";
import { ARCHITECTURE_PAGE, architecturePage } from "./layers.ts";

await writeFile(SETTINGS_PAGE, renderSettingsPage());
console.log(`Wrote ${SETTINGS_PAGE}`);
await writeFile(ARCHITECTURE_PAGE, architecturePage(await readFile(ARCHITECTURE_PAGE, "utf8")));
console.log(`Wrote ${ARCHITECTURE_PAGE}`);
