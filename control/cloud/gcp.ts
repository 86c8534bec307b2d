/**
 * The GCP client: Compute Engine's REST API (v1), zonal instances, authorised by the service
 * account's OAuth2 token (a JWT-bearer grant: an RS256 assertion signed with the key file's
 * private key, by jose, exchanged at the token URL).
 *
 * Why not @google-cloud/compute: its 7.x needs Node 22, and 6.x (over google-gax and
 * google-auth-library 10) reaches an http://127.0.0.1 endpoint (protocol "http", a port) but not
 * a token URL of our choosing (google-auth-library's JWT client posts to Google's token URL,
 * written into its code, so a test or compatible cloud needs its transport intercepted), nor a
 * CA of our choosing (gax's REST stub hands its own module-wide https.Agent to every request),
 * nor an AbortSignal (the generated methods' promises cannot be cancelled). Plain requests do
 * all three in a few lines, with one error shape to map: Google's own JSON.
 *
 * Calls go out with node:https rather than fetch: Node 20's fetch trusts a given CA only
 * through an undici dispatcher, which the control plane does not ship; an https request takes
 * `ca` as control/egress/guard.ts does. The key file's own `token_uri` is never used: it is a
 * URL the credential's author chose, and the assertion would be posted there.
 *
 * Messages never hold the private key or a start-up script: the cloud's text is scrubbed of
 * both (and of each of the script's lines) and cut short before it goes into an error.
 */
import { createPrivateKey, type KeyObject } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { SignJWT } from "jose";
import { abortable } from "../../shared/async/abort.ts";
import { DeadlineError, withDeadline } from "../../shared/async/deadline.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { CloudCallError, type CloudFailure } from "../../shared/errors.ts";
import type { GcpConnector, GcpCredential } from "../model/cloud.ts";
import {
  type CloudClient,
  type CloudClientOptions,
  type CloudInstance,
  type CloudLaunch,
  CONNECTOR_TAG,
} from "./contract.ts";
import { cloudIdOf, rowInstanceId } from "./naming.ts";

const PROVIDER = "gcp";
export const GOOGLE_COMPUTE_URL = "https://compute.googleapis.com";
export const GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token";
const COMPUTE_SCOPE = "https://www.googleapis.com/auth/compute";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/** Ubuntu 24.04 LTS: a family, so each launch takes the newest image Canonical published. */
export const UBUNTU_IMAGE_FAMILY =
  "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64";
/** The metadata item Google's guest agent runs at boot: the only item an instance gets. */
export const STARTUP_SCRIPT_KEY = "startup-script";

/** Google takes assertions valid for an hour at most. */
const ASSERTION_LIFETIME_S = 3600;
/** A token is renewed this long before it expires, so no call goes out with a stale one. */
const TOKEN_RENEW_MARGIN_MS = 60_000;
/** Compute's largest page; a connector holds at most 1000 instances, so two pages at most. */
const LIST_PAGE_SIZE = 500;
/** A listing that goes on past this many pages is a cloud misbehaving, not a long list. */
const MAX_LIST_PAGES = 50;
/** Answers larger than this are not Compute's: a list page of 500 instances is far below. */
const MAX_ANSWER_BYTES = 32 * 1024 * 1024;
/** Cloud text kept in a message: enough for Google's sentences, never a whole echoed body. */
const MAX_DETAIL_CHARS = 400;

/** Statuses a listing holds, and how the contract names them. */
const LIVE_STATES: Readonly<Record<string, CloudInstance["state"]>> = {
  PROVISIONING: "pending",
  STAGING: "pending",
  RUNNING: "running",
};
/** Statuses of an instance on its way out (a stop or a delete under way, or done). */
const ENDING_STATUSES: ReadonlySet<string> = new Set([
  "STOPPING",
  "TERMINATED",
  "SUSPENDING",
  "SUSPENDED",
]);
/** Compute's instance names: RFC 1035 labels. */
const INSTANCE_NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

export type GcpClientOptions = CloudClientOptions & {
  /** Where service account tokens are asked for; undefined: Google's own. */
  tokenUrl: string | undefined;
};

