/**
 * How a gateway process is run from this checkout: Deno (the npm package's binary) with the
 * permissions the gateway needs and nothing more. `npm start`, the tests and the build use this
 * one list, so a permission the gateway gains is granted everywhere at once.
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { TUNNEL_PROGRAMS } from "../gateway/tunnel-plane/command-runner.ts";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const DENO_BIN = join(ROOT, "node_modules", ".bin", "deno");
export const GATEWAY_ENTRY = join(ROOT, "gateway", "main.ts");

/** The hosts file the gateway's destination guard reads (HOSTS_FILE in gateway/net/io/resolve.ts). */
const HOSTS_FILE = "/etc/hosts";
/** What the impersonation engine's loader reads to pick its glibc or musl build. */
const LDD = "/usr/bin/ldd";

/**
 * The network; OCTOPROX_* variables only (other lookups, such as a library's DEBUG, read as
 * unset), and SSL_CERT_FILE and SSL_CERT_DIR, which the gateway sets for the browser-grade
 * engine's roots (gateway/app/upstream-ca.ts); the host name (its default instance name); reading
 * its own code and its TLS interception CA's files (`readable`: worker isolates load the code,
 * gateway/app/isolates.ts; the CA is read at start, gateway/app/mitm-ca.ts), /etc/hosts, which
 * the destination guard reads as the system's resolver does (gateway/net/io/resolve.ts), and
 * /usr/bin/ldd, which the engine's loader reads to tell glibc from musl; nothing else of the disk.
 * `native`: the folders native libraries may be loaded from (the browser-grade modes' engine,
 * gateway/net/tls/impersonation.ts); none: those modes answer 502 saying the engine is missing.
 * `--unstable-net` is for SO_REUSEPORT, which lets every isolate listen on the same ports.
 */
export function gatewayPermissions(
  readable: readonly string[],
  native: readonly string[] = [],
  tunnels = false,
): string[] {
  return [
    "--allow-net",
    "--allow-env=OCTOPROX_*,SSL_CERT_FILE,SSL_CERT_DIR",
    "--ignore-env",
    "--allow-sys=hostname",
    `--allow-read=${[...readable, HOSTS_FILE, LDD].join(",")}`,
    ...(native.length > 0 ? [`--allow-ffi=${native.join(",")}`] : []),
    ...(tunnels ? [`--allow-run=${TUNNEL_PROGRAMS.join(",")}`] : []),
    "--unstable-net",
  ];
}

/**
 * A gateway running a tunnel endpoint (OCTOPROX_WIREGUARD_ENABLED, OCTOPROX_OPENVPN_ENABLED)
 * also runs the programs that make its interfaces, peers and rules, the OpenVPN daemon, and
 * those that list the kernel's connection tracking table for a redirected connection's
 * destination (gateway/tunnel-plane/command-runner.ts).
 */

/** Whether `env` turns a tunnel endpoint on (read as the settings read a flag). */
export function runsTunnels(env: Readonly<Record<string, string | undefined>>): boolean {
  const on = (name: string) =>
    ["1", "true", "yes", "on"].includes((env[name] ?? "").trim().toLowerCase());
  return on("OCTOPROX_WIREGUARD_ENABLED") || on("OCTOPROX_OPENVPN_ENABLED");
}

/** The folders of this checkout the gateway's code is loaded from. */
const CODE_FOLDERS: readonly string[] = ["gateway", "shared", "node_modules"].map((folder) =>
  join(ROOT, folder)
);

/** Where the checkout's native libraries are: the impersonation engine's build for the platform. */
const NATIVE_FOLDERS: readonly string[] = [join(ROOT, "node_modules")];

/**
 * The settings naming files (or a folder) a gateway reads: its TLS interception CA's two files
 * (and after a rotation the previous CA's), the upstream CAs it trusts, and the shared folder of
 * IP database files.
 */
