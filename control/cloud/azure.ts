/**
 * Azure: the CloudClient over Resource Manager with the real SDKs (@azure/arm-compute,
 * @azure/arm-network, @azure/arm-resources) and a service principal's secret (@azure/identity).
 *
 * An instance is a VM with its own public IP (`<name>-pip`), NIC (`<name>-nic`) and OS disk
 * (`<name>-osdisk`), the NIC, IP and disk each made with the delete option `Delete`, so deleting
 * the VM is the one call a termination makes and leaves nothing billed behind. The VM carries the
 * connector's tags and CONNECTOR_TAG, which the one listing call (the resource group's VMs)
 * filters on; the start-up script goes in its custom data, which ARM never returns.
 *
 * Every SDK failure leaves as a CloudCallError: the message holds ARM's or Entra's code and text,
 * never the client secret or the custom data. A caller's own abort rejects with its signal's
 * reason, as withDeadline does.
 */
import type * as ComputeSdk from "@azure/arm-compute";
import type {
  ComputeManagementClient,
  ComputeManagementClientOptionalParams,
  VirtualMachine,
} from "@azure/arm-compute";
import type * as NetworkSdk from "@azure/arm-network";
import type { NetworkManagementClient } from "@azure/arm-network";
import type * as ResourcesSdk from "@azure/arm-resources";
import type { ResourceManagementClient } from "@azure/arm-resources";
import type * as IdentitySdk from "@azure/identity";
import type { ClientSecretCredential } from "@azure/identity";
import { withDeadline } from "../../shared/async/deadline.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { CloudCallError, type CloudFailure, DeadlineError } from "../../shared/errors.ts";
import type { AzureConnector, AzureCredential } from "../model/cloud.ts";
import {
  type CloudClient,
  type CloudClientOptions,
  type CloudInstance,
  type CloudLaunch,
  CONNECTOR_TAG,
} from "./contract.ts";
import { cloudIdOf, rowInstanceId } from "./naming.ts";

const PROVIDER = "azure";
const DEFAULT_ARM_ENDPOINT = "https://management.azure.com";
/** The image every instance boots: Ubuntu 24.04 LTS, its latest build. */
const IMAGE = {
  publisher: "Canonical",
  offer: "ubuntu-24_04-lts",
  sku: "server",
  version: "latest",
} as const;
/** The VM's admin: SSH key only (the connector's public key), no password. */
const ADMIN_USER = "octoprox";
/** An error message is shown at a field: ARM's own can run long. */
const MAX_MESSAGE_CHARS = 400;

/** Entra's codes (AADSTS<n>) that say which credential field it refused. */
const AUTH_FIELDS: Readonly<Record<string, string>> = {
  "7000215": "client_secret",
  "7000222": "client_secret",
  "7000216": "client_secret",
  "700016": "client_id",
  "700023": "client_id",
  "90002": "tenant_id",
  "900023": "tenant_id",
  "90072": "tenant_id",
};

/** ARM error codes that name the connector field at fault. */
const REFUSED_FIELDS: Readonly<Record<string, string>> = {
  ResourceGroupNotFound: "resource_group",
  SubscriptionNotFound: "subscription_id",
  InvalidSubscriptionId: "subscription_id",
  SkuNotAvailable: "vm_size",
  InvalidVmSize: "vm_size",
  VMSizeNotSupported: "vm_size",
  AllocationFailed: "vm_size",
  ZonalAllocationFailed: "vm_size",
  LocationNotAvailableForResourceType: "location",
  NoRegisteredProviderFound: "location",
  InvalidLocation: "location",
  LocationRequired: "location",
  DisallowedLocation: "location",
};

/** Where an InvalidParameter's `target` (or a reference's text) names a field. */
const TARGET_FIELDS: readonly (readonly [RegExp, string])[] = [
  [/vmSize/i, "vm_size"],
  [/keyData|publicKeys|ssh/i, "ssh_public_key"],
  [/\/subnets\/|\bsubnet/i, "subnet_name"],
  [/\/virtualNetworks\/|virtualNetwork/i, "vnet_name"],
  [/^location$/i, "location"],
  [/computerName|vmName/i, "instance_name"],
];