export function gcpClient(
  credential: GcpCredential,
  connector: GcpConnector,
  options: GcpClientOptions,
): CloudClient {
  const place = { project: connector.project_id ?? credential.project_id, zone: connector.zone };
  const api = new ComputeApi(credential, place, options);
  return {
    provider: PROVIDER,
    list: (connectorId, signal) => listInstances(api, connectorId, signal),
    create: (launch, signal) => createInstance(api, connector, launch, signal),
    terminate: (id, signal) => terminateInstance(api, id, signal),
    verify: (signal) => verifyConnector(api, connector, signal),
  };
}

// ---------------------------------------------------------------------------------------------
// Compute's resources, as far as the client reads them.

interface GoogleErrorBody {
  error?: {
    code?: number;
    message?: string;
    status?: string;
    errors?: { reason?: string; message?: string }[];
  };
}

interface Operation {
  name: string;
  status: "PENDING" | "RUNNING" | "DONE";
  operationType?: string;
  targetLink?: string;
  error?: { errors?: { code?: string; message?: string }[] };
  httpErrorStatusCode?: number;
  httpErrorMessage?: string;
}

interface InstanceResource {
  name: string;
  status: string;
  labels?: Record<string, string>;
  networkInterfaces?: { accessConfigs?: { natIP?: string }[] }[];
}

interface InstanceList {
  items?: InstanceResource[];
  nextPageToken?: string;
}

// ---------------------------------------------------------------------------------------------
// One call's context: which contract operation it serves, its signal, the deadline of the
// whole operation (a create's wait), and what its error messages must never quote.

interface CallContext {
  operation: string;
  signal: AbortSignal;
  /** Epoch ms by which the whole operation gives up with `timeout`; none: each call's own. */
  deadlineMs?: number;
  /** Text of this operation that no message may hold (a start-up script's lines). */
  secrets?: readonly string[];
  /** What the operation waits for now (set by `pause`), named when its deadline passes. */
  awaiting?: string;
}

interface Answer {
  status: number;
  json: unknown;
}

const isOk = (answer: Answer) => answer.status >= 200 && answer.status < 300;

// ---------------------------------------------------------------------------------------------
// The transport: one HTTP exchange under a deadline, the cloud's CA, the caller's signal.

interface Exchange {
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/** One request and its whole answer (bounded), over http: or https: with `ca` when given. */
function exchange(
  url: URL,
  request: Exchange,
  ca: string | undefined,
  signal: AbortSignal,
): Promise<{ status: number; text: string }> {
  const payload = request.body === undefined ? undefined : Buffer.from(request.body, "utf8");
  const headers = payload === undefined
    ? request.headers
    : { ...request.headers, "content-length": String(payload.length) };
  return new Promise((resolve, reject) => {
    const onAnswer = (response: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_ANSWER_BYTES) outgoing.destroy(new Error("the answer is too large"));
        else chunks.push(chunk);
      });
      response.once("end", () =>
        resolve({
          status: response.statusCode ?? 0,
          text: Buffer.concat(chunks).toString("utf8"),
        }));
      response.once("error", reject);
    };
    const outgoing = url.protocol === "http:"
      ? http.request(url, { method: request.method, headers, signal }, onAnswer)
      : https.request(url, { method: request.method, headers, signal, ca }, onAnswer);
    outgoing.once("error", reject);
    outgoing.end(payload);
  });
}

function parseJson(text: string): unknown {
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Errors: Google's JSON mapped to the failure the scale job acts on.

/** Codes (API reasons and operation error codes) whose failure the status alone misnames. */
const CODE_FAILURES: Readonly<Record<string, { failure: CloudFailure; field?: string }>> = {
  rateLimitExceeded: { failure: "throttled" },
  userRateLimitExceeded: { failure: "throttled" },
  RATE_LIMIT_EXCEEDED: { failure: "throttled" },
  // A 503 on the operation, but a zone out of this machine type: another zone is the remedy.
  ZONE_RESOURCE_POOL_EXHAUSTED: { failure: "refused", field: "zone" },
  ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: { failure: "refused", field: "zone" },
  QUOTA_EXCEEDED: { failure: "refused" },
  quotaExceeded: { failure: "refused" },
  // Asked again later, the same call goes through.
  resourceNotReady: { failure: "unavailable" },
  backendError: { failure: "unavailable" },
  internalError: { failure: "unavailable" },
};

/** The connector or credential field a message names, when it names one. */
export function fieldOf(message: string | undefined): string | undefined {
  if (message === undefined) return undefined;
  // "Invalid value for field 'resource.machineType': …", else the resource a 404 names.
  const target = /field '([^']+)'/.exec(message)?.[1] ??
    /'((?:projects|zones|global)\/[^']*)'/.exec(message)?.[1] ?? "";
  if (/machineType/i.test(target)) return "machine_type";
  if (/network/i.test(target)) return "network";
  if (/labels/.test(target)) return "tags";
  if (/(^|\/)zones\/[^/]+$/.test(target) || target === "zone") return "zone";
  if (/^projects\/[^/]+$/.test(target)) return "project_id";
  if (/\.name$/.test(target)) return "instance_name";
  return undefined;
}

