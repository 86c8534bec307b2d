/**
 * A Compute Engine (v1) emulator for the GCP client's tests: an HTTP server on 127.0.0.1 (HTTPS
 * with the test certificate when `tls`) speaking the REST API's JSON, and Google's OAuth2 token
 * endpoint.
 *
 * THE INSTANCE BOOT IS THE EMULATOR'S STAND-IN. A real instance runs its `startup-script`
 * metadata item, which installs Squid with the instance's login; an emulated one reads that login
 * from the script (cloud-boot.ts `bootInstance`) and starts Debian's tinyproxy with it on an
 * address of its own in 127/8, which is the instance's `natIP`. Nothing else boots.
 *
 * What it serves, below `/compute/v1/projects/<project>`:
 *   GET    /zones?maxResults=&pageToken=               zones.list
 *   GET    /zones/<zone>                               zones.get
 *   GET    /zones/<zone>/machineTypes/<type>           machineTypes.get
 *   GET    /global/networks/<network>                  networks.get
 *   GET    /zones/<zone>/instances?filter=&maxResults=&pageToken=   instances.list
 *   POST   /zones/<zone>/instances                     instances.insert
 *   GET    /zones/<zone>/instances/<name>              instances.get
 *   DELETE /zones/<zone>/instances/<name>              instances.delete
 *   GET    /zones/<zone>/operations/<operation>        zoneOperations.get
 *   POST   /zones/<zone>/operations/<operation>/wait   zoneOperations.wait
 * and `POST /token` (grant_type urn:ietf:params:oauth:grant-type:jwt-bearer): the assertion's
 * RS256 signature is checked against the key pair the emulator made for its account, its
 * audience must be this token URL or Google's, its lifetime an hour at most, its scope Compute's
 * or cloud-platform. API calls need `Authorization: Bearer <a token it issued>` (401 otherwise),
 * and a token reaches its own account's project only (403 otherwise).
 *
 * Errors are Google's shape: `{"error": {"code", "message", "errors": [{"message", "domain",
 * "reason"}], "status"}}`; the token endpoint's are OAuth2's `{"error", "error_description"}`.
 * Inserts and deletes answer zone operations (PENDING, RUNNING, DONE, with `selfLink`,
 * `targetLink`, and `error` with `httpErrorStatusCode` when one fails). An instance starts
 * PROVISIONING; its insert operation turns RUNNING when its boot starts (after `bootDelayMs`)
 * and DONE once the proxy listens, the instance RUNNING with
 * `networkInterfaces[0].accessConfigs[0].natIP`. A delete turns it STOPPING, stops its proxy,
 * then removes it and finishes the operation.
 *
 * The list filter is the AIP-160 subset Compute documents: restrictions `field = value`,
 * `field != value`, `field:*` on `name`, `status` and `labels.<key>`, joined by AND, OR (which
 * binds tighter, as in AIP-160), NOT, juxtaposition (AND) and parentheses.
 *
 * Switches the test flips at run time: `refuseCreates`, `slowCreates`, `slowDeletes`,
 * `failListings`, `loseOperations`, `stopInstance`; and what it observes: `instances()`,
 * `calls` (per method), `url`, `tokenUrl`.
 */
import { generateKeyPairSync, type KeyObject, randomBytes, randomInt } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import { decodeJwt, decodeProtectedHeader, type JWTPayload, jwtVerify } from "jose";
import { testCertificate } from "../certs.ts";
import { freePort } from "../ports.ts";
import { bootInstance, InstanceAddresses } from "./cloud-boot.ts";
import type { Tinyproxy } from "./tinyproxy.ts";

const GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const SCOPES = [
  "https://www.googleapis.com/auth/compute",
  "https://www.googleapis.com/auth/cloud-platform",
];
const TOKEN_LIFETIME_S = 3599;
const MAX_ASSERTION_LIFETIME_S = 3600;
/** Compute's largest page. */
const MAX_PAGE_SIZE = 500;
/** Compute's zoneOperations.wait returns after about two minutes at most. */
const OPERATION_WAIT_MS = 120_000;
const MAX_BODY_BYTES = 1024 * 1024;
const INSTANCE_NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;
const LABEL_KEY = /^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$/u;
const LABEL_VALUE = /^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$/u;

export const GCP_METHODS = [
  "token",
  "zones.list",
  "zones.get",
  "machineTypes.get",
  "networks.get",
  "instances.list",
  "instances.insert",
  "instances.get",
  "instances.delete",
  "zoneOperations.get",
  "zoneOperations.wait",
  /** Any other path (a client that posts to a key file's own token_uri, say). */
  "unknown",
] as const;
export type GcpMethod = (typeof GCP_METHODS)[number];

export interface GcpEmulatorOptions {
  /** Projects, each with one service account that may use it (default one: octoprox-test). */
  accounts?: readonly string[];
  /** Zones every project has (default europe-west1-b, us-central1-a). */
  zones?: readonly string[];
  /** Machine types every zone has (default e2-micro, e2-small, e2-medium, n2-standard-2). */
  machineTypes?: readonly string[];
  /** Networks every project has (default: default). */
  networks?: readonly string[];
  /** Before an instance's boot starts (default 0). */
  bootDelayMs?: number;
  /** The most instances.list answers per page (default and at most 500, as Compute). */
  maxPageSize?: number;
  /** Serve HTTPS with the test certificate (testkit/certs.ts): clients trust its CA. */
  tls?: boolean;
  /** Where instances' public addresses come from; a random /16 of 127/8 unless told. */
  addresses?: InstanceAddresses;
}

