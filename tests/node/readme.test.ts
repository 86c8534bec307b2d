/** The README's table of environment variables names every setting the code reads. */
import { readFile } from "node:fs/promises";
import { expect, it } from "vitest";
import { SETTING_NAMES } from "../../shared/settings.ts";
import { ROOT } from "../../testkit/processes.ts";

it("the README lists every OCTOPROX_* setting", async () => {
  const readme = await readFile(`${ROOT}/README.md`, "utf8");
  const missing = SETTING_NAMES.filter((name) => !readme.includes(`\`${name}\``));
  expect(missing).toEqual([]);
});