export const GATEWAY_FILE_SETTINGS = [
  "OCTOPROX_TLS_MITM_CA_CERT_PATH",
  "OCTOPROX_TLS_MITM_CA_KEY_PATH",
  "OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH",
  "OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH",
  "OCTOPROX_UPSTREAM_CA_FILE",
  "OCTOPROX_GATEWAY_GEO_DIR",
] as const;

/**
 * Where an installed gateway binary (`npm run build:gateway`, whose permissions are compiled
 * in) may read its CA unless the build is told the files (infra/systemd keeps them here).
 */
export const INSTALLED_CA_DIR = "/etc/octoprox/tls";

/**
 * The files the settings in `env` name for the gateway to read (GATEWAY_FILE_SETTINGS), as
 * `--allow-read` takes them: exactly those, nothing beside them. A comma cannot be granted (the
 * list is comma-separated): such a path is refused here, naming the setting.
 */
export function gatewayReadableFiles(env: Readonly<Record<string, string | undefined>>): string[] {
  const files: string[] = [];
  for (const name of GATEWAY_FILE_SETTINGS) {
    const path = env[name]?.trim();
    if (path === undefined || path === "") continue;
    if (path.includes(",")) {
      throw new Error(`${name}: ${path} holds a comma, which Deno's --allow-read cannot grant`);
    }
    files.push(resolve(path));
  }
  return files;
}

/**
 * The permissions of the gateway run from this checkout's sources, reading the files `env`
 * names (gatewayReadableFiles; none: the gateway then refuses to start, naming the setting).
 */
export function gatewayCheckoutPermissions(
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  return gatewayPermissions(
    [...CODE_FOLDERS, ...gatewayReadableFiles(env)],
    NATIVE_FOLDERS,
    runsTunnels(env),
  );
}

/**
 * The permissions compiled into the gateway binary: its code, the files the build's environment
 * names (gatewayReadableFiles), and INSTALLED_CA_DIR unless that environment names the CA's.
 */
export function gatewayBinaryPermissions(
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const named = env.OCTOPROX_TLS_MITM_CA_CERT_PATH?.trim() ||
    env.OCTOPROX_TLS_MITM_CA_KEY_PATH?.trim();
  return gatewayPermissions(
    [
      ...CODE_FOLDERS,
      ...gatewayReadableFiles(env),
      ...(named ? [] : [INSTALLED_CA_DIR]),
    ],
    NATIVE_FOLDERS,
    runsTunnels(env),
  );
}

/** The worker isolates' entry: `deno compile` embeds it (workers are not found by analysis). */
export const GATEWAY_WORKER_ENTRY = join(ROOT, "gateway", "app", "isolate-worker.ts");

/**
 * `deno run` arguments for the gateway, given the environment it will run with: it may read the
 * files that environment names (its CA's: gatewayReadableFiles), and no others.
 */
export function gatewayRunArgs(env: Readonly<Record<string, string | undefined>>): string[] {
  return ["run", ...gatewayCheckoutPermissions(env), GATEWAY_ENTRY];
}

/**
 * The single-file bundle (`npm run build:gateway -- --bundle`): the gateway and its packages in
 * one JavaScript file, and the worker isolates' entry bundled beside it under the name the
 * bundled code loads (gateway/app/isolates.ts).
 */
export const GATEWAY_BUNDLE = join(ROOT, "dist", "octoprox-gateway.js");
export const GATEWAY_WORKER_BUNDLE_NAME = "octoprox-gateway-worker.js";

/**
 * `deno run` arguments for a bundle: it may read only its own folder (the worker's file) and the
 * files `env` names (gatewayReadableFiles).
 */
export function gatewayBundleRunArgs(
  env: Readonly<Record<string, string | undefined>>,
  bundle: string = GATEWAY_BUNDLE,
): string[] {
  return [
    "run",
    "--no-config",
    ...gatewayPermissions([dirname(bundle), ...gatewayReadableFiles(env)], [], runsTunnels(env)),
    bundle,
  ];
}

/** The environment every Deno process we start gets: no update check against the internet. */
export const DENO_ENV = { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" } as const;
