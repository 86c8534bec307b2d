/**
 * An Azure for the Azure connector's tests: one HTTPS server on 127.0.0.1 (the test certificate;
 * trust `ca`) answering as two services.
 *
 * The Microsoft identity platform (`authority`, the Entra authority host): the OpenID metadata
 * MSAL reads for an authority it has no built-in metadata for
 * (`GET /<tenant>/v2.0/.well-known/openid-configuration`), and the token endpoint
 * (`POST /<tenant>/oauth2/v2.0/token`, client credentials, checked against `principals`),
 * refusing in Entra's JSON shape (`error`, `error_description` starting `AADSTS<n>:`,
 * `error_codes`).
 *
 * Azure Resource Manager (`url`): `api-version` required, `Authorization: Bearer` checked, the
 * subscription (its read, `GET /subscriptions/<id>`; another id is 404 SubscriptionNotFound),
 * resource groups, VM sizes per location, and virtual machines, network interfaces
 * and public IPs in ARM's JSON shape. PUTs answer 201 with `Azure-AsyncOperation` (a status URL
 * answering `{"status": "InProgress" | "Succeeded" | "Failed", "error"}`), DELETEs 202 with
 * `Azure-AsyncOperation` and `Location` (202 while running, 204 once done); errors are
 * `{"error": {"code", "message", "target"?}}`. A delete of what is not there answers 204, as ARM
 * does.
 *
 * A VM starts `Creating`, then boots, then turns `Succeeded` and its public IP gets its address.
 * The boot is the emulator's stand-in for a real one (cloud-boot.ts): it reads the proxy login
 * from the VM's custom data (the start-up script) and starts Debian's tinyproxy with it on the
 * instance's own 127/8 address. A delete stops that proxy and removes the VM, and with it the
 * NIC, public IP and OS disk whose delete option says `Delete` (Azure's default: `Detach`, which
 * leaves them behind, as `resources()` then shows).
 *
 * Failures are switched at run time: `refuseCreates`, `slowCreates`, `failListings`,
 * `loseOperations`, `throttle`.
 */
import { randomBytes, randomUUID } from "node:crypto";
import https from "node:https";
import type http from "node:http";
import type net from "node:net";
import { testCertificate } from "../certs.ts";
import { type BootedInstance, bootInstance, InstanceAddresses } from "./cloud-boot.ts";

export interface AzurePrincipal {
  tenantId: string;
  clientId: string;
  clientSecret: string;
}

export interface AzureResourceGroupSeed {
  name: string;
  location: string;
  /** Virtual networks and their subnets; a NIC must name one of them. */
  virtualNetworks: Readonly<Record<string, readonly string[]>>;
}

export interface AzureEmulatorOptions {
  subscriptionId: string;
  principals: readonly AzurePrincipal[];
  resourceGroups: readonly AzureResourceGroupSeed[];
  /** The VM sizes each known location offers. */
  vmSizes: Readonly<Record<string, readonly string[]>>;
  /** From a VM's PUT to its boot (0 unless told). */
  bootDelayMs?: number;
  /** VMs per page of a VM list (100 unless told); more follow by `nextLink`. */
  listPageSize?: number;
  /** Where VMs' public addresses come from; a random /16 of 127/8 unless told. */
  addresses?: InstanceAddresses;
}

/** A VM as the test sees it. */
export interface EmulatedAzureVm {
  name: string;
  resourceGroup: string;
  provisioningState: VmState;
  tags: Record<string, string>;
  /** The custom data, base64-decoded: the start-up script. */
  customData: string | null;
  /** The public (127/8) address its proxy listens on, once booted. */
  address: string | null;
  createdAt: Date;
}

export interface AzureEmulator {
  /** Azure Resource Manager's base URL. */
  readonly url: string;
  /** The authority host (no tenant). */
  readonly authority: string;
  /** The CA to trust for both. */
  readonly ca: string;
  /**
   * Requests so far by method and resource type: `GET virtualMachines` (one VM), `LIST
   * virtualMachines` (a page of a list), `PUT networkInterfaces`, `GET operations`, `GET vmSizes`,
   * `GET resourceGroups`, `GET subscriptions`, `POST token`, `GET openid-configuration`… A copy.
   */
  readonly calls: Record<string, number>;
  /**
   * VM PUTs are refused with `code` (SkuNotAvailable unless told) from now on: answered 409
   * (`during: "request"`, the default), or accepted and their operation ends Failed
   * (`during: "operation"`, the VM left `Failed` as Azure leaves it). `null` stops refusing.
   */
  refuseCreates(code?: string | null, options?: { during?: "request" | "operation" }): void;
  /** New VMs stay Creating, never booting, until switched off (then they boot). */
  slowCreates(on: boolean): void;
  /** VM lists answer 503. */
  failListings(on: boolean): void;
  /** Operation status URLs answer 404: the operations are lost. */
  loseOperations(on: boolean): void;
  /** Every ARM call answers 429 with Retry-After. */
  throttle(on: boolean): void;
  instances(): EmulatedAzureVm[];
  /** The NICs, public IPs and disks still there, by name, sorted. */
  resources(): string[];
  /** Stops every booted proxy and the server. Safe twice. */
  close(): Promise<void>;
}

type VmState = "Creating" | "Succeeded" | "Failed" | "Deleting";
type DeleteOption = "Delete" | "Detach";
type OperationStatus = "InProgress" | "Succeeded" | "Failed";
type Json = Record<string, unknown>;

const COMPUTE = "Microsoft.Compute";
const NETWORK = "Microsoft.Network";
/** Azure's limit on custom data, base64. */
const MAX_CUSTOM_DATA_CHARS = 87_380;
const MAX_BODY_BYTES = 1024 * 1024;
const TOKEN_LIFETIME_SECONDS = 3599;

interface Operation {
  id: string;
  namespace: string;
  location: string;
  status: OperationStatus;
  error: { code: string; message: string } | undefined;
  startTime: Date;
  endTime: Date | undefined;
}