/** An instance as the test sees it. */
export interface EmulatedInstance {
  project: string;
  zone: string;
  name: string;
  status: string;
  labels: Readonly<Record<string, string>>;
  /** The metadata items, by key. */
  metadata: Readonly<Record<string, string>>;
  /** The public address (natIP), once booted. */
  address: string | null;
  /** The booted proxy's port, while it runs. */
  proxyPort: number | null;
  createdAt: Date;
}

export interface GcpEmulator {
  /** The API's base URL (OCTOPROX_GCP_ENDPOINT): `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** The token endpoint (OCTOPROX_GCP_TOKEN_URL): `<url>/token`. */
  readonly tokenUrl: string;
  /** With `tls`: the CA to trust. */
  readonly ca: string | undefined;
  /** Requests so far, per method (every request, answered or refused). */
  readonly calls: Readonly<Record<GcpMethod, number>>;
  /** The service account key file (JSON text) of a project's account. */
  serviceAccount(projectId: string): string;
  instances(): EmulatedInstance[];
  /**
   * Inserts from now on are refused with `reason` (until `false`): ZONE_RESOURCE_POOL_EXHAUSTED
   * (the default) and QUOTA_EXCEEDED as failed operations, as Compute reports them;
   * rateLimitExceeded as a 429; any other reason as a 400 with that reason.
   */
  refuseCreates(reason?: string | false): void;
  /** While on, instances stay PROVISIONING (their insert operations RUNNING), never booting. */
  slowCreates(on: boolean): void;
  /** While on, delete operations stay PENDING and their instances as they were. */
  slowDeletes(on: boolean): void;
  /** While on, instances.list answers 503. */
  failListings(on: boolean): void;
  /** While on, zoneOperations get and wait answer 404, as if the cloud lost them. */
  loseOperations(on: boolean): void;
  /** The instance turns TERMINATED (stopped outside Octoprox, or preempted): its proxy stops. */
  stopInstance(name: string): Promise<void>;
  /** Stops the server and every booted proxy (safe twice). */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Google's answers.

interface Reply {
  status: number;
  body: unknown;
}

const STATUS_WORDS: Readonly<Record<number, string>> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  409: "ALREADY_EXISTS",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
};

function googleError(code: number, reason: string, message: string): Reply {
  return {
    status: code,
    body: {
      error: {
        code,
        message,
        errors: [{ message, domain: "global", reason }],
        status: STATUS_WORDS[code] ?? "UNKNOWN",
      },
    },
  };
}

const notFound = (resource: string) =>
  googleError(404, "notFound", `The resource '${resource}' was not found`);

const invalidField = (field: string, value: string, why: string) =>
  googleError(400, "invalid", `Invalid value for field '${field}': '${value}'. ${why}`);

function oauthError(status: number, error: string, description: string): Reply {
  return { status, body: { error, error_description: description } };
}

/** Operation failures, as Compute reports a refused insert: on the operation, not the call. */
const OPERATION_REFUSALS: Readonly<
  Record<string, { status: number; statusText: string; message: (zone: string) => string }>
> = {
  ZONE_RESOURCE_POOL_EXHAUSTED: {
    status: 503,
    statusText: "SERVICE UNAVAILABLE",
    message: (zone) =>
      `The zone '${zone}' does not have enough resources available to fulfill the request. ` +
      "Try a different zone, or try again later.",
  },
  QUOTA_EXCEEDED: {
    status: 403,
    statusText: "FORBIDDEN",
    message: () => "Quota 'CPUS' exceeded.  Limit: 8.0 in region.",
  },
};

// ---------------------------------------------------------------------------------------------
// Service accounts and tokens.

interface Account {
  project: string;
  email: string;
  keyId: string;
  clientId: string;
  privatePem: string;
  publicKey: KeyObject;
}

function makeAccount(project: string): Account {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return {
    project,
    email: `octoprox@${project}.iam.gserviceaccount.com`,
    keyId: randomBytes(20).toString("hex"),
    clientId: String(randomInt(1e9, 1e10 - 1)) + String(randomInt(1e9, 1e10 - 1)),
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKey,
  };
}

/** A key file as the console downloads it, Google's token_uri included. */
function keyFile(account: Account): string {
  return JSON.stringify(
    {
      type: "service_account",
      project_id: account.project,
      private_key_id: account.keyId,
      private_key: account.privatePem,
      client_email: account.email,
      client_id: account.clientId,
      auth_uri: "https://accounts.google.com/o/oauth2/auth",
      token_uri: GOOGLE_TOKEN_URL,
      auth_provider_x509_cert_url: "https://www.googleapis.com/oauth2/v1/certs",
      client_x509_cert_url: `https://www.googleapis.com/robot/v1/metadata/x509/${
        encodeURIComponent(account.email)
      }`,
      universe_domain: "googleapis.com",
    },
    null,
    2,
  );
}

/** Why an assertion is refused, in Google's words, or the account it signs for. */
async function checkAssertion(
  assertion: string,
  accounts: ReadonlyMap<string, Account>,
  audiences: readonly string[],
): Promise<Account | Reply> {
  let email: unknown;
  try {
    if (decodeProtectedHeader(assertion).alg !== "RS256") {
      return oauthError(400, "invalid_grant", "Invalid JWT: the algorithm must be RS256.");
    }
    email = decodeJwt(assertion).iss;
  } catch {
    return oauthError(400, "invalid_grant", "Invalid JWT: malformed.");
  }
  const account = typeof email === "string" ? accounts.get(email) : undefined;
  if (account === undefined) {
    return oauthError(400, "invalid_grant", "Invalid grant: account not found");
  }
  const tooLong = oauthError(
    400,
    "invalid_grant",
    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable " +
      "timeframe. Check your iat and exp values in the JWT claim.",
  );
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(assertion, account.publicKey, {
      algorithms: ["RS256"],
      issuer: account.email,
      audience: [...audiences],
      clockTolerance: 60,
      requiredClaims: ["iat", "exp"],
    }));
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ERR_JWS_SIGNATURE_VERIFICATION_FAILED") {
      return oauthError(400, "invalid_grant", "Invalid JWT Signature.");
    }
    if (code === "ERR_JWT_CLAIM_VALIDATION_FAILED") {
      return oauthError(400, "invalid_grant", "Invalid JWT: Failed audience check.");
    }
    return tooLong;
  }
  if (payload.exp! - payload.iat! > MAX_ASSERTION_LIFETIME_S) return tooLong;
  const scopes = typeof payload.scope === "string" ? payload.scope.split(" ") : [];
  if (!scopes.some((scope) => SCOPES.includes(scope))) {
    return oauthError(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.");
  }
  return account;
}