/** The failure for an HTTP status and the cloud's own code, with the field at fault. */
export function classify(
  status: number,
  code: string | undefined,
  message: string | undefined,
): { failure: CloudFailure; field?: string } {
  const known = code === undefined ? undefined : CODE_FAILURES[code];
  if (known) return { failure: known.failure, field: known.field ?? fieldOf(message) };
  if (status === 429) return { failure: "throttled" };
  if (status === 401) return { failure: "auth", field: "service_account_json" };
  // Permission denied, the API disabled, billing off: all of the project, none of the request.
  if (status === 403) return { failure: "auth", field: "project_id" };
  if (status === 0 || status >= 500) return { failure: "unavailable" };
  return { failure: "refused", field: fieldOf(message) };
}

/** `text` with every secret replaced, cut to a message's length. */
function scrub(text: string, secrets: readonly string[]): string {
  let clean = text;
  for (const secret of secrets) {
    if (secret.length >= 8) clean = clean.split(secret).join("[redacted]");
  }
  return clean.length > MAX_DETAIL_CHARS ? `${clean.slice(0, MAX_DETAIL_CHARS)}…` : clean;
}

/**
 * What of a start-up script no message may quote: the whole script, each line, and each
 * assignment's value (the login is three assignments, control/cloud/startup-script.ts).
 */
function scriptSecrets(script: string): string[] {
  const lines = script.split("\n").map((line) => line.trim());
  const values = lines.map((line) => /^[A-Za-z_][A-Za-z0-9_]*=(.+)$/.exec(line)?.[1] ?? "");
  return [script, ...lines, ...values].filter((text) => text.length >= 8);
}

// ---------------------------------------------------------------------------------------------
// The service account and its tokens.

interface ServiceAccount {
  email: string;
  key: KeyObject;
  keyId: string | undefined;
  /** The PEM, so no message ever quotes it. */
  pem: string;
}

function readServiceAccount(json: string, operation: string): ServiceAccount {
  const refuse = (why: string) =>
    new CloudCallError(PROVIDER, operation, "auth", `the service account key file ${why}`, {
      field: "service_account_json",
    });
  let parsed: { client_email?: unknown; private_key?: unknown; private_key_id?: unknown };
  try {
    parsed = JSON.parse(json);
  } catch {
    // Neither error is kept as the cause: the parser's and the key reader's quote the text.
    throw refuse("is not JSON");
  }
  const { client_email: email, private_key: pem, private_key_id: keyId } = parsed;
  if (typeof email !== "string" || typeof pem !== "string") {
    throw refuse("holds no client_email and private_key");
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    throw refuse("holds a private_key that is not a PEM private key");
  }
  return { email, key, keyId: typeof keyId === "string" ? keyId : undefined, pem };
}

interface Token {
  value: string;
  renewAtMs: number;
}

// ---------------------------------------------------------------------------------------------
// The API: authorised calls relative to the connector's project and zone.

/** Where an api's calls go: a project, and a connector's zone (none for a credential's check). */
interface Place {
  project: string;
  zone?: string;
}

class ComputeApi {
  readonly project: string;
  readonly #zone: string | undefined;
  readonly #options: GcpClientOptions;
  readonly #baseUrl: string;
  readonly #tokenUrl: string;
  readonly #keyJson: string;
  #account: ServiceAccount | undefined;
  #token: Token | undefined;
  /** The exchange under way, shared by every call that needs a token meanwhile. */
  #pendingToken: Promise<Token> | undefined;

  constructor(credential: GcpCredential, place: Place, options: GcpClientOptions) {
    this.project = place.project;
    this.#zone = place.zone;
    this.#options = options;
    this.#baseUrl = (options.endpoint ?? GOOGLE_COMPUTE_URL).replace(/\/+$/, "");
    this.#tokenUrl = options.tokenUrl ?? GOOGLE_TOKEN_URL;
    this.#keyJson = credential.service_account_json;
  }