interface VmRecord {
  name: string;
  resourceGroup: string;
  location: string;
  vmId: string;
  vmSize: string;
  tags: Record<string, string>;
  customData: string | null;
  provisioningState: VmState;
  properties: Json;
  nics: { key: string; deleteOption: DeleteOption }[];
  disk: { key: string; deleteOption: DeleteOption };
  createdAt: Date;
  address: string | null;
  booted: BootedInstance | undefined;
  /** The boot under way, so a delete waits for it. */
  booting: Promise<void> | undefined;
  /** Waiting for slowCreates(false). */
  held: boolean;
  createOperation: Operation;
  deleteOperation: Operation | undefined;
}

interface NicRecord {
  name: string;
  resourceGroup: string;
  location: string;
  tags: Record<string, string>;
  subnetId: string;
  publicIp: { key: string; id: string; deleteOption: DeleteOption } | undefined;
  privateIp: string;
}

interface IpRecord {
  name: string;
  resourceGroup: string;
  location: string;
  tags: Record<string, string>;
  sku: Json;
  allocation: string;
  ipAddress: string | null;
}

interface DiskRecord {
  name: string;
  resourceGroup: string;
}

/** An ARM error answer, thrown by a handler and written by the dispatcher. */
class ArmAnswerError extends Error {
  readonly status: number;
  readonly code: string;
  readonly target: string | undefined;
  constructor(status: number, code: string, message: string, target?: string) {
    super(message);
    this.status = status;
    this.code = code;
    this.target = target;
  }
}

const keyOf = (resourceGroup: string, name: string) =>
  `${resourceGroup.toLowerCase()}/${name.toLowerCase()}`;

function send(response: http.ServerResponse, status: number, body?: unknown, headers = {}): void {
  const text = body === undefined ? "" : JSON.stringify(body);
  response.writeHead(status, {
    ...(body === undefined ? {} : { "content-type": "application/json; charset=utf-8" }),
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

function readBody(request: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new ArmAnswerError(413, "RequestEntityTooLarge", "The request is too large."));
        request.destroy();
        return;
      }
      chunks.push(chunk);
    });
    request.once("error", reject);
    request.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });
}

function parseJson(text: string): Json {
  try {
    const value: unknown = JSON.parse(text);
    if (value !== null && typeof value === "object" && !Array.isArray(value)) return value as Json;
  } catch {
    // Answered below.
  }
  throw new ArmAnswerError(400, "InvalidRequestContent", "The request content is not valid JSON.");
}

const asObject = (value: unknown): Json =>
  value !== null && typeof value === "object" && !Array.isArray(value) ? value as Json : {};
const asArray = (value: unknown): unknown[] => Array.isArray(value) ? value : [];
const asString = (value: unknown): string | undefined =>
  typeof value === "string" ? value : undefined;

function asTags(value: unknown): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const [key, tag] of Object.entries(asObject(value))) {
    if (typeof tag === "string") tags[key] = tag;
  }
  return tags;
}

function deleteOptionOf(value: unknown): DeleteOption {
  return asString(value)?.toLowerCase() === "delete" ? "Delete" : "Detach";
}

/** The resource group and name in an ARM id of `type` (`networkInterfaces`…), if it is one. */
function parseId(id: string, type: string): { resourceGroup: string; name: string } | undefined {
  const match = new RegExp(
    `^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\\.(?:Network|Compute)/${type}/([^/]+)$`,
    "i",
  ).exec(id);
  return match ? { resourceGroup: match[1], name: match[2] } : undefined;
}

/** Entra's error body: the AADSTS code leads the description, as the real one's does. */
function entraError(error: string, code: number, text: string): Json {
  const traceId = randomUUID();
  const correlationId = randomUUID();
  const timestamp = new Date().toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  return {
    error,
    error_description:
      `AADSTS${code}: ${text} Trace ID: ${traceId} Correlation ID: ${correlationId} Timestamp: ${timestamp}`,
    error_codes: [code],
    timestamp,
    trace_id: traceId,
    correlation_id: correlationId,
    error_uri: `https://login.microsoftonline.com/error?code=${code}`,
  };
}