// ---------------------------------------------------------------------------------------------
// Instances and operations.

interface Instance {
  project: string;
  zone: string;
  name: string;
  id: string;
  status: string;
  labels: Record<string, string>;
  metadata: { key: string; value: string }[];
  machineType: string;
  network: string;
  address: string | null;
  proxy: Tinyproxy | undefined;
  createdAt: Date;
  insert: Operation;
  /** The boot under way, if any. */
  booting: Promise<void> | undefined;
  /** The delete under way, if any. */
  deleting: Promise<void> | undefined;
  removed: boolean;
}

interface Operation {
  project: string;
  zone: string;
  name: string;
  id: string;
  type: "insert" | "delete";
  targetName: string;
  targetId: string;
  user: string;
  status: "PENDING" | "RUNNING" | "DONE";
  insertTime: Date;
  startTime: Date | undefined;
  endTime: Date | undefined;
  error: { code: string; message: string; status: number; statusText: string } | undefined;
  /** Resolves when DONE (waits hang on it). */
  done: Promise<void>;
  finish: () => void;
}

function numericId(): string {
  return String(randomInt(1e9, 1e10 - 1)) + String(randomInt(1e8, 1e9 - 1));
}

function timestamp(date: Date): string {
  return date.toISOString();
}

// ---------------------------------------------------------------------------------------------
// The list filter (AIP-160's subset Compute documents).

type Predicate = (instance: Instance) => boolean;

class FilterError extends Error {}

const FILTER_TOKEN = /\s*(\(|\)|!=|=|:|"(?:[^"\\]|\\.)*"|[^\s()=!:"]+)/y;

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  FILTER_TOKEN.lastIndex = 0;
  while (FILTER_TOKEN.lastIndex < text.length) {
    if (/^\s*$/.test(text.slice(FILTER_TOKEN.lastIndex))) break;
    const match = FILTER_TOKEN.exec(text);
    if (match === null) throw new FilterError("unreadable");
    tokens.push(match[1]);
  }
  return tokens;
}

/** The fields a filter may name: `name`, `status`, `labels.<key>`. */
const FILTER_FIELD = /^(name|status|labels\.[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]*)$/u;

function fieldValue(instance: Instance, field: string): string | undefined {
  if (field === "name") return instance.name;
  if (field === "status") return instance.status;
  return instance.labels[field.slice("labels.".length)];
}

/** Recursive descent: expression = sequence {AND sequence}; sequence = factor {factor}. */
class FilterParser {
  readonly #tokens: string[];
  #at = 0;
  constructor(text: string) {
    this.#tokens = tokenize(text);
  }

  parse(): Predicate {
    if (this.#tokens.length === 0) return () => true;
    const predicate = this.#expression();
    if (this.#at < this.#tokens.length) throw new FilterError("trailing tokens");
    return predicate;
  }

  #peek(): string | undefined {
    return this.#tokens[this.#at];
  }

  #take(): string {
    const token = this.#tokens[this.#at++];
    if (token === undefined) throw new FilterError("ends early");
    return token;
  }

  #expression(): Predicate {
    const parts = [this.#sequence()];
    while (this.#peek() === "AND") {
      this.#take();
      parts.push(this.#sequence());
    }
    return (instance) => parts.every((part) => part(instance));
  }

  #sequence(): Predicate {
    const parts = [this.#factor()];
    for (let next = this.#peek(); next !== undefined && next !== ")" && next !== "AND";) {
      parts.push(this.#factor());
      next = this.#peek();
    }
    return (instance) => parts.every((part) => part(instance));
  }

  #factor(): Predicate {
    const parts = [this.#term()];
    while (this.#peek() === "OR") {
      this.#take();
      parts.push(this.#term());
    }
    return (instance) => parts.some((part) => part(instance));
  }

  #term(): Predicate {
    if (this.#peek() === "NOT") {
      this.#take();
      const inner = this.#simple();
      return (instance) => !inner(instance);
    }
    return this.#simple();
  }

  #simple(): Predicate {
    if (this.#peek() === "(") {
      this.#take();
      const inner = this.#expression();
      if (this.#take() !== ")") throw new FilterError("unclosed parenthesis");
      return inner;
    }
    return this.#restriction();
  }

  #restriction(): Predicate {
    const field = this.#take();
    const operator = this.#take();
    const raw = this.#take();
    if (!FILTER_FIELD.test(field)) throw new FilterError(`unknown field ${field}`);
    const value = raw.startsWith('"') ? JSON.parse(raw) as string : raw;
    if (operator === ":" && value === "*") {
      return (instance) => fieldValue(instance, field) !== undefined;
    }
    if (operator === "=") return (instance) => fieldValue(instance, field) === value;
    if (operator === "!=") return (instance) => fieldValue(instance, field) !== value;
    throw new FilterError(`unsupported operator ${operator}`);
  }
}

function parseFilter(text: string): Predicate {
  return new FilterParser(text).parse();
}

// ---------------------------------------------------------------------------------------------
// The emulator.

type Handler = (request: ApiRequest) => Reply | Promise<Reply>;

interface ApiRequest {
  account: Account;
  project: string;
  params: string[];
  url: URL;
  body: unknown;
}

interface Route {
  method: string;
  pattern: RegExp;
  name: GcpMethod;
  handle: Handler;
}

class Emulator {
  readonly zones: ReadonlySet<string>;
  readonly machineTypes: ReadonlySet<string>;
  readonly networks: ReadonlySet<string>;
  readonly bootDelayMs: number;
  readonly maxPageSize: number;
  readonly calls = Object.fromEntries(GCP_METHODS.map((name) => [name, 0])) as Record<
    GcpMethod,
    number
  >;
  readonly accountsByProject = new Map<string, Account>();
  readonly accountsByEmail = new Map<string, Account>();
  readonly tokens = new Map<string, { account: Account; expiresAtMs: number }>();
  readonly instanceMap = new Map<string, Instance>();
  readonly operations = new Map<string, Operation>();
  readonly addresses: InstanceAddresses;
  readonly timers = new Set<ReturnType<typeof setTimeout>>();
  /** Boots held by slowCreates, deletes held by slowDeletes. */
  readonly heldBoots = new Set<Instance>();
  readonly heldDeletes = new Set<{ instance: Instance; operation: Operation }>();
  /** Work under way (boots, deletes), awaited by close. */
  readonly work = new Set<Promise<void>>();
  baseUrl = "";
  tokenUrl = "";
  refusal: string | false = false;
  slowCreating = false;
  slowDeleting = false;
  failingListings = false;
  losingOperations = false;
  closed = false;
  readonly routes: Route[];

