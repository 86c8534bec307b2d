/**
 * The README's facts: its two commands, the addresses `npm start` prints (the settings' defaults),
 * and the way on to the docs. Every OCTOPROX_* setting is listed in docs/settings.md, written
 * from the settings table and checked by tests/docs/settings.test.ts.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { settingDocs } from "../../shared/settings.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const readme = readFileSync(`${ROOT}README.md`, "utf8");
const packageJson = JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")) as {
  scripts: Record<string, string>;
};

it("gives the two commands, both scripts of package.json", () => {
  expect(readme).toContain("npm ci && npm start");
  expect(readme).toContain("npm test");
  expect(packageJson.scripts.start).toBe("tsx scripts/start.ts");
  expect(packageJson.scripts.test).toMatch(/^vitest run/);
});

it("says the ports the settings default to", () => {
  const defaults = new Map(settingDocs().map((doc) => [doc.name, doc.defaultValue]));
  for (const name of ["OCTOPROX_API_PORT", "OCTOPROX_PROXY_PORT", "OCTOPROX_SOCKS_PORT"]) {
    expect(readme, name).toContain(`127.0.0.1:${defaults.get(name)}`);
  }
  expect(readme).toContain(`127.0.0.1:${defaults.get("OCTOPROX_GATEWAY_STATUS_PORT")}`);
  expect(readme).toContain(`\`${defaults.get("OCTOPROX_ADMIN_USERNAME")}\``);
});

it("sends readers on to the docs index and the settings page", () => {
  expect(readme).toContain("](docs/README.md)");
  expect(readme).toContain("](docs/settings.md)");
});
