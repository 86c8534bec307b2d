/**
 * The three test clouds side by side, for e2e files that judge the scale job on each: the EC2,
 * Compute Engine and Azure Resource Manager emulators (testkit/upstreams/*-emulator.ts), served
 * over HTTPS with the kit's test CA, the settings a cluster points its clients at them with,
 * and each cloud's credential and connector config as an admin would send them. Each cloud is
 * seen through one shape: its live instances, its call counts by operation, and its failure
 * switches.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CloudProvider } from "../control/model/cloud.ts";
import type { ApiAnswer, Cluster } from "./cluster.ts";
import { testCertificate } from "./certs.ts";
import { InstanceAddresses } from "./upstreams/cloud-boot.ts";
import {
  AWS_EMULATOR_IMAGE,
  type AwsEmulator,
  startAwsEmulator,
} from "./upstreams/aws-emulator.ts";
import { type AzureEmulator, startAzureEmulator } from "./upstreams/azure-emulator.ts";
import { type GcpEmulator, startGcpEmulator } from "./upstreams/gcp-emulator.ts";

export const CLOUDS: readonly CloudProvider[] = ["aws", "gcp", "azure"];

/** A live instance as any cloud shows it. */
export interface CloudView {
  name: string;
  /** pending (booting, or held by slowCreates) or running. */
  state: "pending" | "running";
  address: string | null;
  tags: Readonly<Record<string, string>>;
  /** The start-up script it booted with. */
  script: string;
}

export interface TestCloud {
  provider: CloudProvider;
  /** Where its instances' public addresses come from (a /16 of 127/8 of its own). */
  addressRange: string;
  /** The credential's config, as POST /credentials takes it. */
  credential: Record<string, unknown>;
  /** A connector config with `fields` over the defaults. */
  connectorConfig(fields?: Record<string, unknown>): Record<string, unknown>;
  /** Instances neither terminated nor being deleted. */
  instances(): CloudView[];
  /** Calls of one kind so far: listings, creates, terminations. */
  calls(operation: "list" | "create" | "terminate"): number;
  refuseCreates(on: boolean): void;
  slowCreates(on: boolean): void;
  failListings(on: boolean): void;
}

export interface TestClouds {
  clouds: Readonly<Record<CloudProvider, TestCloud>>;
  /** The settings pointing a cluster's api and workers at the emulators. */
  env: Record<string, string>;
  close(): Promise<void>;
}

const AWS_KEY = { accessKey: "AKIAOCTOPROXTEST0001", secretKey: "octoprox-test-secret-key" };
const GCP_PROJECT = "octoprox-test";
const AZURE = {
  subscriptionId: "11111111-2222-3333-4444-555555555555",
  tenantId: "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
  clientId: "99999999-8888-7777-6666-555555555555",
  clientSecret: "octoprox-test-client-secret",
  resourceGroup: "octoprox-rg",
  location: "westeurope",
  vnet: "octoprox-vnet",
  subnet: "proxies",
};
const SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOctoproxTestKeyOctoproxTestKeyOctoprox test";

const count = (calls: Readonly<Record<string, number>>, names: readonly string[]) =>
  names.reduce((sum, name) => sum + (calls[name] ?? 0), 0);

function awsCloud(emulator: AwsEmulator, addressRange: string): TestCloud {
  return {
    provider: "aws",
    addressRange,
    credential: { access_key: AWS_KEY.accessKey, secret_key: AWS_KEY.secretKey },
    connectorConfig: (fields = {}) => ({
      instance_name: "ox-aws",
      region: "eu-west-1",
      instance_type: "t3.micro",
      ami_id: AWS_EMULATOR_IMAGE,
      ...fields,
    }),
    instances: () =>
      emulator.instances()
        .filter((i) => i.state === "pending" || i.state === "running")
        .map((i) => ({
          name: i.name,
          state: i.state as "pending" | "running",
          address: i.address,
          tags: i.tags,
          script: i.userData,
        })),
    calls: (operation) =>
      count(emulator.calls, [
        { list: "DescribeInstances", create: "RunInstances", terminate: "TerminateInstances" }[
          operation
        ],
      ]),
    refuseCreates: (on) => emulator.refuseCreates(on ? undefined : false),
    slowCreates: (on) => emulator.slowCreates(on),
    failListings: (on) => emulator.failListings(on),
  };
}

function gcpCloud(emulator: GcpEmulator, addressRange: string): TestCloud {
  return {
    provider: "gcp",
    addressRange,
    credential: {
      service_account_json: emulator.serviceAccount(GCP_PROJECT),
      project_id: GCP_PROJECT,
    },
    connectorConfig: (fields = {}) => ({
      instance_name: "ox-gcp",
      zone: "europe-west1-b",
      machine_type: "e2-micro",
      ...fields,
    }),
    instances: () =>
      emulator.instances()
        .filter((i) => ["PROVISIONING", "STAGING", "RUNNING"].includes(i.status))
        .map((i) => ({
          name: i.name,
          state: i.status === "RUNNING" ? "running" : "pending",
          address: i.address,
          tags: i.labels,
          script: i.metadata["startup-script"] ?? "",
        })),
    calls: (operation) =>
      count(emulator.calls, [
        { list: "instances.list", create: "instances.insert", terminate: "instances.delete" }[
          operation
        ],
      ]),
    refuseCreates: (on) => emulator.refuseCreates(on ? undefined : false),
    slowCreates: (on) => emulator.slowCreates(on),
    failListings: (on) => emulator.failListings(on),
  };
}