/** Operation error codes that are Azure's own trouble, not the request's. */
const UNAVAILABLE_CODES: ReadonlySet<string> = new Set([
  "InternalServerError",
  "InternalExecutionError",
  "InternalOperationError",
  "ServiceUnavailable",
  "GatewayTimeout",
  "RetryableError",
]);

/** Provisioning states of a VM that is not (or no longer) an instance. */
const GONE_STATES: ReadonlySet<string> = new Set(["Failed", "Canceled", "Deleting"]);

const THROTTLED_CODES: ReadonlySet<string> = new Set(["TooManyRequests", "OperationThrottled"]);

/**
 * The connector fields the client reads. AzureConnector, as valibot infers it through the model's
 * cross-field checks (`ranges`), keeps only the fields every cloud shares: these are named here.
 */
interface AzurePlacement {
  subscription_id: string | null;
  resource_group: string;
  location: string;
  vm_size: string;
  vnet_name: string;
  subnet_name: string;
  ssh_public_key: string;
}

type Policy = NonNullable<ComputeManagementClientOptionalParams["additionalPolicies"]>[number];

/** What Entra last answered when it refused (or could not be reached), per client. */
interface AuthorityAnswer {
  status: number | undefined;
  /** Entra's error body, when it gave one. */
  body: { error?: string; error_description?: string; error_codes?: number[] } | undefined;
}

/** What a call's failure is read against. */
interface Mapping {
  /** A 404 on a GET is an operation (or its resource) the cloud no longer knows: `lost`. */
  polling?: boolean;
  /** The connector field a 400 or 404 of this call names (a VM size list: `location`). */
  refusedField?: string;
  /** Texts no message may hold besides the secret (the custom data, raw and encoded). */
  secrets?: readonly string[];
  /** What a deadline that passed means, for a run of calls ("no running VM"). */
  late?: string;
  /** The credential field a 401, 403 or 404 of this call names (a subscription read's). */
  authField?: string;
}

/** A service principal signed in: its token credential and what the ARM clients are made with. */
interface Session {
  options: CloudClientOptions;
  credential: ClientSecretCredential;
  scope: string;
  authority: { last: AuthorityAnswer | undefined };
  clientSecret: string;
  /** The options every ARM client of the session takes. */
  armOptions: ComputeManagementClientOptionalParams;
}

interface Azure extends Session {
  connector: AzurePlacement;
  subscriptionId: string;
  compute: ComputeManagementClient;
  network: NetworkManagementClient;
  resources: ResourceManagementClient;
}

export function azureClient(
  credential: AzureCredential,
  config: AzureConnector,
  options: CloudClientOptions & { authority: string | undefined },
): CloudClient {
  let azure: Azure | undefined;
  /** The signed-in clients, made at the first call. */
  const connected = async () =>
    azure ??= await connect(credential, config as AzureConnector & AzurePlacement, options);
  return {
    provider: PROVIDER,
    list: async (connectorId, signal) => listInstances(await connected(), connectorId, signal),
    create: async (launch, signal) => createInstance(await connected(), launch, signal),
    terminate: async (id, signal) => terminateInstance(await connected(), id, signal),
    verify: async (signal) => verifyAccess(await connected(), signal),
  };
}

// ---------------------------------------------------------------------------------------------
// The SDK clients.

interface AzureSdks {
  compute: typeof ComputeSdk;
  network: typeof NetworkSdk;
  resources: typeof ResourcesSdk;
  identity: typeof IdentitySdk;
}

/** The SDKs once a call loaded them, which any of their errors implies. */
let loadedSdks: AzureSdks | undefined;

/**
 * The SDKs, loaded at the first call rather than with the module: loading them costs about a
 * second of CPU, which every CLI command and control process would otherwise pay for a cloud it
 * may never call.
 */
