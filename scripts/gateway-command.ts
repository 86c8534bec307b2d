/**
 * How a gateway process is run from this checkout: Deno (the npm package's binary) with the
 * permissions the gateway needs and nothing more. `npm start`, the tests and the build use this
 * one list, so a permission the gateway gains is granted everywhere at once.
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const DENO_BIN = join(ROOT, "node_modules", ".bin", "deno");
export const GATEWAY_ENTRY = join(ROOT, "gateway", "main.ts");

/** The hosts file the gateway's destination guard reads (HOSTS_FILE in gateway/net/io/resolve.ts). */
const HOSTS_FILE = "/etc/hosts";

/**
 * The network; OCTOPROX_* variables only (other lookups, such as a library's DEBUG, read as
 * unset); the host name (its default instance name); reading its own code (`readable`), which
 * worker isolates load (gateway/app/isolates.ts), and /etc/hosts, which the destination
 * guard reads as the system's resolver does (gateway/net/io/resolve.ts); nothing else of the disk.
 * `--unstable-net` is for SO_REUSEPORT, which lets every isolate listen on the same ports.
 */
export function gatewayPermissions(readable: readonly string[]): string[] {
  return [
    "--allow-net",
    "--allow-env=OCTOPROX_*",
    "--ignore-env",
    "--allow-sys=hostname",
    `--allow-read=${[...readable, HOSTS_FILE].join(",")}`,
    "--unstable-net",
  ];
}

/** The permissions of the gateway run from this checkout's sources. */
export const GATEWAY_PERMISSIONS: readonly string[] = gatewayPermissions(
  ["gateway", "shared", "node_modules"].map((folder) => join(ROOT, folder)),
);

/** The worker isolates' entry: `deno compile` embeds it (workers are not found by analysis). */
export const GATEWAY_WORKER_ENTRY = join(ROOT, "gateway", "app", "isolate-worker.ts");

/** `deno run` arguments for the gateway. */
export function gatewayRunArgs(): string[] {
  return ["run", ...GATEWAY_PERMISSIONS, GATEWAY_ENTRY];
}

/**
 * The single-file bundle (`npm run build:gateway -- --bundle`): the gateway and its packages in
 * one JavaScript file, and the worker isolates' entry bundled beside it under the name the
 * bundled code loads (gateway/app/isolates.ts).
 */
export const GATEWAY_BUNDLE = join(ROOT, "dist", "octoprox-gateway.js");
export const GATEWAY_WORKER_BUNDLE_NAME = "octoprox-gateway-worker.js";

/** `deno run` arguments for a bundle: it may read only its own folder (the worker's file). */
export function gatewayBundleRunArgs(bundle: string = GATEWAY_BUNDLE): string[] {
  return ["run", "--no-config", ...gatewayPermissions([dirname(bundle)]), bundle];
}

/** The environment every Deno process we start gets: no update check against the internet. */
export const DENO_ENV = { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" } as const;
