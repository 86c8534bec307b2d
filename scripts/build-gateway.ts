/**
 * `npm run build:gateway`: the gateway as one executable, dist/octoprox-gateway, made by
 * `deno compile` with the permissions the gateway runs with (and nothing more).
 *
 * The code is bundled (`--bundle`, esbuild inside Deno) and node_modules left out: the bundle
 * holds the few packages the gateway imports (ioredis, valibot), where embedding the folder
 * would add the control plane's 180 MB.
 *
 * `deno compile` needs Deno's runtime build (denort) for the target, which it downloads from
 * dl.deno.land the first time. Where that cannot be reached, the build stops with one line
 * saying so; set DENORT_BIN to a denort binary of the same Deno version to build offline.
 *
 * The binary may read its TLS interception CA's files where the build's environment names them
 * (OCTOPROX_TLS_MITM_CA_CERT_PATH and _KEY_PATH, the paths it will run with), else anything in
 * /etc/octoprox/tls (INSTALLED_CA_DIR, where infra/systemd keeps them); the build says which.
 *
 * `npm run build:gateway -- --bundle` writes the code that binary embeds instead, as JavaScript
 * for `deno run` (scripts/gateway-bundle.ts): dist/octoprox-gateway.js and its worker isolates'
 * dist/octoprox-gateway-worker.js. It needs no runtime download.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { buildGatewayBundle } from "./gateway-bundle.ts";
import {
  DENO_BIN as DENO,
  DENO_ENV,
  GATEWAY_ENTRY,
  GATEWAY_WORKER_ENTRY,
  gatewayBinaryPermissions,
  INSTALLED_CA_DIR,
  ROOT,
} from "./gateway-command.ts";

const OUTPUT = join(ROOT, "dist", "octoprox-gateway");

function fail(message: string): never {
  process.stderr.write(`build:gateway: ${message}\n`);
  process.exit(1);
}

if (process.argv.includes("--bundle")) {
  try {
    const { bundle, worker } = await buildGatewayBundle();
    process.stdout.write(
      `build:gateway: wrote ${relative(ROOT, bundle)} and ${relative(ROOT, worker)}\n`,
    );
    process.exit(0);
  } catch (error) {
    fail((error as Error).message);
  }
}

const denort = process.env.DENORT_BIN;
if (denort !== undefined && denort !== "" && !existsSync(denort)) {
  fail(`DENORT_BIN is set to ${denort}, which does not exist`);
}

mkdirSync(dirname(OUTPUT), { recursive: true });
const args = [
  "compile",
  "--bundle",
  "--exclude",
  "node_modules",
  "--output",
  OUTPUT,
  // Worker isolates load this entry by URL, which the module graph does not follow.
  "--include",
  relative(ROOT, GATEWAY_WORKER_ENTRY),
  // The permissions are compiled in: the binary runs with these and no others. It reads its
  // CA's files where this build's environment names them, else in INSTALLED_CA_DIR.
  ...gatewayBinaryPermissions(process.env),
  relative(ROOT, GATEWAY_ENTRY),
];
const child = spawn(DENO, args, {
  cwd: ROOT,
  env: { ...process.env, ...DENO_ENV },
  stdio: ["ignore", "inherit", "pipe"],
});
let stderr = "";
child.stderr!.setEncoding("utf8").on("data", (text: string) => {
  stderr += text;
});
child.once("error", (error) => fail(`could not run ${DENO}: ${error.message} (npm install?)`));
child.once("exit", (code) => {
  if (code === 0) {
    const readable = gatewayBinaryPermissions(process.env).find((flag) =>
      flag.startsWith("--allow-read=")
    )!.split("=")[1].split(",").filter((path) => !path.startsWith(ROOT));
    process.stdout.write(
      `build:gateway: wrote ${relative(ROOT, OUTPUT)}, which may read ${readable.join(", ")} ` +
        `(its TLS interception CA: the build's OCTOPROX_TLS_MITM_CA_CERT_PATH and _KEY_PATH, ` +
        `else ${INSTALLED_CA_DIR})\n`,
    );
    return;
  }
  const download = /https:\/\/dl\.deno\.land\/\S+denort\S*\.zip/.exec(stderr);
  if (download && /error sending request|dns error|Connect|timed out|status/i.test(stderr)) {
    fail(
      `deno compile could not download Deno's runtime build (${download[0]}); this machine ` +
        "cannot reach dl.deno.land. Build where it can, or set DENORT_BIN to that denort " +
        "binary (unzipped) and run again.",
    );
  }
  process.stderr.write(stderr);
  fail(`deno compile failed (exit code ${code ?? "signal"})`);
});