async function azureSdks(): Promise<AzureSdks> {
  if (loadedSdks === undefined) {
    const [compute, network, resources, identity] = await Promise.all([
      import("@azure/arm-compute"),
      import("@azure/arm-network"),
      import("@azure/arm-resources"),
      import("@azure/identity"),
    ]);
    loadedSdks = { compute, network, resources, identity };
  }
  return loadedSdks;
}

function signIn(
  sdks: AzureSdks,
  credential: AzureCredential,
  options: CloudClientOptions & { authority: string | undefined },
): Session {
  const endpoint = (options.endpoint ?? DEFAULT_ARM_ENDPOINT).replace(/\/+$/, "");
  const scope = `${endpoint}/.default`;
  const authority = { last: undefined };
  const tokenCredential = new sdks.identity.ClientSecretCredential(
    credential.tenant_id,
    credential.client_id,
    credential.client_secret,
    {
      ...pipelineOptions(options),
      additionalPolicies: [callTimeout(options.callTimeoutMs), watchAuthority(authority)],
      ...(options.authority === undefined ? {} : {
        authorityHost: options.authority,
        // A custom authority is not one Microsoft's instance discovery knows: MSAL reads its
        // OpenID metadata instead.
        disableInstanceDiscovery: true,
      }),
    },
  );
  return {
    options,
    credential: tokenCredential,
    scope,
    authority,
    clientSecret: credential.client_secret,
    armOptions: {
      ...pipelineOptions(options),
      additionalPolicies: [callTimeout(options.callTimeoutMs)],
      endpoint,
      $host: endpoint,
      credentialScopes: [scope],
    },
  };
}

async function connect(
  credential: AzureCredential,
  connector: AzurePlacement,
  options: CloudClientOptions & { authority: string | undefined },
): Promise<Azure> {
  const sdks = await azureSdks();
  const session = signIn(sdks, credential, options);
  const subscriptionId = connector.subscription_id ?? credential.subscription_id;
  const { credential: tokenCredential, armOptions } = session;
  return {
    ...session,
    connector,
    subscriptionId,
    compute: new sdks.compute.ComputeManagementClient(tokenCredential, subscriptionId, armOptions),
    network: new sdks.network.NetworkManagementClient(tokenCredential, subscriptionId, armOptions),
    resources: new sdks.resources.ResourceManagementClient(
      tokenCredential,
      subscriptionId,
      armOptions,
    ),
  };
}

/** What the ARM clients and the credential share: no retries, and the CA when one is given. */
function pipelineOptions(options: CloudClientOptions) {
  return {
    // The scale job runs again soon and reads throttling and outages from the failure: the
    // SDK's own retries (seconds of back-off) would only hold its run.
    retryOptions: { maxRetries: 0 },
    // A CA given replaces the system's (OCTOPROX_EGRESS_CA_FILE: a TLS-inspecting egress).
    ...(options.ca === undefined ? {} : { tlsOptions: { ca: options.ca } }),
  };
}

/** Each HTTP request's own deadline: the SDK aborts it, and the failure says `timeout`. */
function callTimeout(timeoutMs: number): Policy {
  return {
    position: "perCall",
    policy: {
      name: "octoproxCallTimeout",
      sendRequest(request, next) {
        if (!(request.timeout > 0)) request.timeout = timeoutMs;
        return next(request);
      },
    },
  };
}

/**
 * Records Entra's refusals as it sent them. MSAL turns a refused metadata read (an unknown
 * tenant) into a bare "endpoints cannot be resolved", and a connection that failed into the same:
 * the answer itself tells them apart.
 */
function watchAuthority(record: { last: AuthorityAnswer | undefined }): Policy {
  return {
    position: "perCall",
    policy: {
      name: "octoproxAuthorityAnswers",
      async sendRequest(request, next) {
        let response;
        try {
          response = await next(request);
        } catch (error) {
          record.last = { status: undefined, body: undefined };
          throw error;
        }
        record.last = response.status < 400
          ? undefined
          : { status: response.status, body: entraBody(response.bodyAsText) };
        return response;
      },
    },
  };
}

