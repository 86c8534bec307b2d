/**
 * Suite `web`: what a browser loads for the dashboard. Builds it afresh (scripts/build-web.ts)
 * and reads the built JavaScript and CSS, each file gzipped at the default level as a server or
 * CDN would send it. Budget: the JavaScript at most 200 KB gzipped. The proxies page's first
 * page with 100,000 proxies is timed by its browser test (e2e/dashboard/proxies.test.ts), which
 * prints it.
 */
import { readdir, readFile } from "node:fs/promises";
import { extname, join } from "node:path";
import { gzipSync } from "node:zlib";
import { buildWeb, WEB_BUILD_DIR } from "../build-web.ts";
import type { Row, Suite, SuiteContext } from "./suite.ts";

const BUDGET_KB = 200;

async function run(context: SuiteContext): Promise<Row[]> {
  await buildWeb();
  const assets = join(WEB_BUILD_DIR, "assets");
  const sizes = { ".js": { raw: 0, gzip: 0, files: 0 }, ".css": { raw: 0, gzip: 0, files: 0 } };
  for (const name of await readdir(assets)) {
    const kind = extname(name) as keyof typeof sizes;
    if (!(kind in sizes)) continue;
    const bytes = await readFile(join(assets, name));
    sizes[kind].raw += bytes.length;
    sizes[kind].gzip += gzipSync(bytes).length;
    sizes[kind].files++;
  }
  context.log(`web: ${sizes[".js"].files} script(s), ${sizes[".css"].files} stylesheet(s)`);
  const kb = (bytes: number) => bytes / 1000;
  return [
    {
      figure: "dashboard JavaScript, gzipped",
      value: kb(sizes[".js"].gzip),
      unit: "KB",
      digits: 1,
      budget: { op: "<=", limit: BUDGET_KB },
      detail: `${sizes[".js"].files} file(s), ${kb(sizes[".js"].raw).toFixed(1)} KB before gzip`,
    },
    {
      figure: "dashboard CSS, gzipped",
      value: kb(sizes[".css"].gzip),
      unit: "KB",
      digits: 1,
      detail: `${kb(sizes[".css"].raw).toFixed(1)} KB before gzip`,
    },
  ];
}

export const webSuite: Suite = {
  name: "web",
  description: "the dashboard's built JavaScript and CSS, gzipped",
  run,
};