  constructor(options: GcpEmulatorOptions) {
    this.addresses = options.addresses ?? new InstanceAddresses();
    for (const project of options.accounts ?? ["octoprox-test"]) {
      const account = makeAccount(project);
      this.accountsByProject.set(project, account);
      this.accountsByEmail.set(account.email, account);
    }
    this.zones = new Set(options.zones ?? ["europe-west1-b", "us-central1-a"]);
    this.machineTypes = new Set(
      options.machineTypes ?? ["e2-micro", "e2-small", "e2-medium", "n2-standard-2"],
    );
    this.networks = new Set(options.networks ?? ["default"]);
    this.bootDelayMs = options.bootDelayMs ?? 0;
    this.maxPageSize = Math.min(options.maxPageSize ?? MAX_PAGE_SIZE, MAX_PAGE_SIZE);
    const zone = "/zones/([^/]+)";
    const route = (method: string, path: string, name: GcpMethod, handle: Handler): Route => ({
      method,
      pattern: new RegExp(`^/compute/v1/projects/([^/]+)${path}$`),
      name,
      handle,
    });
    this.routes = [
      route("GET", "/zones", "zones.list", (r) => this.listZones(r)),
      route("GET", zone, "zones.get", (r) => this.getZone(r)),
      route("GET", `${zone}/machineTypes/([^/]+)`, "machineTypes.get", (r) => this.getType(r)),
      route("GET", "/global/networks/([^/]+)", "networks.get", (r) => this.getNetwork(r)),
      route("GET", `${zone}/instances`, "instances.list", (r) => this.list(r)),
      route("POST", `${zone}/instances`, "instances.insert", (r) => this.insert(r)),
      route("GET", `${zone}/instances/([^/]+)`, "instances.get", (r) => this.get(r)),
      route("DELETE", `${zone}/instances/([^/]+)`, "instances.delete", (r) => this.remove(r)),
      route("GET", `${zone}/operations/([^/]+)`, "zoneOperations.get", (r) => this.operation(r)),
      route("POST", `${zone}/operations/([^/]+)/wait`, "zoneOperations.wait", (r) => this.wait(r)),
    ];
  }

  // ----- links

  projectLink(project: string): string {
    return `${this.baseUrl}/compute/v1/projects/${project}`;
  }

  zoneLink(project: string, zone: string): string {
    return `${this.projectLink(project)}/zones/${zone}`;
  }

  // ----- the HTTP front

  async handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    let reply: Reply;
    try {
      reply = await this.answer(request);
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      reply = googleError(500, "internalError", `Internal error: ${why}`);
    }
    const text = JSON.stringify(reply.body);
    response.writeHead(reply.status, {
      "content-type": "application/json; charset=UTF-8",
      "content-length": Buffer.byteLength(text),
    });
    response.end(text);
  }