  get zone(): string {
    if (this.#zone === undefined) throw new Error("a credential's own check has no zone");
    return this.#zone;
  }

  get createTimeoutMs(): number {
    return this.#options.createTimeoutMs;
  }

  /** `projects/<project>/…` as a path below the API's base. */
  projectPath(...segments: string[]): string {
    const rest = segments.map(encodeURIComponent).join("/");
    return `/compute/v1/projects/${encodeURIComponent(this.project)}${rest ? `/${rest}` : ""}`;
  }

  /** `projects/<project>/zones/<zone>/…`. */
  zonePath(...segments: string[]): string {
    return this.projectPath("zones", this.zone, ...segments);
  }

  /**
   * One authorised call. Answers whatever status the cloud gave (the caller reads 404 and
   * 409 its own way); throws CloudCallError when there was no answer. A 401 drops the token
   * and is asked once more with a new one: a kept token may have been revoked.
   */
  async request(
    apiName: string,
    method: "GET" | "POST" | "DELETE",
    path: string,
    call: CallContext,
    input: { query?: Record<string, string>; body?: unknown } = {},
  ): Promise<Answer> {
    const url = new URL(`${this.#baseUrl}${path}`);
    for (const [name, value] of Object.entries(input.query ?? {})) {
      url.searchParams.set(name, value);
    }
    const body = input.body === undefined ? undefined : JSON.stringify(input.body);
    for (let attempt = 1;; attempt++) {
      const token = await this.#tokenFor(call);
      const answer = await this.#send(apiName, url, {
        method,
        headers: {
          authorization: `Bearer ${token.value}`,
          accept: "application/json",
          "user-agent": "octoprox",
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body,
      }, call);
      if (answer.status !== 401 || attempt > 1) return answer;
      if (this.#token === token) this.#token = undefined;
    }
  }

  /** The CloudCallError for a refusing answer: classified by its status, unless `as` says. */
  failure(
    call: CallContext,
    apiName: string,
    answer: Answer,
    as?: { failure: CloudFailure; field?: string },
  ): CloudCallError {
    const error = (answer.json as GoogleErrorBody | undefined)?.error;
    const reason = error?.errors?.[0]?.reason;
    const message = error?.message ?? error?.errors?.[0]?.message;
    const { failure, field } = as ?? classify(answer.status, reason, message);
    const code = reason ?? error?.status;
    const detail = `${apiName} answered ${answer.status}${code ? ` ${code}` : ""}: ${
      message ?? "no message"
    }`;
    return new CloudCallError(PROVIDER, call.operation, failure, this.scrub(detail, call), {
      status: answer.status,
      cloudCode: code,
      field,
    });
  }

  /** The CloudCallError for an operation that finished with an error. */
  operationFailure(call: CallContext, operation: Operation): CloudCallError {
    const first = operation.error?.errors?.[0];
    const status = operation.httpErrorStatusCode ?? 400;
    const { failure, field } = classify(status, first?.code, first?.message);
    const detail = `operation ${operation.operationType ?? ""} ${operation.name} failed${
      first?.code ? ` with ${first.code}` : ""
    }: ${first?.message ?? operation.httpErrorMessage ?? "no message"}`;
    return new CloudCallError(PROVIDER, call.operation, failure, this.scrub(detail, call), {
      status,
      cloudCode: first?.code,
      field,
    });
  }

  scrub(text: string, call: CallContext): string {
    return scrub(text, [...(call.secrets ?? []), this.#keyJson, ...this.#pemSecrets()]);
  }

  /**
   * Waits one poll interval, or throws `timeout` when the operation's deadline passed (`what`
   * says what was awaited).
   */
  async pause(call: CallContext, what: string): Promise<void> {
    call.awaiting = what;
    const remainingMs = (call.deadlineMs ?? Infinity) - Date.now();
    if (remainingMs <= 0) throw this.#overdue(call);
    await sleep(Math.min(this.#options.pollIntervalMs, remainingMs), call.signal);
  }

  /** The timeout of an operation whose deadline passed, naming what it waited for. */
  #overdue(call: CallContext, cause?: unknown): CloudCallError {
    const what = call.awaiting ?? "the cloud to answer";
    const message = `waited ${this.#options.createTimeoutMs} ms for ${what}`;
    return new CloudCallError(PROVIDER, call.operation, "timeout", message, { cause });
  }

  #pemSecrets(): string[] {
    const pem = this.#account?.pem;
    if (pem === undefined) return [];
    // The key's base64 lines too: a message could quote a part of it.
    return [pem, ...pem.split("\n").filter((line) => !line.startsWith("-----"))];
  }

  /** One exchange, bounded by the call's timeout and the operation's deadline. */
  async #send(apiName: string, url: URL, request: Exchange, call: CallContext): Promise<Answer> {
    const remainingMs = (call.deadlineMs ?? Infinity) - Date.now();
    if (remainingMs <= 0) throw this.#overdue(call);
    // A call the operation's deadline cuts short fails as the operation's timeout.
    const cut = remainingMs < this.#options.callTimeoutMs;
    const timeoutMs = cut ? remainingMs : this.#options.callTimeoutMs;
    let answer: { status: number; text: string };
    try {
      answer = await withDeadline(
        `${PROVIDER} ${apiName}`,
        timeoutMs,
        (signal) => exchange(url, request, this.#options.ca, signal),
        { signal: call.signal },
      );
    } catch (error) {
      if (cut && error instanceof DeadlineError && !call.signal.aborted) {
        throw this.#overdue(call, error);
      }
      throw this.#unanswered(apiName, url, call, error, timeoutMs);
    }
    const json = parseJson(answer.text);
    if (json === undefined && answer.status >= 200 && answer.status < 300) {
      throw new CloudCallError(
        PROVIDER,
        call.operation,
        "unavailable",
        `${apiName} answered no JSON`,
        {
          status: answer.status,
        },
      );
    }
    return { status: answer.status, json };
  }

  /** Why a call got no answer: the caller's abort (as is), the deadline, or no connection. */
  #unanswered(apiName: string, url: URL, call: CallContext, error: unknown, timeoutMs: number) {
    if (call.signal.aborted) return call.signal.reason;
    if (error instanceof DeadlineError) {
      return new CloudCallError(
        PROVIDER,
        call.operation,
        "timeout",
        `${apiName}: no answer within ${timeoutMs} ms`,
        { cause: error },
      );
    }
    const why = error instanceof Error ? error.message : String(error);
    return new CloudCallError(
      PROVIDER,
      call.operation,
      "unavailable",
      `${apiName}: ${url.host} could not be reached (${this.scrub(why, call)})`,
      { cause: error },
    );
  }

  /** A token valid for a while yet: the kept one, the exchange under way, or a new one. */
  #tokenFor(call: CallContext): Promise<Token> {
    const kept = this.#token;
    if (kept !== undefined && Date.now() < kept.renewAtMs) return Promise.resolve(kept);
    // The exchange runs under its own deadline, not the first caller's signal: an abort of
    // that caller leaves it to the others waiting on it.
    this.#pendingToken ??= this.#exchangeToken(call).finally(() => {
      this.#pendingToken = undefined;
    });
    return abortable(this.#pendingToken, call.signal);
  }