function entraBody(text: string | null | undefined): AuthorityAnswer["body"] {
  try {
    const value: unknown = JSON.parse(text ?? "");
    return value !== null && typeof value === "object" ? value : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// The four calls.

async function listInstances(
  azure: Azure,
  connectorId: string,
  signal: AbortSignal,
): Promise<CloudInstance[]> {
  return await call(azure, "list", signal, {}, async (abortSignal) => {
    const found: CloudInstance[] = [];
    // One call: the resource group's VMs (more pages only when ARM links them).
    const vms = azure.compute.virtualMachines.list(azure.connector.resource_group, {
      abortSignal,
    });
    for await (const vm of vms) {
      const instance = listed(vm, connectorId);
      if (instance !== undefined) found.push(instance);
    }
    return found;
  });
}

/**
 * A listed VM as an instance, if it is the connector's and alive. The VM list has no power
 * state: every VM there counts, running once Succeeded and pending before (Creating, Updating,
 * or a state this client does not know), except one that failed or is going (Failed, Canceled,
 * Deleting), which never ran or will not run again.
 */
function listed(vm: VirtualMachine, connectorId: string): CloudInstance | undefined {
  if (vm.name === undefined || vm.tags?.[CONNECTOR_TAG] !== connectorId) return undefined;
  const provisioning = vm.provisioningState ?? "";
  if (GONE_STATES.has(provisioning)) return undefined;
  const state = provisioning === "Succeeded" ? "running" : "pending";
  return { name: vm.name, id: rowInstanceId(PROVIDER, vm.name), state, address: null };
}

async function createInstance(
  azure: Azure,
  launch: CloudLaunch,
  signal: AbortSignal,
): Promise<CloudInstance & { address: string }> {
  const customData = Buffer.from(launch.startupScript, "utf8").toString("base64");
  const mapping = {
    polling: true,
    secrets: [launch.startupScript, customData],
    late: "no running VM with a public address",
  };
  const resources = new Made();
  try {
    return await call(azure, "create", signal, mapping, async (abortSignal) => {
      const ip = await createPublicIp(azure, launch, resources, abortSignal);
      const nicId = await createNic(azure, launch, ip, resources, abortSignal);
      await createVm(azure, launch, nicId, customData, resources, abortSignal);
      const address = await publicAddress(azure, `${launch.name}-pip`, abortSignal);
      return {
        name: launch.name,
        id: rowInstanceId(PROVIDER, launch.name),
        state: "running",
        address,
      };
    }, azure.options.createTimeoutMs);
  } catch (error) {
    await cleanUp(azure, launch.name, resources);
    throw error;
  }
}

/** What a create made so far, for the clean-up of one that failed. */
class Made {
  publicIp = false;
  nic = false;
  /** The VM's PUT was accepted: it exists, and deleting it takes the rest with it. */
  vm = false;
  /** Its operation ended Failed: it never ran, and nothing lists it. */
  vmFailed = false;
}

/**
 * A create that failed leaves nothing behind that no listing shows: the NIC and IP of a VM that
 * was refused, or a VM whose operation failed (a Failed VM is not listed). A VM still creating
 * (a create that timed out) stays: the next listing shows it pending.
 */
async function cleanUp(azure: Azure, name: string, made: Made): Promise<void> {
  if (made.vm && !made.vmFailed) return;
  const signal = AbortSignal.timeout(azure.options.createTimeoutMs);
  const group = azure.connector.resource_group;
  const poll = { abortSignal: signal, updateIntervalInMs: azure.options.pollIntervalMs };
  try {
    if (made.vm) {
      await (await azure.compute.virtualMachines.beginDelete(group, name, poll)).pollUntilDone();
      return;
    }
    if (made.nic) {
      const nic = await azure.network.networkInterfaces.beginDelete(group, `${name}-nic`, poll);
      await nic.pollUntilDone();
    }
    if (made.publicIp) {
      const ip = await azure.network.publicIPAddresses.beginDelete(group, `${name}-pip`, poll);
      await ip.pollUntilDone();
    }
  } catch {
    // Best effort: the create's own failure is what the caller hears.
  }
}

async function createPublicIp(
  azure: Azure,
  launch: CloudLaunch,
  made: Made,
  abortSignal: AbortSignal,
): Promise<string> {
  made.publicIp = true;
  const poller = await azure.network.publicIPAddresses.beginCreateOrUpdate(
    azure.connector.resource_group,
    `${launch.name}-pip`,
    {
      location: azure.connector.location,
      tags: tagsOf(launch),
      sku: { name: "Standard", tier: "Regional" },
      publicIPAllocationMethod: "Static",
      publicIPAddressVersion: "IPv4",
    },
    { abortSignal, updateIntervalInMs: azure.options.pollIntervalMs },
  );
  const ip = await poller.pollUntilDone({ abortSignal });
  if (ip.id === undefined) throw new Error("ARM answered the public IP without its id");
  return ip.id;
}

async function createNic(
  azure: Azure,
  launch: CloudLaunch,
  publicIpId: string,
  made: Made,
  abortSignal: AbortSignal,
): Promise<string> {
  const { connector } = azure;
  const subnetId = `/subscriptions/${azure.subscriptionId}/resourceGroups/` +
    `${connector.resource_group}/providers/Microsoft.Network/virtualNetworks/` +
    `${connector.vnet_name}/subnets/${connector.subnet_name}`;
  made.nic = true;
  const poller = await azure.network.networkInterfaces.beginCreateOrUpdate(
    connector.resource_group,
    `${launch.name}-nic`,
    {
      location: connector.location,
      tags: tagsOf(launch),
      ipConfigurations: [{
        name: "ipconfig1",
        primary: true,
        subnet: { id: subnetId },
        privateIPAllocationMethod: "Dynamic",
        publicIPAddress: { id: publicIpId, deleteOption: "Delete" },
      }],
    },
    { abortSignal, updateIntervalInMs: azure.options.pollIntervalMs },
  );
  const nic = await poller.pollUntilDone({ abortSignal });
  if (nic.id === undefined) throw new Error("ARM answered the NIC without its id");
  return nic.id;
}

async function createVm(
  azure: Azure,
  launch: CloudLaunch,
  nicId: string,
  customData: string,
  made: Made,
  abortSignal: AbortSignal,
): Promise<void> {
  const { connector } = azure;
  let poller;
  try {
    poller = await azure.compute.virtualMachines.beginCreateOrUpdate(
      connector.resource_group,
      launch.name,
      vmParameters(connector, launch, nicId, customData),
      { abortSignal, updateIntervalInMs: azure.options.pollIntervalMs },
    );
  } catch (error) {
    // Only a refused PUT means no VM: past it, the VM exists whatever the first poll said.
    made.vm = !(isRestError(error) && error.request?.method === "PUT");
    if (made.vm && isOperationFailure(error)) made.vmFailed = true;
    throw error;
  }
  made.vm = true;
  try {
    await poller.pollUntilDone({ abortSignal });
  } catch (error) {
    if (isOperationFailure(error)) made.vmFailed = true;
    throw error;
  }
}

function vmParameters(
  connector: AzurePlacement,
  launch: CloudLaunch,
  nicId: string,
  customData: string,
): VirtualMachine {
  return {
    location: connector.location,
    tags: tagsOf(launch),
    hardwareProfile: { vmSize: connector.vm_size },
    storageProfile: {
      imageReference: { ...IMAGE },
      osDisk: {
        name: `${launch.name}-osdisk`,
        createOption: "FromImage",
        deleteOption: "Delete",
        managedDisk: { storageAccountType: "Standard_LRS" },
      },
    },
    osProfile: {
      computerName: launch.name,
      adminUsername: ADMIN_USER,
      customData,
      linuxConfiguration: {
        disablePasswordAuthentication: true,
        ssh: {
          publicKeys: [{
            path: `/home/${ADMIN_USER}/.ssh/authorized_keys`,
            keyData: connector.ssh_public_key,
          }],
        },
      },
    },
    networkProfile: { networkInterfaces: [{ id: nicId, primary: true, deleteOption: "Delete" }] },
  };
}

/** The connector's tags, then CONNECTOR_TAG: set last, so no tag of theirs replaces it. */
function tagsOf(launch: CloudLaunch): Record<string, string> {
  return { ...launch.tags, [CONNECTOR_TAG]: launch.connectorId };
}

/** The public IP's address: a static one has it once made; wait for it if not yet. */
async function publicAddress(
  azure: Azure,
  name: string,
  abortSignal: AbortSignal,
): Promise<string> {
  for (;;) {
    const ip = await azure.network.publicIPAddresses.get(
      azure.connector.resource_group,
      name,
      { abortSignal },
    );
    if (ip.ipAddress) return ip.ipAddress;
    await sleep(azure.options.pollIntervalMs, abortSignal);
  }
}

async function terminateInstance(azure: Azure, id: string, signal: AbortSignal): Promise<void> {
  const name = cloudIdOf(PROVIDER, id);
  if (name === undefined) {
    throw new CloudCallError(PROVIDER, "terminate", "refused", `not an Azure instance id: ${id}`);
  }
  const mapping = { polling: true, late: "the VM's delete did not finish" };
  await call(azure, "terminate", signal, mapping, async (abortSignal) => {
    try {
      // The NIC, IP and disk go with the VM (their delete options); a delete already under way
      // answers with its own operation, which this one then waits for.
      const poller = await azure.compute.virtualMachines.beginDelete(
        azure.connector.resource_group,
        name,
        { abortSignal, updateIntervalInMs: azure.options.pollIntervalMs },
      );
      await poller.pollUntilDone({ abortSignal });
    } catch (error) {
      // A VM (or resource group) that is not there is terminated.
      if (isRestError(error) && error.statusCode === 404 && error.request?.method === "DELETE") {
        return;
      }
      throw error;
    }
  }, azure.options.createTimeoutMs);
}

async function verifyAccess(azure: Azure, signal: AbortSignal): Promise<void> {
  const { connector } = azure;
  await call(azure, "verify", signal, {}, async (abortSignal) => {
    // CAE as the ARM clients ask for it: one MSAL app, one token, for both.
    await azure.credential.getToken(azure.scope, { abortSignal, enableCae: true });
  });
  await call(
    azure,
    "verify",
    signal,
    { refusedField: "resource_group" },
    (abortSignal) => azure.resources.resourceGroups.get(connector.resource_group, { abortSignal }),
  );
  const sizes = await call(
    azure,
    "verify",
    signal,
    { refusedField: "location" },
    async (abortSignal) => {
      const names: string[] = [];
      for await (
        const size of azure.compute.virtualMachineSizes.list(connector.location, { abortSignal })
      ) {
        if (size.name !== undefined) names.push(size.name.toLowerCase());
      }
      return names;
    },
  );
  if (!sizes.includes(connector.vm_size.toLowerCase())) {
    throw new CloudCallError(
      PROVIDER,
      "verify",
      "refused",
      `VM size ${connector.vm_size} is not offered in ${connector.location}`,
      { field: "vm_size" },
    );
  }
}

/** The api-version of a subscription read (Microsoft.Resources' subscriptions). */
const SUBSCRIPTIONS_API_VERSION = "2022-12-01";

/**
 * A credential checked on its own, with no connector: a token for Resource Manager proves the
 * tenant, the client id and the secret (Entra's refusal at the field its code names), and one
 * read of the credential's subscription (`GET /subscriptions/<id>`) proves the principal reaches
 * it (401, 403 or 404: `auth` at `subscription_id`). Throws CloudCallError.
 */
export async function verifyAzureCredential(
  credential: AzureCredential,
  options: CloudClientOptions & { authority: string | undefined },
  signal: AbortSignal,
): Promise<void> {
  const sdks = await azureSdks();
  const session = signIn(sdks, credential, options);
  await call(session, "verify", signal, {}, async (abortSignal) => {
    await session.credential.getToken(session.scope, { abortSignal, enableCae: true });
  });
  // @azure/arm-resources 7 has no subscriptions client (a package of its own): the subscription
  // is read as the resource its id names, one GET through the same pipeline.
  const resources = new sdks.resources.ResourceManagementClient(
    session.credential,
    credential.subscription_id,
    session.armOptions,
  );
  await call(
    session,
    "verify",
    signal,
    { authField: "subscription_id" },
    (abortSignal) =>
      resources.resources.getById(
        `subscriptions/${encodeURIComponent(credential.subscription_id)}`,
        SUBSCRIPTIONS_API_VERSION,
        { abortSignal },
      ),
  );
}

// ---------------------------------------------------------------------------------------------
// Calls and their failures.

/**
 * One call (or a create's or delete's run of them) under a deadline, its failure mapped to a
 * CloudCallError. Each HTTP request has the call deadline of its own besides (callTimeout).
 */
async function call<T>(
  azure: Session,
  operation: string,
  signal: AbortSignal,
  mapping: Mapping,
  send: (abortSignal: AbortSignal) => Promise<T>,
  timeoutMs = azure.options.callTimeoutMs,
): Promise<T> {
  try {
    return await withDeadline(`azure ${operation}`, timeoutMs, send, { signal });
  } catch (error) {
    if (signal.aborted && error === signal.reason) throw error;
    throw cloudError(azure, operation, error, mapping);
  }
}

interface RestErrorLike extends Error {
  statusCode?: number;
  code?: string;
  request?: { method?: string };
  response?: { parsedBody?: unknown; bodyAsText?: string | null };
}

function isRestError(error: unknown): error is RestErrorLike {
  return error instanceof Error && error.name === "RestError";
}

/** core-lro's error for an operation that ended Failed: "…has failed. <code>. <message>". */
const OPERATION_FAILURE = /^The long-running operation has failed(?:\. ([^.\s]+)\. ([\s\S]*))?$/;

function isOperationFailure(error: unknown): error is Error {
  return error instanceof Error && OPERATION_FAILURE.test(error.message);
}

function redacted(text: string, secrets: readonly string[]): string {
  let clean = text;
  for (const secret of secrets) {
    if (secret.length > 0) clean = clean.replaceAll(secret, "[redacted]");
  }
  return clean.length > MAX_MESSAGE_CHARS ? `${clean.slice(0, MAX_MESSAGE_CHARS)}…` : clean;
}

/** The CloudCallError an SDK failure is: by who refused (Entra, ARM), then status and code. */
function cloudError(
  azure: Session,
  operation: string,
  error: unknown,
  mapping: Mapping,
): CloudCallError {
  if (error instanceof CloudCallError) return error;
  const fail = (
    failure: CloudFailure,
    message: string,
    extra: { status?: number; cloudCode?: string; field?: string } = {},
  ) =>
    new CloudCallError(
      PROVIDER,
      operation,
      failure,
      redacted(message, [azure.clientSecret, ...(mapping.secrets ?? [])]),
      { ...extra, cause: error },
    );
  if (error instanceof DeadlineError) {
    return fail("timeout", `no answer within ${error.timeoutMs} ms`);
  }
  const identity = loadedSdks?.identity;
  if (
    identity !== undefined &&
    (error instanceof identity.AuthenticationError ||
      error instanceof identity.AuthenticationRequiredError ||
      error instanceof identity.AggregateAuthenticationError ||
      error instanceof identity.CredentialUnavailableError)
  ) {
    return authorityError(azure, error, fail);
  }
  if (isRestError(error)) return armError(error, mapping, fail);
  if (isOperationFailure(error)) return operationError(error, fail);
  const text = error instanceof Error ? error.message : String(error);
  // The request's own deadline (callTimeout) aborts it: the caller's abort was handled above.
  if (error instanceof Error && error.name === "AbortError") {
    return fail("timeout", `no answer: ${text}`);
  }
  return fail("unavailable", `no answer: ${text}`);
}

type Fail = (
  failure: CloudFailure,
  message: string,
  extra?: { status?: number; cloudCode?: string; field?: string },
) => CloudCallError;

/** Entra refused the credential, or could not be asked. */
function authorityError(azure: Session, error: Error, fail: Fail): CloudCallError {
  const answer = azure.authority.last;
  if (answer !== undefined && answer.status === undefined) {
    return fail("unavailable", `Entra ID did not answer: ${error.message}`);
  }
  const status = answer?.status;
  if (status === 429) return fail("throttled", `Entra ID: ${error.message}`, { status });
  if (status !== undefined && status >= 500) {
    return fail("unavailable", `Entra ID: ${error.message}`, { status });
  }
  const description = answer?.body?.error_description ?? error.message;
  const codes = [
    ...(answer?.body?.error_codes ?? []).map(String),
    ...[...description.matchAll(/AADSTS(\d+)/g)].map((match) => match[1]),
  ];
  const code = codes.find((candidate) => AUTH_FIELDS[candidate] !== undefined) ?? codes[0];
  const field = code === undefined ? "client_secret" : AUTH_FIELDS[code] ?? "client_secret";
  // Entra's description runs on with trace and correlation ids: its first sentence says it.
  const text = description.replace(/\s*Trace ID:[\s\S]*$/, "");
  return fail("auth", `Entra ID refused the credential: ${text}`, {
    status,
    cloudCode: code === undefined ? answer?.body?.error : `AADSTS${code}`,
    field,
  });
}

/** ARM answered with an error status, or no answer came back. */
function armError(error: RestErrorLike, mapping: Mapping, fail: Fail): CloudCallError {
  const status = error.statusCode;
  const body = error.response?.parsedBody as
    | { error?: { code?: string; message?: string; target?: string } }
    | undefined;
  const code = body?.error?.code ?? error.code;
  const message = `${code ?? `HTTP ${status}`}: ${body?.error?.message ?? error.message}`;
  const base = { status, cloudCode: code };
  if (status === undefined) return fail("unavailable", `no answer: ${error.message}`, base);
  if (status === 401 || status === 403) {
    return fail("auth", message, { ...base, field: mapping.authField });
  }
  if (status === 404 && mapping.authField !== undefined) {
    return fail("auth", message, { ...base, field: mapping.authField });
  }
  if (status === 429 || (code !== undefined && THROTTLED_CODES.has(code))) {
    return fail("throttled", message, base);
  }
  if (status >= 500) return fail("unavailable", message, base);
  if (status === 404 && mapping.polling && error.request?.method === "GET") {
    return fail("lost", `the operation is no longer known: ${message}`, base);
  }
  const field = (code === undefined ? undefined : REFUSED_FIELDS[code]) ??
    fieldOfText(body?.error?.target) ??
    (code === "InvalidResourceReference" ? fieldOfText(body?.error?.message) : undefined) ??
    ((status === 400 || status === 404) ? mapping.refusedField : undefined);
  return fail("refused", message, { ...base, field });
}

function fieldOfText(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  return TARGET_FIELDS.find(([pattern]) => pattern.test(text))?.[1];
}

/** An async operation that ended Failed: its error code says whose trouble it is. */
function operationError(error: Error, fail: Fail): CloudCallError {
  const [, code, text] = OPERATION_FAILURE.exec(error.message) ?? [];
  const message = code === undefined ? error.message : `${code}: ${text}`;
  if (code !== undefined && UNAVAILABLE_CODES.has(code)) {
    return fail("unavailable", message, { cloudCode: code });
  }
  if (code !== undefined && THROTTLED_CODES.has(code)) {
    return fail("throttled", message, { cloudCode: code });
  }
  const field = code === undefined ? undefined : REFUSED_FIELDS[code];
  return fail("refused", message, { cloudCode: code, field });
}
