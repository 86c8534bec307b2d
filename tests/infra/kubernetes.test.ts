/**
 * The manifests in infra/kubernetes/, loaded with the `yaml` package (no schema checker runs
 * offline here: kubectl validates against a cluster's API server), and checked for the fields
 * the probes, ports and settings depend on:
 *
 * - kustomization.yaml lists every manifest, and every object is namespaced alike;
 * - each Deployment's selector matches its template's labels; the controller has 2 replicas;
 * - each container's environment (the ConfigMap, its own env, the Secret's keys) is taken by its
 *   side's settings, names only real settings and keys that exist, and its container ports are
 *   the ports those settings listen on;
 * - probes ask paths the process serves, on ports the container declares;
 * - each Service selects a Deployment's pods, and its targetPort is one of their ports;
 * - resources have requests and limits; the image is octoprox at the package's version;
 * - the TLS interception CA: the gateways mount the operator's Secret whole (read-only, readable
 *   by their user, within what they may read) where their CA settings point, the api its
 *   certificate alone; no manifest holds the Secret (it would ship a key).
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { gatewayPermissions } from "../../scripts/gateway-command.ts";
import {
  parseControlSettings,
  parseGatewaySettings,
  SETTING_NAMES,
} from "../../shared/settings.ts";
import { ROOT } from "../../testkit/processes.ts";

const FOLDER = join(ROOT, "infra", "kubernetes");

// deno-lint-ignore no-explicit-any -- manifests are read freely; a wrong field fails a check.
type Manifest = Record<string, any>;
interface Port {
  name: string;
  containerPort: number;
}
interface Probe {
  httpGet: { path: string; port: string | number };
}

let manifests: Manifest[];
let files: string[];

const ofKind = (kind: string) => manifests.filter((m) => m.kind === kind);
const named = (kind: string, name: string) =>
  manifests.find((m) => m.kind === kind && m.metadata.name === name);
const deployment = (name: string) => named("Deployment", `octoprox-${name}`)!;
const container = (name: string) => deployment(name).spec.template.spec.containers[0];

/** What a container's process sees: the ConfigMaps and Secrets it names, then its own env. */
function containerEnv(spec: Manifest): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of spec.envFrom ?? []) {
    const source = from.configMapRef
      ? named("ConfigMap", from.configMapRef.name)
      : named("Secret", from.secretRef.name);
    if (!source) throw new Error(`envFrom names ${JSON.stringify(from)}, which is not here`);
    Object.assign(env, source.data ?? source.stringData);
  }
  for (const variable of spec.env ?? []) {
    const ref = variable.valueFrom?.secretKeyRef ?? variable.valueFrom?.configMapKeyRef;
    if (variable.valueFrom?.fieldRef) env[variable.name] = "pod-name";
    else if (ref) {
      const kind = variable.valueFrom.secretKeyRef ? "Secret" : "ConfigMap";
      const source = named(kind, ref.name);
      if (!source) throw new Error(`${variable.name} names the ${kind} ${ref.name}, not here`);
      const value = (source.data ?? source.stringData)[ref.key];
      if (value === undefined) {
        throw new Error(`${variable.name}: no key ${ref.key} in ${ref.name}`);
      }
      env[variable.name] = value;
    } else env[variable.name] = variable.value;
  }
  // The Secret's placeholders are too short on purpose: filled in as an operator would.
  if (env.OCTOPROX_INTERNAL_SECRET === "CHANGE-ME") env.OCTOPROX_INTERNAL_SECRET = "i".repeat(64);
  if (env.OCTOPROX_JWT_SECRET === "CHANGE-ME") env.OCTOPROX_JWT_SECRET = "j".repeat(64);
  return env;
}

function portOf(spec: Manifest, port: string | number): number | undefined {
  const ports = spec.ports as Port[];
  return typeof port === "number"
    ? ports.find((p) => p.containerPort === port)?.containerPort
    : ports.find((p) => p.name === port)?.containerPort;
}

beforeAll(async () => {
  files = (await readdir(FOLDER)).filter((name) => name.endsWith(".yaml")).sort();
  manifests = [];
  for (const file of files.filter((name) => name !== "kustomization.yaml")) {
    for (const document of parseAllDocuments(await readFile(join(FOLDER, file), "utf8"))) {
      if (document.errors.length > 0) throw new Error(`${file}: ${document.errors[0].message}`);
      manifests.push({ ...document.toJS(), file });
    }
  }
});