function azureCloud(emulator: AzureEmulator, addressRange: string): TestCloud {
  return {
    provider: "azure",
    addressRange,
    credential: {
      subscription_id: AZURE.subscriptionId,
      tenant_id: AZURE.tenantId,
      client_id: AZURE.clientId,
      client_secret: AZURE.clientSecret,
    },
    connectorConfig: (fields = {}) => ({
      instance_name: "ox-azure",
      resource_group: AZURE.resourceGroup,
      location: AZURE.location,
      vm_size: "Standard_B1s",
      vnet_name: AZURE.vnet,
      subnet_name: AZURE.subnet,
      ssh_public_key: SSH_KEY,
      ...fields,
    }),
    instances: () =>
      emulator.instances()
        .filter((i) => i.provisioningState === "Creating" || i.provisioningState === "Succeeded")
        .map((i) => ({
          name: i.name,
          state: i.provisioningState === "Succeeded" ? "running" : "pending",
          address: i.address,
          tags: i.tags,
          script: i.customData ?? "",
        })),
    calls: (operation) =>
      count(emulator.calls, [
        {
          list: "LIST virtualMachines",
          create: "PUT virtualMachines",
          terminate: "DELETE virtualMachines",
        }[
          operation
        ],
      ]),
    refuseCreates: (on) => emulator.refuseCreates(on ? undefined : null),
    slowCreates: (on) => emulator.slowCreates(on),
    failListings: (on) => emulator.failListings(on),
  };
}

export async function startTestClouds(): Promise<TestClouds> {
  // Three /16s in a row, drawn at random so parallel files rarely share one.
  const base = 100 + Math.floor(Math.random() * 150);
  const range = (i: number) => `127.${base + i}.0.0/16`;
  const [aws, gcp, azure] = await Promise.all([
    startAwsEmulator({ keys: [AWS_KEY], tls: true, addresses: new InstanceAddresses(base) }),
    startGcpEmulator({
      accounts: [GCP_PROJECT],
      tls: true,
      addresses: new InstanceAddresses(base + 1),
    }),
    startAzureEmulator({
      addresses: new InstanceAddresses(base + 2),
      subscriptionId: AZURE.subscriptionId,
      principals: [{
        tenantId: AZURE.tenantId,
        clientId: AZURE.clientId,
        clientSecret: AZURE.clientSecret,
      }],
      resourceGroups: [{
        name: AZURE.resourceGroup,
        location: AZURE.location,
        virtualNetworks: { [AZURE.vnet]: [AZURE.subnet] },
      }],
      vmSizes: { [AZURE.location]: ["Standard_B1s", "Standard_B2s"] },
    }),
  ]);
  const dir = await mkdtemp(join(tmpdir(), "ox-clouds-"));
  const caFile = join(dir, "ca.pem");
  await writeFile(caFile, (await testCertificate()).ca);
  let closing: Promise<void> | undefined;
  return {
    clouds: {
      aws: awsCloud(aws, range(0)),
      gcp: gcpCloud(gcp, range(1)),
      azure: azureCloud(azure, range(2)),
    },
    env: {
      OCTOPROX_AWS_ENDPOINT: aws.url,
      OCTOPROX_GCP_ENDPOINT: gcp.url,
      OCTOPROX_GCP_TOKEN_URL: gcp.tokenUrl,
      OCTOPROX_AZURE_ENDPOINT: azure.url,
      OCTOPROX_AZURE_AUTHORITY: azure.authority,
      OCTOPROX_EGRESS_CA_FILE: caFile,
    },
    close() {
      closing ??= (async () => {
        await Promise.allSettled([aws.close(), gcp.close(), azure.close()]);
        await rm(dir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
}

/**
 * A credential for the test cloud and a cloud connector of `provider` on it, in the project, as
 * an admin makes them through the API (named after the provider): both answers.
 */
export async function postCloudConnector(
  cluster: Pick<Cluster, "request">,
  projectId: string,
  provider: CloudProvider,
  cloud: TestCloud,
  config: Record<string, unknown>,
): Promise<{ credential: ApiAnswer; connector: ApiAnswer }> {
  const credential = await cluster.request("POST", `/api/v1/projects/${projectId}/credentials`, {
    name: provider,
    provider,
    config: cloud.credential,
  });
  const connector = await cluster.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    name: provider,
    kind: "cloud",
    provider,
    credential_id: credential.body.id,
    config: cloud.connectorConfig(config),
  });
  return { credential, connector };
}