export async function startAzureEmulator(options: AzureEmulatorOptions): Promise<AzureEmulator> {
  const certificate = await testCertificate();
  const emulator = new Emulator(options);
  const server = https.createServer(
    { cert: certificate.cert, key: certificate.key },
    (req, res) => {
      emulator.handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) {
          send(res, 500, { error: { code: "InternalServerError", message: String(error) } });
        }
      });
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  emulator.origin = `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  let closing: Promise<void> | undefined;
  return {
    get url() {
      return emulator.origin;
    },
    get authority() {
      return emulator.origin;
    },
    ca: certificate.ca,
    get calls() {
      return Object.fromEntries(emulator.calls);
    },
    refuseCreates(code = "SkuNotAvailable", how = {}) {
      emulator.refusal = code === null ? undefined : { code, during: how.during ?? "request" };
    },
    slowCreates: (on) => emulator.setSlow(on),
    failListings(on) {
      emulator.listingsFail = on;
    },
    loseOperations(on) {
      emulator.operationsLost = on;
    },
    throttle(on) {
      emulator.throttled = on;
    },
    instances: () => emulator.instances(),
    resources: () => emulator.resources(),
    close() {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await emulator.stop();
      })();
      return closing;
    },
  };
}

class Emulator {
  origin = "";
  readonly calls = new Map<string, number>();
  refusal: { code: string; during: "request" | "operation" } | undefined;
  listingsFail = false;
  operationsLost = false;
  throttled = false;
  readonly #options: AzureEmulatorOptions;
  readonly #addresses: InstanceAddresses;
  readonly #tokens = new Map<
    string,
    { tenantId: string; clientId: string; expiresAtMs: number }
  >();
  readonly #operations = new Map<string, Operation>();
  readonly #vms = new Map<string, VmRecord>();
  readonly #nics = new Map<string, NicRecord>();
  readonly #ips = new Map<string, IpRecord>();
  readonly #disks = new Map<string, DiskRecord>();
  readonly #timers = new Set<ReturnType<typeof setTimeout>>();
  #slow = false;
  #stopped = false;

  constructor(options: AzureEmulatorOptions) {
    this.#addresses = options.addresses ?? new InstanceAddresses();
    this.#options = options;
  }

  #count(key: string): void {
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
  }

  async handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", this.origin);
    const segments = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    const method = request.method ?? "GET";
    if (segments[0]?.toLowerCase() !== "subscriptions") {
      await this.#identity(method, segments, request, response);
      return;
    }
    try {
      this.#checkArmRequest(request, url, segments);
      const answer = await this.#arm(method, segments, url, request);
      send(response, answer.status, answer.body, answer.headers);
    } catch (error) {
      if (!(error instanceof ArmAnswerError)) throw error;
      const headers: Record<string, string> = error.status === 429 ? { "retry-after": "1" } : {};
      const target = error.target === undefined ? {} : { target: error.target };
      send(
        response,
        error.status,
        { error: { code: error.code, message: error.message, ...target } },
        headers,
      );
    }
  }

  // -------------------------------------------------------------------------------------------
  // The identity platform.

  async #identity(
    method: string,
    segments: string[],
    request: http.IncomingMessage,
    response: http.ServerResponse,
  ): Promise<void> {
    const [tenant, ...rest] = segments;
    const path = rest.join("/").toLowerCase();
    if (method === "GET" && path === "v2.0/.well-known/openid-configuration") {
      this.#count("GET openid-configuration");
      this.#openIdConfiguration(tenant, response);
      return;
    }
    if (method === "POST" && path === "oauth2/v2.0/token") {
      this.#count("POST token");
      this.#token(tenant, new URLSearchParams(await readBody(request)), response);
      return;
    }
    this.#count(`${method} identity`);
    send(response, 404, entraError("invalid_request", 90_027, "No such endpoint."));
  }

  #knownTenant(tenant: string | undefined): boolean {
    return this.#options.principals.some((principal) => principal.tenantId === tenant);
  }

  #openIdConfiguration(tenant: string | undefined, response: http.ServerResponse): void {
    if (tenant === undefined || !this.#knownTenant(tenant)) {
      send(response, 400, this.#tenantNotFound(tenant));
      return;
    }
    const base = `${this.origin}/${tenant}`;
    send(response, 200, {
      token_endpoint: `${base}/oauth2/v2.0/token`,
      token_endpoint_auth_methods_supported: ["client_secret_post", "private_key_jwt"],
      jwks_uri: `${this.origin}/${tenant}/discovery/v2.0/keys`,
      response_modes_supported: ["query", "fragment", "form_post"],
      subject_types_supported: ["pairwise"],
      id_token_signing_alg_values_supported: ["RS256"],
      response_types_supported: ["code", "id_token", "code id_token", "id_token token"],
      scopes_supported: ["openid", "profile", "email", "offline_access"],
      issuer: `${base}/v2.0`,
      request_uri_parameter_supported: false,
      userinfo_endpoint: `${this.origin}/oidc/userinfo`,
      authorization_endpoint: `${base}/oauth2/v2.0/authorize`,
      device_authorization_endpoint: `${base}/oauth2/v2.0/devicecode`,
      http_logout_supported: true,
      frontchannel_logout_supported: true,
      end_session_endpoint: `${base}/oauth2/v2.0/logout`,
      claims_supported: ["sub", "iss", "aud", "exp", "iat", "tid"],
      kerberos_endpoint: `${base}/kerberos`,
      tenant_region_scope: "EU",
      cloud_instance_name: "microsoftonline.com",
      cloud_graph_host_name: "graph.windows.net",
      msgraph_host: "graph.microsoft.com",
      rbac_url: "https://pas.windows.net",
    });
  }

  #tenantNotFound(tenant: string | undefined): Json {
    return entraError(
      "invalid_request",
      90_002,
      `Tenant '${tenant ?? ""}' not found. Check to make sure you have the correct tenant ID and ` +
        "are signing into the correct cloud.",
    );
  }

  #token(tenant: string, form: URLSearchParams, response: http.ServerResponse): void {
    if (!this.#knownTenant(tenant)) {
      send(response, 400, this.#tenantNotFound(tenant));
      return;
    }
    if (form.get("grant_type") !== "client_credentials") {
      send(response, 400, entraError("unsupported_grant_type", 70_003, "Unsupported grant type."));
      return;
    }
    const clientId = form.get("client_id") ?? "";
    const principal = this.#options.principals.find((candidate) =>
      candidate.tenantId === tenant && candidate.clientId === clientId
    );
    if (principal === undefined) {
      send(
        response,
        400,
        entraError(
          "unauthorized_client",
          700_016,
          `Application with identifier '${clientId}' was not found in the directory '${tenant}'.`,
        ),
      );
      return;
    }
    if (form.get("client_secret") !== principal.clientSecret) {
      send(
        response,
        401,
        entraError(
          "invalid_client",
          7_000_215,
          "Invalid client secret provided. Ensure the secret being sent in the request is the " +
            `client secret value, not the client secret ID, for a secret added to app '${clientId}'.`,
        ),
      );
      return;
    }
    const scope = form.get("scope") ?? "";
    if (scope.replace(/\/+\.default$/, "") !== this.origin) {
      send(
        response,
        400,
        entraError(
          "invalid_resource",
          500_011,
          `The resource principal named ${scope.replace(/\/\.default$/, "")} was not found in ` +
            `the tenant named ${tenant}.`,
        ),
      );
      return;
    }
    const accessToken = randomBytes(32).toString("base64url");
    this.#tokens.set(accessToken, {
      tenantId: tenant,
      clientId,
      expiresAtMs: Date.now() + TOKEN_LIFETIME_SECONDS * 1000,
    });
    send(response, 200, {
      token_type: "Bearer",
      expires_in: TOKEN_LIFETIME_SECONDS,
      ext_expires_in: TOKEN_LIFETIME_SECONDS,
      access_token: accessToken,
    });
  }

  // -------------------------------------------------------------------------------------------
  // Resource Manager: routing.

  #checkArmRequest(request: http.IncomingMessage, url: URL, segments: string[]): void {
    this.#count(this.#callKey(request.method ?? "GET", segments));
    if (this.throttled) {
      throw new ArmAnswerError(
        429,
        "TooManyRequests",
        "The request is being throttled as the limit has been reached for operation type.",
      );
    }
    if (!url.searchParams.get("api-version")) {
      throw new ArmAnswerError(
        400,
        "MissingApiVersionParameter",
        "The api-version query parameter (?api-version=) is required for all requests.",
      );
    }
    const header = request.headers.authorization ?? "";
    if (!header.startsWith("Bearer ")) {
      throw new ArmAnswerError(
        401,
        "AuthenticationFailed",
        "Authentication failed. The 'Authorization' header is missing.",
      );
    }
    const token = this.#tokens.get(header.slice("Bearer ".length));
    if (token === undefined || token.expiresAtMs < Date.now()) {
      throw new ArmAnswerError(401, "InvalidAuthenticationToken", "The access token is invalid.");
    }
    if (segments[1] !== this.#options.subscriptionId) {
      throw new ArmAnswerError(
        404,
        "SubscriptionNotFound",
        `The subscription '${segments[1]}' could not be found.`,
      );
    }
  }

  /**
   * `calls`' key for a request: its method and resource type, `LIST <type>` for a collection's
   * GET.
   */
  #callKey(method: string, segments: string[]): string {
    const lower = segments.map((segment) => segment.toLowerCase());
    if (lower[2] === "providers") {
      const kind = lower[6] ?? "providers";
      return `${method} ${
        kind === "vmsizes" ? "vmSizes" : kind.replace("operationresults", "operations")
      }`;
    }
    if (lower.length === 2) return `${method} subscriptions`;
    if (lower.length <= 4) return `${method} resourceGroups`;
    const type = segments[6] ?? "providers";
    return lower.length === 7 && method === "GET" ? `LIST ${type}` : `${method} ${type}`;
  }

  async #arm(
    method: string,
    segments: string[],
    url: URL,
    request: http.IncomingMessage,
  ): Promise<{ status: number; body?: unknown; headers?: Record<string, string> }> {
    const lower = segments.map((segment) => segment.toLowerCase());
    if (lower.length === 2 && method === "GET") return this.#subscription(request);
    if (lower[2] === "providers" && lower[4] === "locations") {
      if (lower[6] === "vmsizes" && method === "GET") return this.#vmSizes(segments[5]);
      if (lower[6] === "operations" && method === "GET") return this.#operationStatus(segments[7]);
      if (lower[6] === "operationresults" && method === "GET") {
        return this.#operationResult(segments[7]);
      }
    }
    if (lower[2] !== "resourcegroups" || segments[3] === undefined) {
      throw new ArmAnswerError(404, "InvalidResourceType", "The resource type is not found.");
    }
    const group = this.#resourceGroup(segments[3]);
    if (lower.length === 4 && method === "GET") {
      return { status: 200, body: this.#groupBody(group) };
    }
    const type = `${lower[5]}/${lower[6]}`;
    const name = segments[7];
    if (type === "microsoft.compute/virtualmachines" && lower.length === 7 && method === "GET") {
      return this.#listVms(group.name, url);
    }
    if (lower[4] !== "providers" || name === undefined || lower.length !== 8) {
      throw new ArmAnswerError(404, "InvalidResourceType", "The resource type is not found.");
    }
    const body = method === "PUT" ? parseJson(await readBody(request)) : {};
    const route = `${method} ${type}`;
    switch (route) {
      case "GET microsoft.compute/virtualmachines":
        return { status: 200, body: this.#vmBody(this.#vm(group.name, name)) };
      case "PUT microsoft.compute/virtualmachines":
        return this.#putVm(group, name, body);
      case "DELETE microsoft.compute/virtualmachines":
        return this.#deleteVm(group.name, name);
      case "GET microsoft.network/networkinterfaces":
        return { status: 200, body: this.#nicBody(this.#nic(group.name, name)) };
      case "PUT microsoft.network/networkinterfaces":
        return this.#putNic(group, name, body);
      case "DELETE microsoft.network/networkinterfaces":
        return this.#deleteNic(group.name, name);
      case "GET microsoft.network/publicipaddresses":
        return { status: 200, body: this.#ipBody(this.#ip(group.name, name)) };
      case "PUT microsoft.network/publicipaddresses":
        return this.#putIp(group, name, body);
      case "DELETE microsoft.network/publicipaddresses":
        return this.#deleteIp(group.name, name);
      default:
        throw new ArmAnswerError(405, "MethodNotAllowed", `${method} is not allowed on ${type}.`);
    }
  }

  /** The subscription, as its read answers it (its tenant: the signed-in principal's). */
  #subscription(request: http.IncomingMessage): { status: number; body: Json } {
    const token = this.#tokens.get((request.headers.authorization ?? "").slice("Bearer ".length));
    const id = this.#options.subscriptionId;
    return {
      status: 200,
      body: {
        id: `/subscriptions/${id}`,
        authorizationSource: "RoleBased",
        managedByTenants: [],
        subscriptionId: id,
        tenantId: token?.tenantId,
        displayName: "Octoprox emulated subscription",
        state: "Enabled",
        subscriptionPolicies: {
          locationPlacementId: "Public_2014-09-01",
          quotaId: "PayAsYouGo_2014-09-01",
          spendingLimit: "Off",
        },
      },
    };
  }

  #resourceGroup(name: string): AzureResourceGroupSeed {
    const group = this.#options.resourceGroups.find((candidate) =>
      candidate.name.toLowerCase() === name.toLowerCase()
    );
    if (group === undefined) {
      throw new ArmAnswerError(
        404,
        "ResourceGroupNotFound",
        `Resource group '${name}' could not be found.`,
      );
    }
    return group;
  }

  #groupBody(group: AzureResourceGroupSeed): Json {
    return {
      id: `/subscriptions/${this.#options.subscriptionId}/resourceGroups/${group.name}`,
      name: group.name,
      type: "Microsoft.Resources/resourceGroups",
      location: group.location,
      properties: { provisioningState: "Succeeded" },
    };
  }

  #resourceId(resourceGroup: string, namespace: string, type: string, name: string): string {
    return `/subscriptions/${this.#options.subscriptionId}/resourceGroups/${resourceGroup}` +
      `/providers/${namespace}/${type}/${name}`;
  }

  #notFound(namespace: string, type: string, name: string, resourceGroup: string): never {
    throw new ArmAnswerError(
      404,
      "ResourceNotFound",
      `The Resource '${namespace}/${type}/${name}' under resource group '${resourceGroup}' ` +
        "was not found.",
    );
  }

  #checkLocation(location: string | undefined, type: string): string {
    if (location === undefined || !(location in this.#options.vmSizes)) {
      throw new ArmAnswerError(
        400,
        "LocationNotAvailableForResourceType",
        `The provided location '${location ?? ""}' is not available for resource type ` +
          `'${type}'. List of available regions for the resource type is ` +
          `'${Object.keys(this.#options.vmSizes).join(",")}'.`,
      );
    }
    return location;
  }

  #vmSizes(location: string): { status: number; body: unknown } {
    const sizes = this.#options.vmSizes[location.toLowerCase()];
    if (sizes === undefined) {
      throw new ArmAnswerError(
        400,
        "NoRegisteredProviderFound",
        `No registered resource provider found for location '${location}' and API version ` +
          "for type 'locations/vmSizes'.",
      );
    }
    return {
      status: 200,
      body: {
        value: sizes.map((name) => ({
          name,
          numberOfCores: 1,
          osDiskSizeInMB: 1_047_552,
          resourceDiskSizeInMB: 4096,
          memoryInMB: 1024,
          maxDataDiskCount: 2,
        })),
      },
    };
  }

  // -------------------------------------------------------------------------------------------
  // Operations.

  #operation(namespace: string, location: string, status: OperationStatus): Operation {
    const operation: Operation = {
      id: randomUUID(),
      namespace,
      location,
      status: "InProgress",
      error: undefined,
      startTime: new Date(),
      endTime: undefined,
    };
    this.#operations.set(operation.id, operation);
    if (status !== "InProgress") this.#finish(operation, status);
    return operation;
  }

  #finish(operation: Operation, status: OperationStatus, error?: Operation["error"]): void {
    operation.status = status;
    operation.error = error;
    operation.endTime = new Date();
  }

  #operationUrl(operation: Operation, kind: "operations" | "operationResults"): string {
    const version = operation.namespace === COMPUTE ? "2025-04-01" : "2025-05-01";
    return `${this.origin}/subscriptions/${this.#options.subscriptionId}/providers/` +
      `${operation.namespace}/locations/${operation.location}/${kind}/${operation.id}` +
      `?api-version=${version}`;
  }

  #asyncHeaders(operation: Operation, withLocation: boolean): Record<string, string> {
    return {
      "azure-asyncoperation": this.#operationUrl(operation, "operations"),
      ...(withLocation ? { location: this.#operationUrl(operation, "operationResults") } : {}),
    };
  }

  #lookUpOperation(id: string | undefined): Operation {
    const operation = id === undefined ? undefined : this.#operations.get(id);
    if (operation === undefined || this.operationsLost) {
      throw new ArmAnswerError(404, "NotFound", `The operation '${id ?? ""}' was not found.`);
    }
    return operation;
  }

  #operationStatus(id: string | undefined): { status: number; body: unknown } {
    const operation = this.#lookUpOperation(id);
    return {
      status: 200,
      body: {
        name: operation.id,
        status: operation.status,
        startTime: operation.startTime.toISOString(),
        ...(operation.endTime ? { endTime: operation.endTime.toISOString() } : {}),
        ...(operation.error ? { error: operation.error } : {}),
      },
    };
  }

  #operationResult(id: string | undefined): { status: number; body?: unknown } {
    const operation = this.#lookUpOperation(id);
    if (operation.status === "InProgress") return { status: 202 };
    if (operation.status === "Failed") return { status: 200, body: { error: operation.error } };
    return { status: 204 };
  }

  // -------------------------------------------------------------------------------------------
  // Public IP addresses and network interfaces: their operations end at once.

  #ip(resourceGroup: string, name: string): IpRecord {
    return this.#ips.get(keyOf(resourceGroup, name)) ??
      this.#notFound(NETWORK, "publicIPAddresses", name, resourceGroup);
  }

  #nic(resourceGroup: string, name: string): NicRecord {
    return this.#nics.get(keyOf(resourceGroup, name)) ??
      this.#notFound(NETWORK, "networkInterfaces", name, resourceGroup);
  }

  #ipBody(ip: IpRecord): Json {
    const user = [...this.#nics.values()].find((nic) =>
      nic.publicIp?.key === keyOf(ip.resourceGroup, ip.name)
    );
    return {
      name: ip.name,
      id: this.#resourceId(ip.resourceGroup, NETWORK, "publicIPAddresses", ip.name),
      type: "Microsoft.Network/publicIPAddresses",
      location: ip.location,
      tags: ip.tags,
      sku: ip.sku,
      properties: {
        provisioningState: "Succeeded",
        publicIPAllocationMethod: ip.allocation,
        publicIPAddressVersion: "IPv4",
        idleTimeoutInMinutes: 4,
        ...(ip.ipAddress === null ? {} : { ipAddress: ip.ipAddress }),
        ...(user === undefined ? {} : {
          ipConfiguration: {
            id: `${
              this.#resourceId(user.resourceGroup, NETWORK, "networkInterfaces", user.name)
            }/ipConfigurations/ipconfig1`,
          },
        }),
      },
    };
  }

  #putIp(group: AzureResourceGroupSeed, name: string, body: Json) {
    const location = this.#checkLocation(
      asString(body.location),
      "Microsoft.Network/publicIPAddresses",
    );
    const properties = asObject(body.properties);
    const key = keyOf(group.name, name);
    const existing = this.#ips.get(key);
    const ip: IpRecord = {
      name: existing?.name ?? name,
      resourceGroup: group.name,
      location,
      tags: asTags(body.tags),
      sku: asObject(body.sku),
      allocation: asString(properties.publicIPAllocationMethod) ?? "Dynamic",
      ipAddress: existing?.ipAddress ?? null,
    };
    this.#ips.set(key, ip);
    const operation = this.#operation(NETWORK, location, "Succeeded");
    return {
      status: existing ? 200 : 201,
      body: this.#ipBody(ip),
      headers: this.#asyncHeaders(operation, false),
    };
  }

  #deleteIp(resourceGroup: string, name: string) {
    const key = keyOf(resourceGroup, name);
    const ip = this.#ips.get(key);
    if (ip === undefined) return { status: 204 };
    const user = [...this.#nics.values()].find((nic) => nic.publicIp?.key === key);
    if (user !== undefined) {
      throw new ArmAnswerError(
        400,
        "PublicIPAddressCannotBeDeleted",
        `Public IP address ${ip.name} can not be deleted since it is still allocated to ` +
          `resource ${user.name}.`,
      );
    }
    this.#ips.delete(key);
    const operation = this.#operation(NETWORK, ip.location, "Succeeded");
    return { status: 202, headers: this.#asyncHeaders(operation, true) };
  }

  #nicBody(nic: NicRecord): Json {
    const id = this.#resourceId(nic.resourceGroup, NETWORK, "networkInterfaces", nic.name);
    const user = this.#vmUsing(keyOf(nic.resourceGroup, nic.name));
    return {
      name: nic.name,
      id,
      type: "Microsoft.Network/networkInterfaces",
      location: nic.location,
      tags: nic.tags,
      properties: {
        provisioningState: "Succeeded",
        ipConfigurations: [{
          name: "ipconfig1",
          id: `${id}/ipConfigurations/ipconfig1`,
          properties: {
            provisioningState: "Succeeded",
            privateIPAddress: nic.privateIp,
            privateIPAllocationMethod: "Dynamic",
            subnet: { id: nic.subnetId },
            primary: true,
            privateIPAddressVersion: "IPv4",
            ...(nic.publicIp === undefined ? {} : {
              publicIPAddress: {
                id: nic.publicIp.id,
                properties: { deleteOption: nic.publicIp.deleteOption },
              },
            }),
          },
        }],
        ...(user === undefined ? {} : {
          virtualMachine: {
            id: this.#resourceId(user.resourceGroup, COMPUTE, "virtualMachines", user.name),
          },
        }),
      },
    };
  }

  #vmUsing(nicKey: string): VmRecord | undefined {
    return [...this.#vms.values()].find((vm) => vm.nics.some((nic) => nic.key === nicKey));
  }

  #checkSubnet(group: AzureResourceGroupSeed, subnetId: string): void {
    const match = /\/virtualNetworks\/([^/]+)\/subnets\/([^/]+)$/i.exec(subnetId);
    const subnets = match ? group.virtualNetworks[match[1]] : undefined;
    if (!match || subnets === undefined || !subnets.includes(match[2])) {
      throw new ArmAnswerError(
        400,
        "InvalidResourceReference",
        `Resource ${subnetId} referenced by resource ${group.name} was not found. Please make ` +
          "sure that the referenced resource exists, and that both resources are in the same " +
          "region.",
      );
    }
  }

  #putNic(group: AzureResourceGroupSeed, name: string, body: Json) {
    const location = this.#checkLocation(
      asString(body.location),
      "Microsoft.Network/networkInterfaces",
    );
    const configuration = asObject(asArray(asObject(body.properties).ipConfigurations)[0]);
    const properties = asObject(configuration.properties);
    const subnetId = asString(asObject(properties.subnet).id) ?? "";
    this.#checkSubnet(group, subnetId);
    const key = keyOf(group.name, name);
    const publicIp = this.#publicIpReference(group, key, asObject(properties.publicIPAddress));
    const existing = this.#nics.get(key);
    const nic: NicRecord = {
      name: existing?.name ?? name,
      resourceGroup: group.name,
      location,
      tags: asTags(body.tags),
      subnetId,
      publicIp,
      privateIp: existing?.privateIp ?? `10.0.0.${(this.#nics.size % 250) + 4}`,
    };
    this.#nics.set(key, nic);
    const operation = this.#operation(NETWORK, location, "Succeeded");
    return {
      status: existing ? 200 : 201,
      body: this.#nicBody(nic),
      headers: this.#asyncHeaders(operation, false),
    };
  }

  /** A NIC's public IP: one that exists, and no other NIC's. */
  #publicIpReference(
    group: AzureResourceGroupSeed,
    nicKey: string,
    reference: Json,
  ): NicRecord["publicIp"] {
    const id = asString(reference.id);
    if (id === undefined) return undefined;
    const parsed = parseId(id, "publicIPAddresses");
    const key = parsed ? keyOf(parsed.resourceGroup, parsed.name) : "";
    if (!parsed || !this.#ips.has(key)) {
      throw new ArmAnswerError(
        400,
        "InvalidResourceReference",
        `Resource ${id} referenced by resource ${group.name} was not found.`,
      );
    }
    const other = [...this.#nics.entries()].find(([otherKey, nic]) =>
      otherKey !== nicKey && nic.publicIp?.key === key
    );
    if (other !== undefined) {
      throw new ArmAnswerError(
        400,
        "PublicIPAddressInUse",
        `Resource ${id} is already in use by ${other[1].name}.`,
      );
    }
    return { key, id, deleteOption: deleteOptionOf(asObject(reference.properties).deleteOption) };
  }

  #deleteNic(resourceGroup: string, name: string) {
    const key = keyOf(resourceGroup, name);
    const nic = this.#nics.get(key);
    if (nic === undefined) return { status: 204 };
    const user = this.#vmUsing(key);
    if (user !== undefined) {
      throw new ArmAnswerError(
        400,
        "NicInUse",
        `Network Interface ${nic.name} is used by existing resource ${user.name}. In order to ` +
          "delete the network interface, it must be dissociated from the resource.",
      );
    }
    this.#nics.delete(key);
    const operation = this.#operation(NETWORK, nic.location, "Succeeded");
    return { status: 202, headers: this.#asyncHeaders(operation, true) };
  }

  // -------------------------------------------------------------------------------------------
  // Virtual machines.

  #vm(resourceGroup: string, name: string): VmRecord {
    return this.#vms.get(keyOf(resourceGroup, name)) ??
      this.#notFound(COMPUTE, "virtualMachines", name, resourceGroup);
  }

  /** A VM as ARM shows it: never its custom data, which ARM does not return. */
  #vmBody(vm: VmRecord): Json {
    const profile = asObject(vm.properties.osProfile);
    const { customData: _customData, ...osProfile } = profile;
    return {
      name: vm.name,
      id: this.#resourceId(vm.resourceGroup, COMPUTE, "virtualMachines", vm.name),
      type: "Microsoft.Compute/virtualMachines",
      location: vm.location,
      tags: vm.tags,
      properties: {
        ...vm.properties,
        osProfile: { ...osProfile, secrets: [], allowExtensionOperations: true },
        vmId: vm.vmId,
        provisioningState: vm.provisioningState,
        timeCreated: vm.createdAt.toISOString(),
      },
    };
  }

  #listVms(resourceGroup: string, url: URL) {
    if (this.listingsFail) {
      throw new ArmAnswerError(
        503,
        "ServiceUnavailable",
        "The service is temporarily unavailable. Please try again later.",
      );
    }
    const all = [...this.#vms.values()]
      .filter((vm) => vm.resourceGroup.toLowerCase() === resourceGroup.toLowerCase())
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
    const pageSize = this.#options.listPageSize ?? 100;
    const offset = Number(url.searchParams.get("$skipToken") ?? "0") || 0;
    const page = all.slice(offset, offset + pageSize);
    const next = new URL(url.href);
    next.searchParams.set("$skipToken", String(offset + pageSize));
    return {
      status: 200,
      body: {
        value: page.map((vm) => this.#vmBody(vm)),
        ...(offset + pageSize < all.length ? { nextLink: next.href } : {}),
      },
    };
  }

  #putVm(group: AzureResourceGroupSeed, name: string, body: Json) {
    const existing = this.#vms.get(keyOf(group.name, name));
    if (existing !== undefined) return this.#putExistingVm(existing);
    const location = this.#checkLocation(
      asString(body.location),
      "Microsoft.Compute/virtualMachines",
    );
    const properties = asObject(body.properties);
    const vmSize = this.#checkVmSize(location, properties);
    this.#checkOsProfile(asObject(properties.osProfile));
    if (this.refusal?.during === "request") throw this.#refusal(vmSize, location);
    const nics = this.#vmNics(group, properties);
    const osDisk = asObject(asObject(properties.storageProfile).osDisk);
    const vm: VmRecord = {
      name,
      resourceGroup: group.name,
      location,
      vmId: randomUUID(),
      vmSize,
      tags: asTags(body.tags),
      customData: this.#customData(asObject(properties.osProfile)),
      provisioningState: "Creating",
      properties,
      nics,
      disk: {
        key: keyOf(group.name, asString(osDisk.name) ?? `${name}_OsDisk_1_${randomUUID()}`),
        deleteOption: deleteOptionOf(osDisk.deleteOption),
      },
      createdAt: new Date(),
      address: null,
      booted: undefined,
      booting: undefined,
      held: false,
      createOperation: this.#operation(COMPUTE, location, "InProgress"),
      deleteOperation: undefined,
    };
    this.#vms.set(keyOf(group.name, name), vm);
    this.#disks.set(vm.disk.key, { name: vm.disk.key.split("/")[1], resourceGroup: group.name });
    this.#start(vm);
    return {
      status: 201,
      body: this.#vmBody(vm),
      headers: this.#asyncHeaders(vm.createOperation, false),
    };
  }

  /** A PUT again: the VM as it stands (this emulator changes nothing on an update). */
  #putExistingVm(vm: VmRecord) {
    if (vm.provisioningState === "Deleting") {
      throw new ArmAnswerError(
        409,
        "OperationNotAllowed",
        `Operation 'PUT' is not allowed on VM '${vm.name}' since the VM is marked for deletion.`,
      );
    }
    const running = vm.createOperation.status === "InProgress";
    return {
      status: 200,
      body: this.#vmBody(vm),
      headers: running ? this.#asyncHeaders(vm.createOperation, false) : {},
    };
  }

  #checkVmSize(location: string, properties: Json): string {
    const vmSize = asString(asObject(properties.hardwareProfile).vmSize) ?? "";
    const sizes = this.#options.vmSizes[location] ?? [];
    if (!sizes.some((size) => size.toLowerCase() === vmSize.toLowerCase())) {
      throw new ArmAnswerError(
        400,
        "InvalidParameter",
        `The value ${vmSize} provided for the VM size is not valid. The valid sizes in the ` +
          `current region are: ${sizes.join(",")}.`,
        "vmSize",
      );
    }
    return vmSize;
  }

  #checkOsProfile(profile: Json): void {
    const linux = asObject(profile.linuxConfiguration);
    const keys = asArray(asObject(linux.ssh).publicKeys).map((key) => asObject(key));
    if (linux.disablePasswordAuthentication === true && keys.length === 0) {
      throw new ArmAnswerError(
        400,
        "InvalidParameter",
        "Required parameter 'publicKeys' is missing (null).",
        "linuxConfiguration.ssh.publicKeys",
      );
    }
    for (const key of keys) {
      if (!/^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp256) /.test(asString(key.keyData) ?? "")) {
        throw new ArmAnswerError(
          400,
          "InvalidParameter",
          "The value of parameter linuxConfiguration.ssh.publicKeys.keyData is invalid.",
          "linuxConfiguration.ssh.publicKeys.keyData",
        );
      }
    }
    const customData = asString(profile.customData);
    if (customData !== undefined && customData.length > MAX_CUSTOM_DATA_CHARS) {
      throw new ArmAnswerError(
        400,
        "InvalidParameter",
        `Custom data in OSProfile must be in Base64 encoding and with a maximum length of ` +
          `${MAX_CUSTOM_DATA_CHARS} characters.`,
        "customData",
      );
    }
  }

  #customData(profile: Json): string | null {
    const encoded = asString(profile.customData);
    return encoded === undefined ? null : Buffer.from(encoded, "base64").toString("utf8");
  }

  #refusal(vmSize: string, location: string): ArmAnswerError {
    const code = this.refusal?.code ?? "SkuNotAvailable";
    const message = code === "SkuNotAvailable"
      ? `The requested VM size for resource 'Following SKUs have failed for Capacity ` +
        `Restrictions: ${vmSize}' is currently not available in location '${location}'. Please ` +
        "try another size or deploy to a different location or different zone."
      : `The request was refused: ${code}.`;
    return new ArmAnswerError(409, code, message);
  }

  /** The VM's NICs: each one that exists and that no other VM uses. */
  #vmNics(group: AzureResourceGroupSeed, properties: Json): VmRecord["nics"] {
    const references = asArray(asObject(properties.networkProfile).networkInterfaces);
    if (references.length === 0) {
      throw new ArmAnswerError(
        400,
        "InvalidParameter",
        "Required parameter 'networkProfile' is missing (null).",
        "networkProfile",
      );
    }
    return references.map((item) => {
      const reference = asObject(item);
      const id = asString(reference.id) ?? "";
      const parsed = parseId(id, "networkInterfaces");
      const key = parsed ? keyOf(parsed.resourceGroup, parsed.name) : "";
      if (!parsed || !this.#nics.has(key)) {
        throw new ArmAnswerError(
          400,
          "InvalidResourceReference",
          `Resource ${id} referenced by resource ${group.name} was not found.`,
        );
      }
      const user = this.#vmUsing(key);
      if (user !== undefined) {
        throw new ArmAnswerError(
          400,
          "NicInUse",
          `Network Interface ${parsed.name} is used by existing resource ${user.name}.`,
        );
      }
      return { key, deleteOption: deleteOptionOf(asObject(reference.properties).deleteOption) };
    });
  }

  // -------------------------------------------------------------------------------------------
  // A VM's life: boot, failure, delete.

  #later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
  }

  #start(vm: VmRecord): void {
    if (this.refusal?.during === "operation") {
      const refusal = this.#refusal(vm.vmSize, vm.location);
      this.#later(0, () => this.#fail(vm, refusal.code, refusal.message));
      return;
    }
    if (this.#slow) {
      vm.held = true;
      return;
    }
    this.#later(this.#options.bootDelayMs ?? 0, () => this.#boot(vm));
  }

  setSlow(on: boolean): void {
    this.#slow = on;
    if (on) return;
    for (const vm of this.#vms.values()) {
      if (!vm.held) continue;
      vm.held = false;
      this.#later(this.#options.bootDelayMs ?? 0, () => this.#boot(vm));
    }
  }

  #fail(vm: VmRecord, code: string, message: string): void {
    if (vm.provisioningState !== "Creating") return;
    vm.provisioningState = "Failed";
    this.#finish(vm.createOperation, "Failed", { code, message });
  }

  #boot(vm: VmRecord): void {
    if (vm.provisioningState !== "Creating" || this.#stopped) return;
    const script = vm.customData;
    if (script === null) {
      this.#fail(vm, "OSProvisioningClientError", "The VM has no custom data to boot with.");
      return;
    }
    const address = this.#addresses.take();
    vm.booting = bootInstance(address, script).then(
      async (booted) => {
        if (vm.provisioningState !== "Creating" || this.#stopped) {
          await booted.proxy.close();
          return;
        }
        vm.booted = booted;
        vm.address = address;
        const ip = this.#publicIpOf(vm);
        if (ip) ip.ipAddress = address;
        vm.provisioningState = "Succeeded";
        this.#finish(vm.createOperation, "Succeeded");
      },
      (error: unknown) => {
        const reason = error instanceof Error ? error.message : String(error);
        this.#fail(vm, "OSProvisioningClientError", `The instance did not boot: ${reason}`);
      },
    );
  }

  #publicIpOf(vm: VmRecord): IpRecord | undefined {
    const nic = vm.nics.length > 0 ? this.#nics.get(vm.nics[0].key) : undefined;
    return nic?.publicIp === undefined ? undefined : this.#ips.get(nic.publicIp.key);
  }

  #deleteVm(resourceGroup: string, name: string) {
    const key = keyOf(resourceGroup, name);
    const vm = this.#vms.get(key);
    if (vm === undefined) return { status: 204 };
    // A delete under way: the same operation, as ARM answers a repeated delete.
    if (vm.deleteOperation === undefined) {
      vm.provisioningState = "Deleting";
      vm.held = false;
      if (vm.createOperation.status === "InProgress") {
        this.#finish(vm.createOperation, "Failed", {
          code: "OperationPreempted",
          message: "The operation was preempted by a delete.",
        });
      }
      vm.deleteOperation = this.#operation(COMPUTE, vm.location, "InProgress");
      const operation = vm.deleteOperation;
      this.#later(0, () => {
        this.#tearDown(key, vm).then(
          () => this.#finish(operation, "Succeeded"),
          (error: unknown) =>
            this.#finish(operation, "Failed", {
              code: "InternalExecutionError",
              message: String(error),
            }),
        );
      });
    }
    return { status: 202, headers: this.#asyncHeaders(vm.deleteOperation, true) };
  }

  /** Stops the VM's proxy, then removes it and what its delete options take with it. */
  async #tearDown(key: string, vm: VmRecord): Promise<void> {
    await vm.booting?.catch(() => {});
    await vm.booted?.proxy.close();
    vm.booted = undefined;
    this.#vms.delete(key);
    for (const reference of vm.nics) {
      const nic = this.#nics.get(reference.key);
      if (reference.deleteOption !== "Delete" || nic === undefined) continue;
      this.#nics.delete(reference.key);
      if (nic.publicIp?.deleteOption === "Delete") this.#ips.delete(nic.publicIp.key);
    }
    if (vm.disk.deleteOption === "Delete") this.#disks.delete(vm.disk.key);
  }

  // -------------------------------------------------------------------------------------------
  // What the test observes, and the end.

  instances(): EmulatedAzureVm[] {
    return [...this.#vms.values()].map((vm) => ({
      name: vm.name,
      resourceGroup: vm.resourceGroup,
      provisioningState: vm.provisioningState,
      tags: { ...vm.tags },
      customData: vm.customData,
      address: vm.address,
      createdAt: vm.createdAt,
    }));
  }

  resources(): string[] {
    return [
      ...[...this.#nics.values()].map((nic) => nic.name),
      ...[...this.#ips.values()].map((ip) => ip.name),
      ...[...this.#disks.values()].map((disk) => disk.name),
    ].sort();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    const vms = [...this.#vms.values()];
    await Promise.all(vms.map((vm) => vm.booting?.catch(() => {})));
    await Promise.all(vms.map((vm) => vm.booted?.proxy.close()));
  }
}