describe("infra/kubernetes", () => {
  it("lists every manifest in kustomization.yaml, all in one namespace", async () => {
    const kustomization = parseYaml(await readFile(join(FOLDER, "kustomization.yaml"), "utf8"));
    expect([...kustomization.resources].sort()).toEqual(
      files.filter((name) => name !== "kustomization.yaml"),
    );
    for (const manifest of manifests) {
      expect(manifest.apiVersion, manifest.file).toBeTruthy();
      if (manifest.kind !== "Namespace") {
        expect(manifest.metadata.namespace, manifest.metadata.name).toBe(kustomization.namespace);
      }
    }
    expect(kustomization.images).toEqual([
      { name: "octoprox", newName: "octoprox", newTag: await packageVersion() },
    ]);
  });

  it("has the four Deployments, selecting their own pods, the controller twice", () => {
    expect(ofKind("Deployment").map((d) => d.metadata.name).sort()).toEqual([
      "octoprox-api",
      "octoprox-controller",
      "octoprox-gateway",
      "octoprox-worker",
    ]);
    for (const d of ofKind("Deployment")) {
      expect(d.spec.template.metadata.labels, d.metadata.name).toMatchObject(
        d.spec.selector.matchLabels,
      );
      expect(d.spec.replicas, d.metadata.name).toBeGreaterThanOrEqual(1);
    }
    expect(deployment("controller").spec.replicas).toBe(2);
  });

  it("gives every container requests, limits and the package's image", async () => {
    for (const d of ofKind("Deployment")) {
      for (const spec of d.spec.template.spec.containers) {
        expect(spec.image).toBe(`octoprox:${await packageVersion()}`);
        for (const bound of ["requests", "limits"]) {
          expect(Object.keys(spec.resources[bound]).sort(), d.metadata.name).toEqual([
            "cpu",
            "memory",
          ]);
        }
      }
    }
  });

  it("names only real settings and Secret keys that exist", () => {
    for (const map of [...ofKind("ConfigMap"), ...ofKind("Secret")]) {
      const keys = Object.keys(map.data ?? map.stringData);
      expect(keys.filter((key) => !SETTING_NAMES.includes(key)), map.metadata.name).toEqual([]);
    }
    for (const d of ofKind("Deployment")) {
      const spec = d.spec.template.spec.containers[0];
      const names = (spec.env as { name: string }[]).map((variable) => variable.name);
      expect(names.filter((name) => !SETTING_NAMES.includes(name)), d.metadata.name).toEqual([]);
      containerEnv(spec); // throws on a missing ConfigMap, Secret or key
    }
  });

  for (const role of ["api", "controller", "worker"]) {
    it(`runs the ${role} role, probed on the port its settings listen on`, async () => {
      const spec = container(role);
      const settings = parseControlSettings(containerEnv(spec));
      expect(settings.role).toBe(role);
      expect(spec.ports).toEqual([{ name: "http", containerPort: settings.apiPort }]);
      const probes = await readFile(join(ROOT, "control", "api", "probes.ts"), "utf8");
      const asked: [string, Probe][] = [
        ["readinessProbe", spec.readinessProbe],
        ["livenessProbe", spec.livenessProbe],
        ["startupProbe", spec.startupProbe],
      ];
      for (const [kind, probe] of asked) {
        expect(portOf(spec, probe.httpGet.port), kind).toBe(settings.apiPort);
        expect(probes, kind).toContain(`app.get("${probe.httpGet.path}"`);
      }
      expect([spec.readinessProbe.httpGet.path, spec.livenessProbe.httpGet.path]).toEqual([
        "/ready",
        "/live",
      ]);
    });
  }

  it("runs the gateway bundle, its ports and probes those of its settings", async () => {
    const spec = container("gateway");
    const settings = parseGatewaySettings(containerEnv(spec));
    expect(spec.ports).toEqual([
      { name: "proxy", containerPort: settings.proxyPort },
      { name: "socks", containerPort: settings.socksPort },
      { name: "status", containerPort: settings.statusPort },
    ]);
    expect(settings.host).toBe("0.0.0.0");
    const status = await readFile(join(ROOT, "gateway", "app", "status.ts"), "utf8");
    for (const [probe, path] of [[spec.readinessProbe, "/ready"], [spec.livenessProbe, "/live"]]) {
      expect(probe.httpGet.path).toBe(path);
      expect(portOf(spec, probe.httpGet.port)).toBe(settings.statusPort);
      expect(status).toContain(`case "${path}":`);
    }
    expect(spec.command).toEqual([
      "/opt/octoprox/node_modules/.bin/deno",
      "run",
      "--no-config",
      ...gatewayPermissions(
        ["/opt/octoprox/dist", "/etc/octoprox/tls", "/opt/octoprox/node_modules"],
        ["/opt/octoprox/node_modules"],
      ),
      "/opt/octoprox/dist/octoprox-gateway.js",
    ]);
    // The gateway and the control plane read the same Redis, prefix and internal secret.
    const control = parseControlSettings(containerEnv(container("api")));
    expect([settings.redisUrl, settings.redisPrefix, settings.internalSecret]).toEqual([
      control.redisUrl,
      control.redisPrefix,
      control.internalSecret,
    ]);
  });

  it("mounts the CA's Secret: whole for the gateways, its certificate alone for the api", () => {
    const SECRET = "octoprox-tls-mitm-ca";
    /** The Secret volume a path lies in for `role`'s container, with the keys it shows there. */
    const mounted = (role: string, path: string) => {
      const pod = deployment(role).spec.template.spec;
      const mount = (container(role).volumeMounts ?? []).find((m: Manifest) =>
        path.startsWith(`${m.mountPath}/`)
      );
      if (!mount) return undefined;
      expect(mount.readOnly, role).toBe(true);
      const volume = pod.volumes.find((v: Manifest) => v.name === mount.name);
      const file = path.slice(mount.mountPath.length + 1);
      const items = volume.secret.items as { key: string; path: string }[] | undefined;
      const key = items ? items.find((item) => item.path === file)?.key : file;
      return { secret: volume.secret.secretName, key, mode: volume.secret.defaultMode };
    };
    const gateway = parseGatewaySettings(containerEnv(container("gateway")));
    expect(mounted("gateway", gateway.tlsMitmCaCertPath!)).toEqual({
      secret: SECRET,
      key: "mitm-ca.pem",
      mode: 0o440,
    });
    expect(mounted("gateway", gateway.tlsMitmCaKeyPath!)).toEqual({
      secret: SECRET,
      key: "mitm-ca-key.pem",
      mode: 0o440,
    });
    // Group-readable files, the pod's user in that group.
    expect(deployment("gateway").spec.template.spec.securityContext).toMatchObject({
      runAsUser: 10001,
      fsGroup: 10001,
    });
    // Within what the gateway may read (its command's --allow-read).
    const readable = container("gateway").command.find((arg: string) =>
      arg.startsWith("--allow-read=")
    ).slice("--allow-read=".length).split(",");
    for (const path of [gateway.tlsMitmCaCertPath!, gateway.tlsMitmCaKeyPath!]) {
      expect(readable.some((folder: string) => path.startsWith(`${folder}/`)), path).toBe(true);
    }
    // The api: the same certificate, and only it.
    const api = parseControlSettings(containerEnv(container("api")));
    expect(api.tlsMitmCaCertPath).toBe(gateway.tlsMitmCaCertPath);
    expect(mounted("api", api.tlsMitmCaCertPath!)).toEqual({
      secret: SECRET,
      key: "mitm-ca.pem",
      mode: 0o444,
    });
    const apiVolume = deployment("api").spec.template.spec.volumes[0];
    expect(apiVolume.secret.items).toEqual([{ key: "mitm-ca.pem", path: "mitm-ca.pem" }]);
    expect(containerEnv(container("api"))).not.toHaveProperty("OCTOPROX_TLS_MITM_CA_KEY_PATH");
    for (const role of ["controller", "worker"]) {
      expect(deployment(role).spec.template.spec.volumes, role).toBeUndefined();
    }
    // The operator makes it (README.md); a manifest holding it would ship a key.
    expect(named("Secret", SECRET)).toBeUndefined();
  });

  it("has a Service per listener, each reaching a port of the pods it selects", () => {
    const listeners = ofKind("Service").map((service) => {
      const target = ofKind("Deployment").find((d) =>
        Object.entries(service.spec.selector).every(([key, value]) =>
          d.spec.template.metadata.labels[key] === value
        )
      );
      expect(target, service.metadata.name).toBeDefined();
      const spec = target!.spec.template.spec.containers[0];
      return service.spec.ports.map((port: { port: number; targetPort: string | number }) => {
        const containerPort = portOf(spec, port.targetPort);
        expect(containerPort, `${service.metadata.name} ${port.targetPort}`).toBeDefined();
        return `${service.metadata.name} ${port.port}->${containerPort}`;
      });
    }).flat().sort();
    expect(listeners).toEqual([
      "octoprox-api 8000->8000",
      "octoprox-gateway-proxy 8080->8080",
      "octoprox-gateway-socks 1080->1080",
      "octoprox-gateway-status 8081->8081",
    ]);
  });
});

async function packageVersion(): Promise<string> {
  return (JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { version: string })
    .version;
}
