/**
 * What the provider e2e files share on top of the cluster (testkit/cluster.ts): a project,
 * a vendor credential and a vendor connector made through the API as an admin would, the rows a
 * connector holds as the API lists them, a custom descriptor saved with its hosts confirmed, the
 * test CA written where OCTOPROX_EGRESS_CA_FILE can name it, and a sync asked for now.
 */
import { randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect } from "vitest";
import { oxylabs } from "../shared/vendors/builtin/oxylabs.ts";
import type { DescriptorInput } from "../shared/vendors/descriptor.ts";
import { JobKind } from "../shared/roles.ts";
import type { Cluster } from "./cluster.ts";
import type { Credentials } from "./clients/proxy-client.ts";

export interface VendorProject {
  projectId: string;
  /** The project's proxy login (its username takes `-cc-` and `-sessid-` options). */
  credentials: Credentials;
}

/** A project with a password of the test's choosing, strategy round_robin. */
export async function createProject(cluster: Cluster): Promise<VendorProject> {
  const name = `pv${randomBytes(4).toString("hex")}`;
  const credentials = { username: name, password: `pw-${randomBytes(8).toString("hex")}` };
  const answer = await cluster.request("POST", "/api/v1/projects", {
    name,
    username: credentials.username,
    password: credentials.password,
    strategy: "round_robin",
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return { projectId: answer.body.id as string, credentials };
}

/** A credential of `provider` in the project; answers its id. */
export async function createCredential(
  cluster: Cluster,
  projectId: string,
  provider: string,
  config: Record<string, unknown>,
): Promise<string> {
  const answer = await cluster.request("POST", `/api/v1/projects/${projectId}/credentials`, {
    name: `cred-${randomBytes(3).toString("hex")}`,
    provider,
    config,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id as string;
}

/** A vendor connector of `provider` on the credential; answers its id. */
export async function createVendorConnector(
  cluster: Cluster,
  projectId: string,
  fields: {
    provider: string;
    credentialId: string;
    config?: Record<string, unknown>;
    countries?: string[];
    name?: string;
  },
): Promise<string> {
  const answer = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    name: fields.name ?? `vendor-${randomBytes(3).toString("hex")}`,
    kind: "vendor",
    provider: fields.provider,
    credential_id: fields.credentialId,
    config: fields.config ?? {},
    countries: fields.countries ?? [],
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.id as string;
}

/** A proxy row as GET /api/v1/projects/:id/proxies answers it. */
export interface ListedProxy {
  id: string;
  host: string;
  port: number;
  username: string | null;
  has_password: boolean;
  country: string | null;
  status: string;
  metadata: Record<string, unknown>;
  url: string;
}

/** The connector's rows, as the API lists them (one page of up to 100). */
export async function connectorRows(
  cluster: Cluster,
  projectId: string,
  connectorId: string,
): Promise<ListedProxy[]> {
  const answer = await cluster.request(
    "GET",
    `/api/v1/projects/${projectId}/proxies?connector_id=${connectorId}&page_size=100`,
  );
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.items as ListedProxy[];
}

/** Waits until the connector's rows, as the API lists them, pass `accept`; answers them. */
export function untilRows(
  cluster: Cluster,
  project: string,
  connectorId: string,
  accept: (rows: ListedProxy[]) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<ListedProxy[]> {
  return cluster.until(async () => {
    const rows = await connectorRows(cluster, project, connectorId);
    return accept(rows) ? rows : undefined;
  }, { timeoutMs, intervalMs: 50, message: what });
}

/**
 * Saves a custom descriptor as an admin, confirming `hosts` (its calls' hosts); answers the
 * catalogue entry.
 */
export async function saveDescriptor(
  cluster: Cluster,
  descriptor: unknown,
  hosts: string[] = ["127.0.0.1"],
): Promise<Record<string, unknown>> {
  const answer = await cluster.request("POST", "/api/v1/providers", {
    descriptor,
    confirm_hosts: hosts,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body;
}

/** Writes the test CA's PEM into `folder`; answers the path for OCTOPROX_EGRESS_CA_FILE. */
export async function writeCaFile(folder: string, ca: string): Promise<string> {
  const path = join(folder, "vendor-ca.pem");
  await writeFile(path, ca);
  return path;
}

/**
 * Asks for the connector's sync now, as the api does after an edit (its key on the sync
 * stream), and waits until a worker handled it: the entry read, acknowledged and deleted.
 */
export async function syncNow(cluster: Cluster, connectorId: string): Promise<void> {
  const stream = cluster.keys.jobStream(JobKind.sync);
  await cluster.redis.xadd(stream, "*", "key", connectorId);
  await cluster.until(
    async () =>
      (await cluster.redis.xlen(stream)) === 0 && (await cluster.pending(stream)).length === 0,
    { message: `the sync of ${connectorId} to run` },
  );
}

/**
 * The shipped Oxylabs descriptor as `id`, its residential type on the vendor emulator at
 * 127.0.0.1:`port` (the emulator speaks Oxylabs' grammar), so a test sends what a real Oxylabs
 * account would be sent.
 */
export function emulatedOxylabs(id: string, name: string, port: number): DescriptorInput {
  const residential = oxylabs.proxy_types.find((t) => t.id === "residential")!;
  return { ...oxylabs, id, name, proxy_types: [{ ...residential, host: "127.0.0.1", port }] };
}
