/**
 * infra/docker/compose.yaml read as compose reads it (YAML with merge keys, `${VAR…}` filled in
 * from an .env made of env.example with its secrets set), and checked for what makes it start:
 * every dependency exists (and has a health check when waited for), every Octoprox process's
 * environment is taken by its side's settings, the ports published are the ones those settings
 * listen on, the store URLs name the store services with the database's own credentials, and
 * the gateway runs the bundle with the gateway's permissions. The image's Dockerfile builds
 * that bundle. The TLS interception CA: `tls-ca` makes it in two volumes and exits, before the
 * api (which mounts the certificate's volume alone) and the gateway (both, read-only, and leave
 * to read them) start; every CA setting names a file in a volume the service mounts.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { gatewayPermissions } from "../../scripts/gateway-command.ts";
import {
  parseControlSettings,
  parseGatewaySettings,
  SETTING_NAMES,
} from "../../shared/settings.ts";
import { ROOT } from "../../testkit/processes.ts";

const DOCKER = join(ROOT, "infra", "docker");
const CONTROL = ["api", "controller", "worker"];
const CA_SETTINGS = ["OCTOPROX_TLS_MITM_CA_CERT_PATH", "OCTOPROX_TLS_MITM_CA_KEY_PATH"];

interface Service {
  image?: string;
  restart?: string;
  volumes?: string[];
  build?: { context: string; dockerfile: string };
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
}

let services: Record<string, Service>;
let dotenv: Record<string, string>;

/**
 * compose's interpolation, on every string of the parsed file: ${VAR}, ${VAR:-default},
 * ${VAR:?error} (an unset one throws).
 */
function interpolate(value: unknown, env: Record<string, string>): unknown {
  if (Array.isArray(value)) return value.map((item) => interpolate(item, env));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, interpolate(item, env)]),
    );
  }
  if (typeof value !== "string") return value;
  return value.replace(/\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}/g, (_, name, kind, rest) => {
    const value = env[name];
    if (value !== undefined && value !== "") return value;
    if (kind === "?") throw new Error(`${name}: ${rest}`);
    return kind === "-" ? rest : "";
  });
}

beforeAll(async () => {
  const example = await readFile(join(DOCKER, "env.example"), "utf8");
  dotenv = {};
  for (const match of example.matchAll(/^([A-Z0-9_]+)=(.*)$/gm)) dotenv[match[1]] = match[2];
  Object.assign(dotenv, {
    POSTGRES_PASSWORD: "pg-password",
    OCTOPROX_INTERNAL_SECRET: "i".repeat(64),
    OCTOPROX_JWT_SECRET: "j".repeat(64),
  });
  services = (interpolate(await composeFile(), dotenv) as { services: typeof services }).services;
});

