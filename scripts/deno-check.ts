/**
 * `deno check` of every file that runs under Deno (scripts/deno-files.ts), as `npm run lint`
 * runs it. Exits with deno's code.
 */
import { spawnSync } from "node:child_process";
import { DENO_FILES, DENO_FOLDERS } from "./deno-files.ts";
import { DENO_BIN, DENO_ENV, ROOT } from "./gateway-command.ts";

const result = spawnSync(DENO_BIN, ["check", ...DENO_FOLDERS, ...DENO_FILES], {
  cwd: ROOT,
  env: { ...process.env, ...DENO_ENV },
  stdio: "inherit",
});
if (result.error) throw result.error;
process.exit(result.status ?? 1);