  async #exchangeToken(call: CallContext): Promise<Token> {
    this.#account ??= readServiceAccount(this.#keyJson, call.operation);
    const account = this.#account;
    const nowS = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({ scope: COMPUTE_SCOPE })
      .setProtectedHeader({
        alg: "RS256",
        typ: "JWT",
        ...(account.keyId ? { kid: account.keyId } : {}),
      })
      .setIssuer(account.email)
      .setAudience(this.#tokenUrl)
      .setIssuedAt(nowS)
      .setExpirationTime(nowS + ASSERTION_LIFETIME_S)
      .sign(account.key);
    const tokenCall: CallContext = {
      operation: call.operation,
      signal: new AbortController().signal,
    };
    const answer = await this.#send("token", new URL(this.#tokenUrl), {
      method: "POST",
      headers: {
        accept: "application/json",
        "content-type": "application/x-www-form-urlencoded",
        "user-agent": "octoprox",
      },
      body: new URLSearchParams({ grant_type: JWT_BEARER, assertion }).toString(),
    }, tokenCall);
    const body = answer.json as
      | {
        access_token?: unknown;
        expires_in?: unknown;
        error?: unknown;
        error_description?: unknown;
      }
      | undefined;
    if (isOk(answer) && typeof body?.access_token === "string") {
      const lifetimeS = typeof body.expires_in === "number" ? body.expires_in : 3600;
      this.#token = {
        value: body.access_token,
        renewAtMs: Date.now() + lifetimeS * 1000 - TOKEN_RENEW_MARGIN_MS,
      };
      return this.#token;
    }
    throw this.#tokenFailure(call, answer, body);
  }

  #tokenFailure(
    call: CallContext,
    answer: Answer,
    body: { error?: unknown; error_description?: unknown } | undefined,
  ): CloudCallError {
    const code = typeof body?.error === "string" ? body.error : undefined;
    const description = typeof body?.error_description === "string"
      ? body.error_description
      : undefined;
    const failure: CloudFailure = answer.status === 429
      ? "throttled"
      : answer.status >= 500 || isOk(answer)
      ? "unavailable"
      : "auth";
    const detail = `the token endpoint answered ${answer.status}${code ? ` ${code}` : ""}${
      description ? `: ${description}` : ""
    }`;
    return new CloudCallError(PROVIDER, call.operation, failure, this.scrub(detail, call), {
      status: answer.status,
      cloudCode: code,
      ...(failure === "auth" ? { field: "service_account_json" } : {}),
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Operations.

/**
 * Polls a zone operation until it is DONE: the finished operation, or "lost" when the cloud
 * answers 404 for it (it no longer knows it; the caller asks the instance instead).
 */
async function settled(
  api: ComputeApi,
  operation: Operation,
  call: CallContext,
): Promise<Operation | "lost"> {
  let current = operation;
  while (current.status !== "DONE") {
    await api.pause(call, operationWork(operation));
    const path = api.zonePath("operations", operation.name);
    const answer = await api.request("zoneOperations.get", "GET", path, call);
    if (answer.status === 404) return "lost";
    if (!isOk(answer)) throw api.failure(call, "zoneOperations.get", answer);
    current = answer.json as Operation;
  }
  return current;
}

/** What an operation does, for messages: `the insert of <instance> (operation <name>)`. */
function operationWork(operation: Operation): string {
  const target = operation.targetLink?.split("/").pop() ?? "an instance";
  return `the ${
    operation.operationType ?? "operation"
  } of ${target} (operation ${operation.name}) to finish`;
}

function natIpOf(resource: InstanceResource): string | null {
  return resource.networkInterfaces?.[0]?.accessConfigs?.[0]?.natIP ?? null;
}

function cloudInstance(resource: InstanceResource): CloudInstance | undefined {
  const state = LIVE_STATES[resource.status];
  if (state === undefined) return undefined;
  return {
    name: resource.name,
    id: rowInstanceId(PROVIDER, resource.name),
    state,
    address: natIpOf(resource),
  };
}

// ---------------------------------------------------------------------------------------------
// list

/** A GCP label value of text: lower case, characters GCP refuses as `_`, 63 at most. */
export function labelText(text: string): string {
  return text.toLowerCase().replace(/[^\p{Ll}\p{Lo}\p{N}_-]/gu, "_").slice(0, 63);
}

/**
 * The listing's filter (Compute's AIP-160 form): the connector's label, and a status a
 * listing holds. Explicit parentheses: the two grammars Compute reads bind AND and OR
 * differently.
 */
export function listFilter(connectorId: string): string {
  const statuses = Object.keys(LIVE_STATES).map((status) => `(status = "${status}")`);
  return `(labels.${CONNECTOR_TAG} = ${JSON.stringify(labelText(connectorId))}) AND (${
    statuses.join(" OR ")
  })`;
}

async function listInstances(
  api: ComputeApi,
  connectorId: string,
  signal: AbortSignal,
): Promise<CloudInstance[]> {
  const call: CallContext = { operation: "list", signal };
  const label = labelText(connectorId);
  const found: CloudInstance[] = [];
  let pageToken: string | undefined;
  for (let page = 1;; page++) {
    const query: Record<string, string> = {
      filter: listFilter(connectorId),
      maxResults: String(LIST_PAGE_SIZE),
      ...(pageToken === undefined ? {} : { pageToken }),
    };
    const answer = await api.request("instances.list", "GET", api.zonePath("instances"), call, {
      query,
    });
    if (!isOk(answer)) throw api.failure(call, "instances.list", answer);
    const list = answer.json as InstanceList;
    // The filter already holds these; checked again so a cloud that reads it otherwise
    // cannot hand the scale job another connector's or a stopped instance.
    for (const resource of list.items ?? []) {
      const instance = resource.labels?.[CONNECTOR_TAG] === label
        ? cloudInstance(resource)
        : undefined;
      if (instance) found.push(instance);
    }
    pageToken = list.nextPageToken || undefined;
    if (pageToken === undefined) return found;
    if (page >= MAX_LIST_PAGES) {
      throw new CloudCallError(
        PROVIDER,
        "list",
        "unavailable",
        `instances.list still had pages after ${MAX_LIST_PAGES}`,
      );
    }
  }
}

// ---------------------------------------------------------------------------------------------
// create

/** The connector's tags as GCP labels, the connector's own label added last (never replaced). */
export function gcpLabels(
  tags: Readonly<Record<string, string>>,
  connectorId: string,
): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(tags)) labels[labelText(key)] = labelText(value);
  labels[CONNECTOR_TAG] = labelText(connectorId);
  return labels;
}

/** instances.insert's body: the one instance a launch asks for. */
export function insertBody(connector: GcpConnector, launch: CloudLaunch): Record<string, unknown> {
  return {
    name: launch.name,
    machineType: `zones/${connector.zone}/machineTypes/${connector.machine_type}`,
    labels: gcpLabels(launch.tags, launch.connectorId),
    // The login travels here only: no label or other item holds it.
    metadata: { items: [{ key: STARTUP_SCRIPT_KEY, value: launch.startupScript }] },
    disks: [{
      boot: true,
      autoDelete: true,
      initializeParams: { sourceImage: UBUNTU_IMAGE_FAMILY },
    }],
    networkInterfaces: [{
      network: `global/networks/${connector.network}`,
      // An ephemeral public address: the instance's proxy is reached on it.
      accessConfigs: [{ type: "ONE_TO_ONE_NAT", name: "External NAT" }],
    }],
  };
}

function reasonOf(answer: Answer): string | undefined {
  return (answer.json as GoogleErrorBody | undefined)?.error?.errors?.[0]?.reason;
}

async function createInstance(
  api: ComputeApi,
  connector: GcpConnector,
  launch: CloudLaunch,
  signal: AbortSignal,
): Promise<CloudInstance & { address: string }> {
  const call: CallContext = {
    operation: "create",
    signal,
    deadlineMs: Date.now() + api.createTimeoutMs,
    secrets: scriptSecrets(launch.startupScript),
  };
  const answer = await api.request("instances.insert", "POST", api.zonePath("instances"), call, {
    body: insertBody(connector, launch),
  });
  // 409 alreadyExists: an earlier try of this launch got through; wait for that instance.
  if (answer.status !== 409 || reasonOf(answer) !== "alreadyExists") {
    if (!isOk(answer)) throw api.failure(call, "instances.insert", answer);
    const operation = await settled(api, answer.json as Operation, call);
    if (operation !== "lost" && operation.error) throw api.operationFailure(call, operation);
  }
  return await running(api, launch.name, call);
}

/** Polls the instance until it runs with a public address (the create's deadline at most). */
async function running(
  api: ComputeApi,
  name: string,
  call: CallContext,
): Promise<CloudInstance & { address: string }> {
  const path = api.zonePath("instances", name);
  for (;;) {
    const answer = await api.request("instances.get", "GET", path, call);
    if (answer.status === 404) {
      throw new CloudCallError(
        PROVIDER,
        call.operation,
        "lost",
        `instance ${name} is gone: the cloud lost its insert operation or it was deleted`,
        { status: 404 },
      );
    }
    if (!isOk(answer)) throw api.failure(call, "instances.get", answer);
    const resource = answer.json as InstanceResource;
    const address = natIpOf(resource);
    if (resource.status === "RUNNING" && address !== null) {
      return { name, id: rowInstanceId(PROVIDER, name), state: "running", address };
    }
    if (ENDING_STATUSES.has(resource.status)) {
      throw new CloudCallError(
        PROVIDER,
        call.operation,
        "refused",
        `instance ${name} turned ${resource.status} before it ran`,
        { cloudCode: resource.status },
      );
    }
    await api.pause(call, `instance ${name} to run with a public address (${resource.status})`);
  }
}

// ---------------------------------------------------------------------------------------------
// terminate

async function terminateInstance(api: ComputeApi, id: string, signal: AbortSignal): Promise<void> {
  const name = cloudIdOf(PROVIDER, id);
  if (name === undefined || !INSTANCE_NAME.test(name)) {
    throw new CloudCallError(
      PROVIDER,
      "terminate",
      "refused",
      `${id} is no GCP instance id (gcp-<name>)`,
    );
  }
  // The delete's wait is bounded as a create's is.
  const call: CallContext = {
    operation: "terminate",
    signal,
    deadlineMs: Date.now() + api.createTimeoutMs,
  };
  const path = api.zonePath("instances", name);
  const answer = await api.request("instances.delete", "DELETE", path, call);
  if (answer.status === 404) return; // Gone already: terminated.
  if (!isOk(answer)) throw api.failure(call, "instances.delete", answer);
  const operation = await settled(api, answer.json as Operation, call);
  if (operation === "lost") return await confirmEnding(api, name, call);
  const code = operation.error?.errors?.[0]?.code;
  // Deleted meanwhile by another delete: what this one wanted.
  if (operation.error && code !== "RESOURCE_NOT_FOUND") throw api.operationFailure(call, operation);
}

/** After a lost delete operation: done if the instance is gone or on its way out. */
async function confirmEnding(api: ComputeApi, name: string, call: CallContext): Promise<void> {
  const answer = await api.request("instances.get", "GET", api.zonePath("instances", name), call);
  if (answer.status === 404) return;
  if (!isOk(answer)) throw api.failure(call, "instances.get", answer);
  const status = (answer.json as InstanceResource).status;
  if (ENDING_STATUSES.has(status)) return;
  throw new CloudCallError(
    PROVIDER,
    call.operation,
    "lost",
    `the cloud lost the delete operation of instance ${name}, which is still ${status}`,
    { cloudCode: status },
  );
}

// ---------------------------------------------------------------------------------------------
// verify

/** Reads one resource the connector names: 404 is the field's refusal. */
async function readResource(
  api: ComputeApi,
  apiName: string,
  path: string,
  field: string,
  what: string,
  call: CallContext,
): Promise<void> {
  const answer = await api.request(apiName, "GET", path, call);
  if (isOk(answer)) return;
  if (answer.status === 404 && fieldOf(failureMessage(answer)) !== "project_id") {
    throw new CloudCallError(
      PROVIDER,
      call.operation,
      "refused",
      `${what} is unknown to project ${api.project}`,
      { status: 404, cloudCode: reasonOf(answer), field },
    );
  }
  throw api.failure(call, apiName, answer);
}

function failureMessage(answer: Answer): string | undefined {
  return (answer.json as GoogleErrorBody | undefined)?.error?.message;
}

async function verifyConnector(
  api: ComputeApi,
  connector: GcpConnector,
  signal: AbortSignal,
): Promise<void> {
  const call: CallContext = { operation: "verify", signal };
  // One after the other: the first refusal is the one the connector's form shows.
  await readResource(api, "zones.get", api.zonePath(), "zone", `zone ${api.zone}`, call);
  await readResource(
    api,
    "machineTypes.get",
    api.zonePath("machineTypes", connector.machine_type),
    "machine_type",
    `machine type ${connector.machine_type} in zone ${api.zone}`,
    call,
  );
  await readResource(
    api,
    "networks.get",
    api.projectPath("global", "networks", connector.network),
    "network",
    `network ${connector.network}`,
    call,
  );
}

/**
 * A credential checked on its own, with no connector: the token exchange proves the key (its
 * refusal is `auth` at `service_account_json`), and one zones.list of the credential's project
 * (a page of one zone) proves the account reaches the project (403 or 404: `auth` at
 * `project_id`). Throws CloudCallError.
 */
export async function verifyGcpCredential(
  credential: GcpCredential,
  options: GcpClientOptions,
  signal: AbortSignal,
): Promise<void> {
  const api = new ComputeApi(credential, { project: credential.project_id }, options);
  const call: CallContext = { operation: "verify", signal };
  const answer = await api.request("zones.list", "GET", api.projectPath("zones"), call, {
    query: { maxResults: "1" },
  });
  if (isOk(answer)) return;
  const ofProject = answer.status === 403 || answer.status === 404;
  throw api.failure(
    call,
    "zones.list",
    answer,
    ofProject ? { failure: "auth", field: "project_id" } : undefined,
  );
}