  async answer(request: http.IncomingMessage): Promise<Reply> {
    const url = new URL(request.url ?? "/", this.baseUrl);
    const text = await readBody(request);
    if (url.pathname === "/token") {
      this.calls.token++;
      return request.method === "POST"
        ? await this.token(text)
        : googleError(405, "methodNotAllowed", "Method not allowed");
    }
    for (const route of this.routes) {
      const match = request.method === route.method ? route.pattern.exec(url.pathname) : null;
      if (match === null) continue;
      this.calls[route.name]++;
      const account = this.bearer(request);
      if (account === undefined) {
        return googleError(401, "authError", "Request had invalid authentication credentials.");
      }
      const [project, ...params] = match.slice(1).map(decodeURIComponent);
      if (account.project !== project) {
        return googleError(
          403,
          "forbidden",
          `Required 'compute.${route.name}' permission for 'projects/${project}'`,
        );
      }
      let body: unknown;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        return googleError(400, "parseError", "Parse Error");
      }
      return await route.handle({ account, project, params, url, body });
    }
    this.calls.unknown++;
    return googleError(404, "notFound", `Not Found: ${url.pathname}`);
  }

  bearer(request: http.IncomingMessage): Account | undefined {
    const match = /^Bearer (\S+)$/.exec(request.headers.authorization ?? "");
    const token = match === null ? undefined : this.tokens.get(match[1]);
    return token !== undefined && Date.now() < token.expiresAtMs ? token.account : undefined;
  }

  async token(text: string): Promise<Reply> {
    const form = new URLSearchParams(text);
    if (form.get("grant_type") !== JWT_BEARER) {
      return oauthError(400, "unsupported_grant_type", "Invalid grant_type.");
    }
    const checked = await checkAssertion(form.get("assertion") ?? "", this.accountsByEmail, [
      this.tokenUrl,
      GOOGLE_TOKEN_URL,
    ]);
    if (!("publicKey" in checked)) return checked;
    const token = `ya29.emulated-${randomBytes(24).toString("base64url")}`;
    this.tokens.set(token, { account: checked, expiresAtMs: Date.now() + TOKEN_LIFETIME_S * 1000 });
    return {
      status: 200,
      body: { access_token: token, expires_in: TOKEN_LIFETIME_S, token_type: "Bearer" },
    };
  }

  // ----- zones, machine types, networks

  /** The zone's refusal for calls below it (Compute: 400 on field 'zone'), or undefined. */
  unknownZone(zone: string): Reply | undefined {
    return this.zones.has(zone) ? undefined : invalidField("zone", zone, "Unknown zone.");
  }

  zoneJson(project: string, zone: string): Record<string, unknown> {
    const region = zone.replace(/-[a-z]$/, "");
    return {
      kind: "compute#zone",
      id: String(2000 + [...this.zones].indexOf(zone)),
      name: zone,
      status: "UP",
      region: `${this.projectLink(project)}/regions/${region}`,
      selfLink: this.zoneLink(project, zone),
    };
  }

  listZones({ project, url }: ApiRequest): Reply {
    const asked = Number(url.searchParams.get("maxResults") ?? MAX_PAGE_SIZE);
    const pageSize = Math.max(1, Math.min(asked || MAX_PAGE_SIZE, MAX_PAGE_SIZE));
    const token = url.searchParams.get("pageToken");
    const offset = token ? Number(Buffer.from(token, "base64url").toString()) || 0 : 0;
    const zones = [...this.zones];
    const body: Record<string, unknown> = {
      kind: "compute#zoneList",
      id: `projects/${project}/zones`,
      items: zones.slice(offset, offset + pageSize).map((zone) => this.zoneJson(project, zone)),
      selfLink: `${this.projectLink(project)}/zones`,
    };
    if (offset + pageSize < zones.length) {
      body.nextPageToken = Buffer.from(String(offset + pageSize)).toString("base64url");
    }
    return { status: 200, body };
  }

  getZone({ project, params: [zone] }: ApiRequest): Reply {
    if (!this.zones.has(zone)) return notFound(`projects/${project}/zones/${zone}`);
    return { status: 200, body: this.zoneJson(project, zone) };
  }

  getType({ project, params: [zone, type] }: ApiRequest): Reply {
    const link = `projects/${project}/zones/${zone}/machineTypes/${type}`;
    if (!this.zones.has(zone) || !this.machineTypes.has(type)) return notFound(link);
    return {
      status: 200,
      body: {
        kind: "compute#machineType",
        name: type,
        zone,
        guestCpus: 2,
        memoryMb: 1024,
        selfLink: `${this.zoneLink(project, zone)}/machineTypes/${type}`,
      },
    };
  }

  getNetwork({ project, params: [network] }: ApiRequest): Reply {
    if (!this.networks.has(network)) {
      return notFound(`projects/${project}/global/networks/${network}`);
    }
    return {
      status: 200,
      body: {
        kind: "compute#network",
        name: network,
        autoCreateSubnetworks: true,
        selfLink: `${this.projectLink(project)}/global/networks/${network}`,
      },
    };
  }

  // ----- instances

  key(project: string, zone: string, name: string): string {
    return `${project}/${zone}/${name}`;
  }

  instanceJson(instance: Instance): Record<string, unknown> {
    const { project, zone } = instance;
    const accessConfig: Record<string, unknown> = {
      kind: "compute#accessConfig",
      type: "ONE_TO_ONE_NAT",
      name: "External NAT",
      networkTier: "PREMIUM",
    };
    if (instance.address !== null) accessConfig.natIP = instance.address;
    return {
      kind: "compute#instance",
      id: instance.id,
      creationTimestamp: timestamp(instance.createdAt),
      name: instance.name,
      machineType: `${this.zoneLink(project, zone)}/machineTypes/${instance.machineType}`,
      status: instance.status,
      zone: this.zoneLink(project, zone),
      networkInterfaces: [{
        kind: "compute#networkInterface",
        name: "nic0",
        network: `${this.projectLink(project)}/global/networks/${instance.network}`,
        networkIP: `10.128.0.${2 + (Number(instance.id.slice(-2)) % 250)}`,
        accessConfigs: [accessConfig],
      }],
      disks: [{
        kind: "compute#attachedDisk",
        type: "PERSISTENT",
        mode: "READ_WRITE",
        boot: true,
        autoDelete: true,
        deviceName: "persistent-disk-0",
        source: `${this.zoneLink(project, zone)}/disks/${instance.name}`,
      }],
      metadata: { kind: "compute#metadata", fingerprint: "emulated=", items: instance.metadata },
      labels: instance.labels,
      labelFingerprint: "emulated=",
      selfLink: `${this.zoneLink(project, zone)}/instances/${instance.name}`,
    };
  }

  get({ project, params: [zone, name] }: ApiRequest): Reply {
    const unknown = this.unknownZone(zone);
    if (unknown) return unknown;
    const instance = this.instanceMap.get(this.key(project, zone, name));
    if (instance === undefined) {
      return notFound(`projects/${project}/zones/${zone}/instances/${name}`);
    }
    return { status: 200, body: this.instanceJson(instance) };
  }

  list({ project, params: [zone], url }: ApiRequest): Reply {
    const unknown = this.unknownZone(zone);
    if (unknown) return unknown;
    if (this.failingListings) {
      return googleError(503, "backendError", "The service is currently unavailable.");
    }
    const filter = url.searchParams.get("filter") ?? "";
    let predicate: Predicate;
    try {
      predicate = parseFilter(filter);
    } catch {
      return invalidField("filter", filter, "Invalid list filter expression.");
    }
    const asked = Number(url.searchParams.get("maxResults") ?? MAX_PAGE_SIZE);
    const pageSize = Math.max(1, Math.min(asked || MAX_PAGE_SIZE, this.maxPageSize));
    const token = url.searchParams.get("pageToken");
    const offset = token ? Number(Buffer.from(token, "base64url").toString()) || 0 : 0;
    const matching = [...this.instanceMap.values()]
      .filter((instance) => instance.project === project && instance.zone === zone)
      .filter(predicate)
      .sort((a, b) => a.name.localeCompare(b.name));
    const page = matching.slice(offset, offset + pageSize);
    const body: Record<string, unknown> = {
      kind: "compute#instanceList",
      id: `projects/${project}/zones/${zone}/instances`,
      selfLink: `${this.zoneLink(project, zone)}/instances`,
    };
    // Google leaves out an empty list's items, and the token of the last page.
    if (page.length > 0) body.items = page.map((instance) => this.instanceJson(instance));
    if (offset + pageSize < matching.length) {
      body.nextPageToken = Buffer.from(String(offset + pageSize)).toString("base64url");
    }
    return { status: 200, body };
  }

  /** Why an insert's body is refused, or undefined. */
  invalidInsert(project: string, zone: string, body: InsertBody): Reply | undefined {
    const name = String(body.name ?? "");
    if (!INSTANCE_NAME.test(name)) {
      return invalidField(
        "resource.name",
        name,
        "Must be a match of regex '[a-z]([-a-z0-9]*[a-z0-9])?'",
      );
    }
    const machineType = String(body.machineType ?? "");
    const type = /(?:^|\/)zones\/([^/]+)\/machineTypes\/([^/]+)$/.exec(machineType);
    if (type === null || type[1] !== zone || !this.machineTypes.has(type[2])) {
      return invalidField(
        "resource.machineType",
        machineType,
        `Machine type with name '${type?.[2] ?? machineType}' does not exist in zone '${zone}'.`,
      );
    }
    const network = String(body.networkInterfaces?.[0]?.network ?? "global/networks/default");
    const networkName = /(?:^|\/)global\/networks\/([^/]+)$/.exec(network)?.[1] ?? network;
    if (!this.networks.has(networkName)) {
      return notFound(`projects/${project}/global/networks/${networkName}`);
    }
    const boot = body.disks?.find((disk) => disk.boot);
    if (typeof boot?.initializeParams?.sourceImage !== "string") {
      return invalidField("resource.disks", "", "A boot disk with a source image is required.");
    }
    return this.invalidLabels(body.labels ?? {}) ??
      this.invalidMetadata(body.metadata?.items ?? []);
  }

  invalidLabels(labels: Record<string, unknown>): Reply | undefined {
    const entries = Object.entries(labels);
    const bad = entries.find(([key, value]) =>
      !LABEL_KEY.test(key) || typeof value !== "string" || !LABEL_VALUE.test(value)
    );
    if (entries.length > 64 || bad !== undefined) {
      return invalidField(
        "resource.labels",
        bad?.[0] ?? "",
        "Label keys and values must be lower case.",
      );
    }
    return undefined;
  }

  invalidMetadata(items: { key?: unknown; value?: unknown }[]): Reply | undefined {
    const bad = items.find((item) =>
      typeof item.key !== "string" || !/^[a-zA-Z0-9-_]{1,128}$/.test(item.key) ||
      typeof item.value !== "string"
    );
    if (bad !== undefined) {
      return invalidField("resource.metadata", String(bad.key ?? ""), "Invalid metadata item.");
    }
    const bytes = items.reduce((sum, item) => sum + Buffer.byteLength(String(item.value)), 0);
    if (bytes > 512 * 1024) {
      return invalidField("resource.metadata", "", "Metadata is larger than 512 KB.");
    }
    return undefined;
  }

  insert({ account, project, params: [zone], body }: ApiRequest): Reply {
    const unknown = this.unknownZone(zone);
    if (unknown) return unknown;
    const insert = (body ?? {}) as InsertBody;
    const invalid = this.invalidInsert(project, zone, insert);
    if (invalid) return invalid;
    const name = String(insert.name);
    if (this.instanceMap.has(this.key(project, zone, name))) {
      return googleError(
        409,
        "alreadyExists",
        `The resource 'projects/${project}/zones/${zone}/instances/${name}' already exists`,
      );
    }
    if (this.refusal !== false && !(this.refusal in OPERATION_REFUSALS)) {
      return this.refusal === "rateLimitExceeded"
        ? googleError(429, "rateLimitExceeded", "Rate Limit Exceeded")
        : googleError(400, this.refusal, `The request was refused (${this.refusal}).`);
    }
    const id = numericId();
    const operation = this.newOperation(project, zone, "insert", name, id, account.email);
    if (this.refusal !== false) {
      const refusal = OPERATION_REFUSALS[this.refusal];
      const code = this.refusal;
      operation.status = "RUNNING";
      operation.startTime = new Date();
      // Compute answers the call, then fails the operation: no instance is left.
      this.later(0, () => {
        operation.error = {
          code,
          message: refusal.message(`projects/${project}/zones/${zone}`),
          status: refusal.status,
          statusText: refusal.statusText,
        };
        operation.finish();
      });
      return { status: 200, body: this.operationJson(operation) };
    }
    const instance: Instance = {
      project,
      zone,
      name,
      id,
      status: "PROVISIONING",
      labels: { ...(insert.labels ?? {}) } as Record<string, string>,
      metadata: (insert.metadata?.items ?? []).map((item) => ({
        key: String(item.key),
        value: String(item.value),
      })),
      machineType: /machineTypes\/([^/]+)$/.exec(String(insert.machineType))![1],
      network: /([^/]+)$/.exec(String(insert.networkInterfaces?.[0]?.network ?? "default"))![1],
      address: null,
      proxy: undefined,
      createdAt: new Date(),
      insert: operation,
      booting: undefined,
      deleting: undefined,
      removed: false,
    };
    this.instanceMap.set(this.key(project, zone, name), instance);
    this.scheduleBoot(instance);
    return { status: 200, body: this.operationJson(operation) };
  }

  scheduleBoot(instance: Instance): void {
    if (this.slowCreating) {
      this.heldBoots.add(instance);
      return;
    }
    this.later(this.bootDelayMs, () => {
      if (this.slowCreating) this.heldBoots.add(instance);
      else this.track(this.boot(instance));
    });
  }

  async boot(instance: Instance): Promise<void> {
    if (instance.removed || instance.status !== "PROVISIONING" || this.closed) return;
    instance.status = "STAGING";
    instance.insert.status = "RUNNING";
    instance.insert.startTime = new Date();
    const address = this.addresses.take();
    const script = instance.metadata.find((item) => item.key === "startup-script")?.value ?? "";
    let resolveBoot!: () => void;
    instance.booting = new Promise((resolve) => (resolveBoot = resolve));
    try {
      const booted = await bootInstance(address, script);
      if (instance.removed || this.closed) await booted.proxy.close();
      else instance.proxy = booted.proxy;
    } catch {
      // A script without a login boots an instance without a proxy, as a failing start-up
      // script leaves a real instance running.
    } finally {
      resolveBoot();
    }
    if (instance.removed || instance.status !== "STAGING") return;
    instance.address = address;
    instance.status = "RUNNING";
    instance.insert.finish();
  }

  remove({ account, project, params: [zone, name] }: ApiRequest): Reply {
    const unknown = this.unknownZone(zone);
    if (unknown) return unknown;
    const instance = this.instanceMap.get(this.key(project, zone, name));
    if (instance === undefined) {
      return notFound(`projects/${project}/zones/${zone}/instances/${name}`);
    }
    const operation = this.newOperation(project, zone, "delete", name, instance.id, account.email);
    if (this.slowDeleting) this.heldDeletes.add({ instance, operation });
    else this.track(this.runDelete(instance, operation));
    return { status: 200, body: this.operationJson(operation) };
  }

  async runDelete(instance: Instance, operation: Operation): Promise<void> {
    operation.status = "RUNNING";
    operation.startTime = new Date();
    instance.deleting ??= this.stopAndRemove(instance);
    await instance.deleting;
    operation.finish();
  }

  async stopAndRemove(instance: Instance): Promise<void> {
    instance.status = "STOPPING";
    this.heldBoots.delete(instance);
    await instance.booting;
    await instance.proxy?.close();
    instance.proxy = undefined;
    instance.removed = true;
    this.instanceMap.delete(this.key(instance.project, instance.zone, instance.name));
    // An insert still under way ends with its instance.
    if (instance.insert.status !== "DONE") instance.insert.finish();
  }

  async stopInstance(name: string): Promise<void> {
    const instance = [...this.instanceMap.values()].find((each) => each.name === name);
    if (instance === undefined) throw new Error(`No emulated instance ${name}`);
    this.heldBoots.delete(instance);
    await instance.booting;
    instance.status = "TERMINATED";
    instance.address = null;
    await instance.proxy?.close();
    instance.proxy = undefined;
    if (instance.insert.status !== "DONE") instance.insert.finish();
  }

  // ----- operations

  newOperation(
    project: string,
    zone: string,
    type: Operation["type"],
    targetName: string,
    targetId: string,
    user: string,
  ): Operation {
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const operation: Operation = {
      project,
      zone,
      name: `operation-${Date.now()}-${randomBytes(8).toString("hex")}`,
      id: numericId(),
      type,
      targetName,
      targetId,
      user,
      status: "PENDING",
      insertTime: new Date(),
      startTime: undefined,
      endTime: undefined,
      error: undefined,
      done,
      finish: () => {
        if (operation.status === "DONE") return;
        operation.status = "DONE";
        operation.startTime ??= new Date();
        operation.endTime = new Date();
        finish();
      },
    };
    this.operations.set(this.key(project, zone, operation.name), operation);
    return operation;
  }

  operationJson(operation: Operation): Record<string, unknown> {
    const zoneLink = this.zoneLink(operation.project, operation.zone);
    const body: Record<string, unknown> = {
      kind: "compute#operation",
      id: operation.id,
      name: operation.name,
      zone: zoneLink,
      operationType: operation.type,
      targetLink: `${zoneLink}/instances/${operation.targetName}`,
      targetId: operation.targetId,
      status: operation.status,
      user: operation.user,
      progress: operation.status === "DONE" ? 100 : 0,
      insertTime: timestamp(operation.insertTime),
      selfLink: `${zoneLink}/operations/${operation.name}`,
    };
    if (operation.startTime) body.startTime = timestamp(operation.startTime);
    if (operation.endTime) body.endTime = timestamp(operation.endTime);
    if (operation.error) {
      body.error = {
        errors: [{ code: operation.error.code, message: operation.error.message }],
      };
      body.httpErrorStatusCode = operation.error.status;
      body.httpErrorMessage = operation.error.statusText;
    }
    return body;
  }

  /** The operation, or the 404 of one the cloud does not know (or lost). */
  findOperation(
    project: string,
    zone: string,
    name: string,
  ): { operation?: Operation; reply?: Reply } {
    const unknown = this.unknownZone(zone);
    if (unknown) return { reply: unknown };
    const operation = this.operations.get(this.key(project, zone, name));
    if (operation === undefined || this.losingOperations) {
      return { reply: notFound(`projects/${project}/zones/${zone}/operations/${name}`) };
    }
    return { operation };
  }

  operation({ project, params: [zone, name] }: ApiRequest): Reply {
    const { operation, reply } = this.findOperation(project, zone, name);
    return operation ? { status: 200, body: this.operationJson(operation) } : reply!;
  }

  /** Answers once the operation is DONE, or after Compute's two minutes, as Compute does. */
  async wait({ project, params: [zone, name] }: ApiRequest): Promise<Reply> {
    const { operation, reply } = this.findOperation(project, zone, name);
    if (operation === undefined) return reply!;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      operation.done,
      this.closing,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, OPERATION_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    return { status: 200, body: this.operationJson(operation) };
  }

  // ----- switches

  setSlowCreates(on: boolean): void {
    this.slowCreating = on;
    if (on) return;
    const held = [...this.heldBoots];
    this.heldBoots.clear();
    for (const instance of held) this.track(this.boot(instance));
  }

  setSlowDeletes(on: boolean): void {
    this.slowDeleting = on;
    if (on) return;
    const held = [...this.heldDeletes];
    this.heldDeletes.clear();
    for (const { instance, operation } of held) this.track(this.runDelete(instance, operation));
  }

  snapshot(): EmulatedInstance[] {
    return [...this.instanceMap.values()].map((instance) => ({
      project: instance.project,
      zone: instance.zone,
      name: instance.name,
      status: instance.status,
      labels: { ...instance.labels },
      metadata: Object.fromEntries(instance.metadata.map((item) => [item.key, item.value])),
      address: instance.address,
      proxyPort: instance.proxy?.port ?? null,
      createdAt: instance.createdAt,
    }));
  }

  // ----- timers and work

  #endClosing!: () => void;
  readonly closing = new Promise<void>((resolve) => (this.#endClosing = resolve));

  later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.closed) fn();
    }, ms);
    this.timers.add(timer);
  }

  track(work: Promise<void>): void {
    const tracked = work.catch(() => {}).finally(() => this.work.delete(tracked));
    this.work.add(tracked);
  }

  async shutDown(): Promise<void> {
    this.closed = true;
    this.#endClosing();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.heldBoots.clear();
    this.heldDeletes.clear();
    await Promise.all([...this.work]);
    const instances = [...this.instanceMap.values()];
    await Promise.all(instances.map(async (instance) => {
      await instance.booting;
      await instance.proxy?.close();
    }));
  }
}

