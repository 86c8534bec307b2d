/**
 * `npm run build:gateway`: the gateway as one executable, dist/octoprox-gateway, made by
 * `deno compile` with the permissions the gateway runs with (and nothing more).
 *
 * The code is bundled (`--bundle`, esbuild inside Deno) and node_modules left out: the bundle
 * holds the few packages the gateway imports (ioredis, @upstash/redis, valibot), where embedding
 * the folder would add the control plane's 180 MB.
 *
 * `deno compile` needs Deno's runtime build (denort) of its own version for the host's target.
 * The build looks for one first and never lets deno download it (offline that hangs or fails
 * obscurely): DENORT_BIN when set (a denort binary, unzipped), else Deno's cache, where
 * `deno compile` keeps the runtimes it has downloaded:
 * `<DENO_DIR>/dl/release/v<version>/denort-<target>.zip` (DENO_DIR as `deno info` reports it; on
 * Linux `$XDG_CACHE_HOME/deno`, else `~/.cache/deno`). With neither, it exits 1 with one line
 * naming both and pointing to the bundle below.
 *
 * The binary may read its TLS interception CA's files where the build's environment names them
 * (OCTOPROX_TLS_MITM_CA_CERT_PATH and _KEY_PATH, the paths it will run with), else anything in
 * /etc/octoprox/tls (INSTALLED_CA_DIR, where infra/systemd keeps them); the build says which.
 *
 * `npm run build:gateway -- --bundle` writes the code that binary embeds instead, as JavaScript
 * for `deno run` (scripts/gateway-bundle.ts): dist/octoprox-gateway.js and its worker isolates'
 * dist/octoprox-gateway-worker.js. It needs no runtime build.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
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

/** What deno prints for `args`; if it fails, the build stops naming it. */
function denoOutput(args: string[]): string {
  const result = spawnSync(DENO, args, {
    cwd: ROOT,
    env: { ...process.env, ...DENO_ENV },
    encoding: "utf8",
  });
  if (result.status !== 0) {
    const reason = result.error?.message ?? result.stderr.trim();
    fail(`could not run ${DENO} ${args.join(" ")}: ${reason} (npm install?)`);
  }
  return result.stdout;
}

/**
 * Where `deno compile` looks for the runtime it would otherwise download: Deno's cache (DENO_DIR,
 * as `deno info` reports it) under dl/release/v<version>/, named for the host's target (the
 * one `deno --version` names, e.g. x86_64-unknown-linux-gnu).
 */
function cachedRuntimePath(): string {
  const version = /^deno (\S+) \(([^)]*)\)/.exec(denoOutput(["--version"]));
  if (!version) fail(`could not read the version and target of ${DENO}`);
  const target = version[2].split(",").at(-1)!.trim();
  const { denoDir } = JSON.parse(denoOutput(["info", "--json"])) as { denoDir: string };
  return join(denoDir, "dl", "release", `v${version[1]}`, `denort-${target}.zip`);
}

const env: Record<string, string | undefined> = { ...process.env, ...DENO_ENV };
const denort = process.env.DENORT_BIN;
if (denort !== undefined && denort !== "") {
  if (!existsSync(denort)) fail(`DENORT_BIN is set to ${denort}, which does not exist`);
  env.DENORT_BIN = resolve(denort);
} else {
  delete env.DENORT_BIN;
  const cached = cachedRuntimePath();
  if (!existsSync(cached)) {
    fail(
      `no Deno runtime build (denort) found: DENORT_BIN is unset and ${cached} does not exist ` +
        "(Deno's cache, where deno compile keeps the runtimes it downloads); set DENORT_BIN to " +
        "a denort binary of this Deno version, or build `npm run build:gateway -- --bundle`, the " +
        "JavaScript bundle for `deno run`, which needs no runtime build.",
    );
  }
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
const child = spawn(DENO, args, { cwd: ROOT, env, stdio: ["ignore", "inherit", "inherit"] });
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
  fail(`deno compile failed (exit code ${code ?? "signal"})`);
});