describe("infra/docker/compose.yaml", () => {
  it("refuses to start without the secrets", async () => {
    const file = await composeFile();
    expect(() => interpolate(file, {})).toThrow(/POSTGRES_PASSWORD/);
    expect(() => interpolate(file, { POSTGRES_PASSWORD: "x" })).toThrow(
      /OCTOPROX_INTERNAL_SECRET/,
    );
  });

  it("has the seven services, every dependency there, healthy or done when waited for", () => {
    expect(Object.keys(services).sort()).toEqual(
      ["api", "controller", "gateway", "postgres", "redis", "tls-ca", "worker"],
    );
    for (const [name, service] of Object.entries(services)) {
      for (const [target, { condition }] of Object.entries(service.depends_on ?? {})) {
        expect(services[target], `${name} depends on ${target}`).toBeDefined();
        expect(["service_started", "service_healthy", "service_completed_successfully"])
          .toContain(condition);
        if (condition === "service_healthy") expect(services[target].healthcheck).toBeDefined();
        // Waited for to finish: it runs once, never restarted.
        if (condition === "service_completed_successfully") {
          expect(services[target].restart, target).toBe("no");
        }
      }
    }
    for (const name of ["controller", "worker"]) {
      expect(Object.keys(services[name].depends_on!).sort()).toEqual(["postgres", "redis"]);
    }
    expect(services.api.depends_on).toEqual({
      postgres: { condition: "service_healthy" },
      redis: { condition: "service_healthy" },
      "tls-ca": { condition: "service_completed_successfully" },
    });
    expect(services.gateway.depends_on).toHaveProperty("redis");
    expect(services.gateway.depends_on).toHaveProperty("tls-ca", {
      condition: "service_completed_successfully",
    });
  });

  it("builds every Octoprox service from the one Dockerfile, which builds the bundle", async () => {
    for (const name of [...CONTROL, "gateway", "tls-ca"]) {
      expect(services[name].image, name).toBe(`octoprox:${await packageVersion()}`);
      expect(services[name].build).toEqual({
        context: "../..",
        dockerfile: "infra/docker/Dockerfile",
      });
    }
    const dockerfile = await readFile(join(DOCKER, "Dockerfile"), "utf8");
    expect(dockerfile).toContain("npm run build:gateway -- --bundle");
    expect(dockerfile).toMatch(/^WORKDIR \/opt\/octoprox$/m);
  });

  it("gives each control process settings its side takes, and publishes the api's port", () => {
    for (const name of CONTROL) {
      const env = services[name].environment!;
      expect(Object.keys(env).filter((key) => !SETTING_NAMES.includes(key)), name).toEqual([]);
      const settings = parseControlSettings(env);
      expect(settings.role).toBe(name);
      // The health check asks the port the process listens on.
      expect(services[name].healthcheck!.test.join(" ")).toContain(
        `127.0.0.1:${settings.apiPort}/ready`,
      );
      const db = new URL(settings.databaseUrl);
      const postgres = services.postgres.environment!;
      expect([db.hostname, db.username, db.password, db.pathname]).toEqual([
        "postgres",
        postgres.POSTGRES_USER,
        postgres.POSTGRES_PASSWORD,
        `/${postgres.POSTGRES_DB}`,
      ]);
      expect(new URL(settings.redisUrl).hostname).toBe("redis");
    }
    const api = parseControlSettings(services.api.environment!);
    expect(services.api.ports).toEqual([`${api.apiPort}:${api.apiPort}`]);
    expect(services.controller.ports).toBeUndefined();
    expect(services.worker.ports).toBeUndefined();
  });

  it("runs the gateway bundle with the gateway's permissions on the ports it publishes", () => {
    const gateway = services.gateway;
    const env = gateway.environment!;
    expect(Object.keys(env).filter((key) => !SETTING_NAMES.includes(key))).toEqual([]);
    const settings = parseGatewaySettings(env);
    // The gateway and the control plane share the Redis prefix and the internal secret.
    const control = parseControlSettings(services.api.environment!);
    expect([settings.redisUrl, settings.redisPrefix, settings.internalSecret]).toEqual([
      control.redisUrl,
      control.redisPrefix,
      control.internalSecret,
    ]);
    expect(gateway.ports).toEqual(
      [settings.proxyPort, settings.socksPort, settings.statusPort].map((port) =>
        `${port}:${port}`
      ),
    );
    expect(gateway.healthcheck!.test.join(" ")).toContain(
      `127.0.0.1:${settings.statusPort}/ready`,
    );
    expect(gateway.command).toEqual([
      "/opt/octoprox/node_modules/.bin/deno",
      "run",
      "--no-config",
      ...gatewayPermissions(
        [
          "/opt/octoprox/dist",
          "/etc/octoprox/tls",
          "/etc/octoprox/tls-key",
          "/opt/octoprox/node_modules",
        ],
        ["/opt/octoprox/node_modules"],
      ),
      "/opt/octoprox/dist/octoprox-gateway.js",
    ]);
  });

  it("makes the TLS interception CA once in its volumes, its key the gateway's alone", async () => {
    const ca = services["tls-ca"];
    expect(ca.command).toEqual(["node_modules/.bin/tsx", "scripts/ca.ts", "create"]);
    const scripts = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")).scripts;
    expect(scripts["ca:create"]).toBe("tsx scripts/ca.ts create");
    expect(ca.depends_on).toBeUndefined();
    /** The volume holding `path` in `service` (the longest mount above it), and how. */
    const mountOf = (service: Service, path: string) =>
      (service.volumes ?? []).map((volume) => volume.split(":"))
        .filter(([, target]) => path.startsWith(`${target}/`))
        .sort((a, b) => b[1].length - a[1].length)[0];
    const settings = parseGatewaySettings(services.gateway.environment!);
    const [cert, key] = [settings.tlsMitmCaCertPath!, settings.tlsMitmCaKeyPath!];
    // tls-ca writes both where the gateway reads them, and the api reads the same certificate.
    expect(CA_SETTINGS.map((name) => ca.environment![name])).toEqual([cert, key]);
    expect(parseControlSettings(services.api.environment!).tlsMitmCaCertPath).toBe(cert);
    expect(mountOf(ca, cert)).toEqual(["mitm-ca", "/etc/octoprox/tls"]);
    expect(mountOf(ca, key)).toEqual(["mitm-ca-key", "/etc/octoprox/tls-key"]);
    expect(mountOf(services.gateway, cert)).toEqual(["mitm-ca", "/etc/octoprox/tls", "ro"]);
    expect(mountOf(services.gateway, key)).toEqual(["mitm-ca-key", "/etc/octoprox/tls-key", "ro"]);
    expect(mountOf(services.api, cert)).toEqual(["mitm-ca", "/etc/octoprox/tls", "ro"]);
    // The key is nowhere but the gateway and the service that makes it.
    for (const [name, service] of Object.entries(services)) {
      if (name === "gateway" || name === "tls-ca") continue;
      expect(service.volumes ?? [], name).not.toContainEqual(
        expect.stringMatching(/^mitm-ca-key:/),
      );
      expect(service.environment ?? {}, name).not.toHaveProperty("OCTOPROX_TLS_MITM_CA_KEY_PATH");
    }
    // The image makes the folders the volumes start from, owned by its user.
    const dockerfile = await readFile(join(DOCKER, "Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/install -d -o octoprox -g octoprox -m 0755 \/etc\/octoprox\/tls /);
    expect(dockerfile).toMatch(
      /install -d -o octoprox -g octoprox -m 0700 \/etc\/octoprox\/tls-key/,
    );
    // After a rotation, the settings it printed, set in .env, reach the api and the gateway,
    // naming files in the volumes they mount.
    const rotation = {
      OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH: "/etc/octoprox/tls/mitm-ca.previous.pem",
      OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH: "/etc/octoprox/tls-key/mitm-ca-key.previous.pem",
      OCTOPROX_TLS_MITM_CA_OVERLAP_UNTIL: "2027-01-04T00:00:00Z",
    };
    expect(Object.keys(dotenv)).toEqual(expect.arrayContaining(Object.keys(rotation)));
    const after = (interpolate(await composeFile(), { ...dotenv, ...rotation }) as {
      services: typeof services;
    }).services;
    const rotatedGateway = parseGatewaySettings(after.gateway.environment!);
    expect(rotatedGateway.tlsMitmCaOverlapUntilMs).toBe(Date.UTC(2027, 0, 4));
    expect(mountOf(after.gateway, rotatedGateway.tlsMitmCaPreviousCertPath!)?.[0]).toBe("mitm-ca");
    expect(mountOf(after.gateway, rotatedGateway.tlsMitmCaPreviousKeyPath!)?.[0]).toBe(
      "mitm-ca-key",
    );
    const rotatedApi = parseControlSettings(after.api.environment!);
    expect(rotatedApi.tlsMitmCaPreviousCertPath).toBe(
      rotation.OCTOPROX_TLS_MITM_CA_PREVIOUS_CERT_PATH,
    );
    expect(mountOf(after.api, rotatedApi.tlsMitmCaPreviousCertPath!)?.[0]).toBe("mitm-ca");
    expect(after.api.environment).not.toHaveProperty("OCTOPROX_TLS_MITM_CA_PREVIOUS_KEY_PATH");
    const file = parse(await readFile(join(DOCKER, "compose.yaml"), "utf8")) as {
      volumes: Record<string, unknown>;
    };
    expect(Object.keys(file.volumes).sort()).toEqual([
      "mitm-ca",
      "mitm-ca-key",
      "postgres",
      "redis",
    ]);
  });
});

async function composeFile(): Promise<unknown> {
  return parse(await readFile(join(DOCKER, "compose.yaml"), "utf8"), { merge: true });
}

async function packageVersion(): Promise<string> {
  return (JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { version: string })
    .version;
}