interface InsertBody {
  name?: unknown;
  machineType?: unknown;
  labels?: Record<string, unknown>;
  metadata?: { items?: { key?: unknown; value?: unknown }[] };
  disks?: { boot?: boolean; initializeParams?: { sourceImage?: unknown } }[];
  networkInterfaces?: { network?: unknown }[];
}

function readBody(request: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) request.destroy(new Error("request body too large"));
      else chunks.push(chunk);
    });
    request.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.once("error", reject);
  });
}

async function listen(server: http.Server): Promise<number> {
  // A free port can be taken between the check and the bind: try a few.
  for (let attempt = 1;; attempt++) {
    const port = await freePort();
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", () => {
          server.off("error", reject);
          resolve();
        });
      });
      return port;
    } catch (error) {
      if (attempt >= 5) throw error;
    }
  }
}

export async function startGcpEmulator(options: GcpEmulatorOptions = {}): Promise<GcpEmulator> {
  const emulator = new Emulator(options);
  const certificate = options.tls ? await testCertificate() : undefined;
  const sockets = new Set<net.Socket>();
  const onRequest = (request: http.IncomingMessage, response: http.ServerResponse) => {
    void emulator.handle(request, response);
  };
  const server = certificate
    ? https.createServer({ cert: certificate.cert, key: certificate.key }, onRequest)
    : http.createServer(onRequest);
  server.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  const port = await listen(server);
  emulator.baseUrl = `${certificate ? "https" : "http"}://127.0.0.1:${port}`;
  emulator.tokenUrl = `${emulator.baseUrl}/token`;

  let closing: Promise<void> | undefined;
  return {
    url: emulator.baseUrl,
    tokenUrl: emulator.tokenUrl,
    ca: certificate?.ca,
    calls: emulator.calls,
    serviceAccount(projectId) {
      const account = emulator.accountsByProject.get(projectId);
      if (account === undefined) throw new Error(`The emulator has no account for ${projectId}`);
      return keyFile(account);
    },
    instances: () => emulator.snapshot(),
    refuseCreates(reason = "ZONE_RESOURCE_POOL_EXHAUSTED") {
      emulator.refusal = reason;
    },
    slowCreates: (on) => emulator.setSlowCreates(on),
    slowDeletes: (on) => emulator.setSlowDeletes(on),
    failListings(on) {
      emulator.failingListings = on;
    },
    loseOperations(on) {
      emulator.losingOperations = on;
    },
    stopInstance: (name) => emulator.stopInstance(name),
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const socket of sockets) socket.destroy();
        await emulator.shutDown();
        await stopped;
      })();
      return closing;
    },
  };
}
