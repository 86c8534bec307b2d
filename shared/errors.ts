/**
 * The error catalogue: one class per failure a caller must tell apart, each with a stable code.
 * Routes map codes to HTTP answers in one place (control/api/errors.ts); the gateway maps the
 * upstream phases to proxy answers. Causes are chained with `cause`, never flattened into text.
 */

export const ErrorCode = {
  // Domain errors, answered to API clients.
  notFound: "OX_NOT_FOUND",
  duplicate: "OX_DUPLICATE",
  invalid: "OX_INVALID",
  unauthorized: "OX_UNAUTHORIZED",
  forbidden: "OX_FORBIDDEN",
  conflict: "OX_CONFLICT",
  stale: "OX_STALE",
  precondition: "OX_PRECONDITION",
  unconfirmedHosts: "OX_UNCONFIRMED_HOSTS",
  backupRefused: "OX_BACKUP_REFUSED",
  idempotencyConflict: "OX_IDEMPOTENCY_CONFLICT",
  // Outbound calls a provider descriptor makes (control/egress/).
  egressRefused: "OX_EGRESS_REFUSED",
  vendorCall: "OX_VENDOR_CALL",
  // A cloud's API (control/cloud/): refused, unreachable or too slow.
  cloudCall: "OX_CLOUD_CALL",
  // A provider API's fetch answer (control/provider-api/).
  providerAnswer: "OX_PROVIDER_ANSWER",
  // Stores that did not answer.
  storeUnavailable: "OX_STORE_UNAVAILABLE",
  // The gateway's HTTP Redis transport: the REST endpoint refused a request or did not answer.
  redisHttp: "OX_REDIS_HTTP",
  // Migrations.
  unknownRevision: "OX_UNKNOWN_REVISION",
  // Upstream connection phases (the gateway and health checks).
  upstreamConnect: "OX_UPSTREAM_CONNECT",
  upstreamHandshake: "OX_UPSTREAM_HANDSHAKE",
  upstreamFirstByte: "OX_UPSTREAM_FIRST_BYTE",
  upstreamIdle: "OX_UPSTREAM_IDLE",
  upstreamRefused: "OX_UPSTREAM_REFUSED",
  // An intercepting gateway's TLS to the target: its certificate failed verification.
  targetTls: "OX_TARGET_TLS",
  // The browser-grade modes' impersonation engine did not load on this gateway.
  impersonationUnavailable: "OX_IMPERSONATION_UNAVAILABLE",
  // A call that did not answer in time (shared/async/deadline.ts).
  deadline: "OX_DEADLINE",
  // Settings a process cannot start with.
  settings: "OX_SETTINGS",
  // What a client sent the gateway that it cannot read.
  proxyHeader: "OX_PROXY_HEADER",
  socks5Server: "OX_SOCKS5_SERVER",
  clientHead: "OX_CLIENT_HEAD",
  chunked: "OX_CHUNKED",
  clientGone: "OX_CLIENT_GONE",
  clientBody: "OX_CLIENT_BODY",
  // The feed's content failed a check.
  feedIntegrity: "OX_FEED_INTEGRITY",
  // A beat where a store did not answer.
  storeCheck: "OX_STORE_CHECK",
  // Leads and leases lost.
  leadLost: "OX_LEAD_LOST",
  fetchLeadLost: "OX_FETCH_LEAD_LOST",
  notLeader: "OX_NOT_LEADER",
  // The TLS interception CA could not be read or used (shared/tls/ca.ts).
  mitmCa: "OX_MITM_CA",
  /** A program the tunnel endpoint runs (`ip`, `wg`, `nft`, `wireguard-go`) failed. */
  tunnelCommand: "OX_TUNNEL_COMMAND",
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export class OctoproxError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "OctoproxError";
    this.code = code;
  }
}

export class NotFoundError extends OctoproxError {
  readonly entity: string;
  constructor(entity: string, message = `${entity} not found`) {
    super(ErrorCode.notFound, message);
    this.name = "NotFoundError";
    this.entity = entity;
  }
}

/** A unique name or username another row holds. `field` is the body field at fault. */
export class DuplicateError extends OctoproxError {
  readonly field: string;
  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super(ErrorCode.duplicate, message, options);
    this.name = "DuplicateError";
    this.field = field;
  }
}

export interface FieldIssue {
  /** Dotted path of the field at fault, such as `body.port` or `query.limit`. */
  field: string;
  message: string;
}

/** A request that names fields at fault (422). */
export class ValidationError extends OctoproxError {
  readonly issues: readonly FieldIssue[];
  constructor(issues: readonly FieldIssue[], options?: { cause?: unknown }) {
    super(
      ErrorCode.invalid,
      issues.map((issue) => `${issue.field}: ${issue.message}`).join("; ") || "Invalid request",
      options,
    );
    this.name = "ValidationError";
    this.issues = issues;
  }
}

export class UnauthorizedError extends OctoproxError {
  constructor(message = "Authentication required") {
    super(ErrorCode.unauthorized, message);
    this.name = "UnauthorizedError";
  }
}

export class ForbiddenError extends OctoproxError {
  constructor(message = "Your role does not allow this") {
    super(ErrorCode.forbidden, message);
    this.name = "ForbiddenError";
  }
}

/** A request that contradicts the state it acts on (400), such as deleting oneself. */
export class ConflictError extends OctoproxError {
  constructor(message: string) {
    super(ErrorCode.conflict, message);
    this.name = "ConflictError";
  }
}

/** A write made against a state that has moved on (409), such as an older configuration. */
export class StaleError extends OctoproxError {
  constructor(message: string) {
    super(ErrorCode.stale, message);
    this.name = "StaleError";
  }
}

/**
 * A request the install's state cannot serve until something else changes (409), such as a
 * device asked for when its subnet has no free address, or a device's config before an admin
 * set the host devices dial. Nothing was changed.
 */
export class PreconditionError extends OctoproxError {
  constructor(message: string) {
    super(ErrorCode.precondition, message);
    this.name = "PreconditionError";
  }
}

/**
 * A custom descriptor whose egress hosts the admin has not confirmed (409): the save is refused,
 * naming the hosts to confirm; nothing was stored.
 */
export class UnconfirmedHostsError extends OctoproxError {
  readonly hosts: readonly string[];
  constructor(hosts: readonly string[]) {
    super(
      ErrorCode.unconfirmedHosts,
      `Confirm every host the descriptor calls (confirm_hosts): ${hosts.join(", ")}`,
    );
    this.name = "UnconfirmedHostsError";
    this.hosts = hosts;
  }
}

/**
 * An Idempotency-Key used again with another request (409): the first request's answer stays
 * the key's, and nothing was done for this one.
 */
export class IdempotencyConflictError extends OctoproxError {
  constructor(
    message = "This Idempotency-Key was used with another request; use a new key for a new request",
  ) {
    super(ErrorCode.idempotencyConflict, message);
    this.name = "IdempotencyConflictError";
  }
}

/**
 * A backup an import will not restore (400): not a backup, another schema version, or one the
 * passphrase does not open. Nothing was changed.
 */
export class BackupRefusedError extends OctoproxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.backupRefused, message, options);
    this.name = "BackupRefusedError";
  }
}

/**
 * An outbound call the egress guard will not make or finish: not HTTPS, a host that is or
 * resolves to an internal address, a redirect, a page on another host, an answer too large.
 * `host` is the call's host; the message names host and path only, never the query (it may
 * hold an API key).
 */
export class EgressRefusedError extends OctoproxError {
  readonly host: string;
  constructor(host: string, message: string, options?: { cause?: unknown }) {
    super(ErrorCode.egressRefused, message, options);
    this.name = "EgressRefusedError";
    this.host = host;
  }
}

/**
 * A vendor call that failed: a non-2xx answer (`status`), an answer that is not the JSON the
 * descriptor reads, no answer in time, or no connection (`status` undefined). The message names
 * host and path only, never the query or the answer's body (either may echo a secret).
 */
export class VendorCallError extends OctoproxError {
  readonly status: number | undefined;
  /** A 429's (or 503's) `Retry-After`, in seconds, when the answer gave one. */
  readonly retryAfterSeconds: number | undefined;
  constructor(
    message: string,
    options?: { status?: number; retryAfterSeconds?: number; cause?: unknown },
  ) {
    super(
      ErrorCode.vendorCall,
      message,
      options && "cause" in options ? { cause: options.cause } : {},
    );
    this.name = "VendorCallError";
    this.status = options?.status;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

/**
 * How a cloud call failed, in a word the scale job acts on: `auth` (the credential was refused),
 * `refused` (the request itself: a region, size or image the cloud does not take, a quota),
 * `throttled` (asked to slow down), `unavailable` (no connection, a 5xx), `timeout` (no answer
 * in time, or an instance that did not run in time), `lost` (an operation the cloud no longer
 * knows).
 */
export type CloudFailure = "auth" | "refused" | "throttled" | "unavailable" | "timeout" | "lost";

/**
 * A cloud call that failed. The message names the cloud, the operation and the cloud's own
 * error code and text (which never hold the credential or a start-up script), so it can be
 * recorded on the connector and shown at the field it names.
 */
export class CloudCallError extends OctoproxError {
  readonly provider: string;
  readonly operation: string;
  readonly failure: CloudFailure;
  /** The HTTP status, when the cloud answered. */
  readonly status: number | undefined;
  /** The cloud's own error code (`InvalidAMIID.Malformed`, `ZONE_RESOURCE_POOL_EXHAUSTED`). */
  readonly cloudCode: string | undefined;
  /**
   * The connector config field (`ami_id`, `zone`, `vm_size`) or credential field the cloud
   * refused, when the refusal names one: where the api shows it.
   */
  readonly field: string | undefined;
  constructor(
    provider: string,
    operation: string,
    failure: CloudFailure,
    message: string,
    options?: { status?: number; cloudCode?: string; field?: string; cause?: unknown },
  ) {
    super(
      ErrorCode.cloudCall,
      `${provider} ${operation}: ${message}`,
      options && "cause" in options ? { cause: options.cause } : {},
    );
    this.name = "CloudCallError";
    this.provider = provider;
    this.operation = operation;
    this.failure = failure;
    this.status = options?.status;
    this.cloudCode = options?.cloudCode;
    this.field = options?.field;
  }
}

/**
 * Why a provider API's fetch answer could not be read as proxies: `too_large` (past the byte
 * cap), `too_many_items` (past the item cap), `malformed` (not the format the connector names),
 * `no_proxies` (entries, none of them a proxy), `spec` (the connector's parser settings do not
 * compile). A stable word, so counts and logs can tell failures apart without quoting the answer.
 */
export type ProviderAnswerFailure =
  | "too_large"
  | "too_many_items"
  | "malformed"
  | "no_proxies"
  | "spec";

/**
 * A provider API's fetch answer that cannot be read as proxies (an Error fetch, seed 001 section
 * 8.1). The message names the failure and the connector's own settings, never the answer's text:
 * a provider's answer carries proxy credentials, and a parser's message quotes what it read.
 */
export class ProviderAnswerError extends OctoproxError {
  readonly reason: ProviderAnswerFailure;
  constructor(reason: ProviderAnswerFailure, message: string) {
    super(ErrorCode.providerAnswer, message);
    this.name = "ProviderAnswerError";
    this.reason = reason;
  }
}

export const Store = { postgres: "postgres", redis: "redis" } as const;
export type Store = (typeof Store)[keyof typeof Store];

/** A store did not answer. The message never carries SQL, parameters or the driver's text. */
export class StoreUnavailableError extends OctoproxError {
  readonly store: Store;
  constructor(store: Store, options?: { cause?: unknown }) {
    super(
      ErrorCode.storeUnavailable,
      `${store === "postgres" ? "Postgres" : "Redis"} unavailable`,
      options,
    );
    this.name = "StoreUnavailableError";
    this.store = store;
  }
}

/**
 * A request of the gateway's HTTP Redis transport that Redis did not answer: the REST endpoint
 * answered an HTTP error (`status`; its `error` text, which is Redis's or the endpoint's words),
 * or no answer came (`status` undefined, the fetch's failure as `cause`). The message never holds
 * the token or the commands' arguments.
 */
export class RedisHttpError extends OctoproxError {
  readonly status: number | undefined;
  constructor(message: string, status: number | undefined, options?: ErrorOptions) {
    super(ErrorCode.redisHttp, message, options);
    this.name = "RedisHttpError";
    this.status = status;
  }
}

/** A program the tunnel endpoint runs exited with an error: its name, arguments and stderr. */
export class TunnelCommandError extends OctoproxError {
  readonly exitCode: number | undefined;
  constructor(message: string, exitCode: number | undefined, options?: ErrorOptions) {
    super(ErrorCode.tunnelCommand, message, options);
    this.name = "TunnelCommandError";
    this.exitCode = exitCode;
  }
}

export class UnknownRevisionError extends OctoproxError {
  constructor(message: string) {
    super(ErrorCode.unknownRevision, message);
    this.name = "UnknownRevisionError";
  }
}

/** Options every catalogue error takes: the error it was caused by, chained, never flattened. */
export interface ErrorOptions {
  cause?: unknown;
}

/**
 * A call that did not answer within its deadline (shared/async/deadline.ts). The message begins
 * "No reply within": log readers and the end-to-end tests look for it.
 */
export class DeadlineError extends OctoproxError {
  readonly what: string;
  readonly timeoutMs: number;
  constructor(what: string, timeoutMs: number, options?: ErrorOptions) {
    super(ErrorCode.deadline, `No reply within ${timeoutMs} ms (${what})`, options);
    this.name = "DeadlineError";
    this.what = what;
    this.timeoutMs = timeoutMs;
  }
}

/** A setting a process cannot run with: one line naming the variable, never its value. */
export class SettingsError extends OctoproxError {
  readonly variable: string | undefined;
  constructor(variable: string | undefined, problem: string, options?: ErrorOptions) {
    super(
      ErrorCode.settings,
      variable === undefined ? `Invalid settings: ${problem}` : `${variable} ${problem}`,
      options,
    );
    this.name = "SettingsError";
    this.variable = variable;
  }
}

/** A PROXY protocol header (v1 or v2) the gateway will not read. */
export class ProxyHeaderError extends OctoproxError {
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.proxyHeader, message, options);
    this.name = "ProxyHeaderError";
  }
}

/** A SOCKS5 client's message the gateway refuses. */
export class Socks5ServerError extends OctoproxError {
  /** The reply code to send before closing; undefined when nothing may be answered. */
  readonly reply: number | undefined;
  constructor(message: string, reply?: number, options?: ErrorOptions) {
    super(ErrorCode.socks5Server, message, options);
    this.name = "Socks5ServerError";
    this.reply = reply;
  }
}

/** A request the gateway answers itself, status and a short reason, then closes. */
export class HeadError extends OctoproxError {
  readonly status: 400 | 431;
  constructor(status: 400 | 431, message: string, options?: ErrorOptions) {
    super(ErrorCode.clientHead, message, options);
    this.name = "HeadError";
    this.status = status;
  }
}

/** A chunked body whose framing is broken. */
export class ChunkedError extends OctoproxError {
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.chunked, message, options);
    this.name = "ChunkedError";
  }
}

/** The client went away or broke the exchange: nothing to answer, the proxy is not at fault. */
export class ClientGoneError extends OctoproxError {
  constructor(message = "Client closed the connection", options?: ErrorOptions) {
    super(ErrorCode.clientGone, message, options);
    this.name = "ClientGoneError";
  }
}

/** The client's request body was not what its framing said (400 if nothing was answered). */
export class ClientBodyError extends OctoproxError {
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.clientBody, message, options);
    this.name = "ClientBodyError";
  }
}

/** A section's or manifest's content failed a check: tampered, truncated or another secret. */
export class FeedIntegrityError extends OctoproxError {
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.feedIntegrity, message, options);
    this.name = "FeedIntegrityError";
  }
}

/** A beat where a store did not answer: a failed run of the heartbeat. */
export class StoreCheckError extends OctoproxError {
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.storeCheck, message, options);
    this.name = "StoreCheckError";
  }
}

/** Why a controller lead's signal aborted. */
export class LeadLostError extends OctoproxError {
  constructor(reason: string, options?: ErrorOptions) {
    super(ErrorCode.leadLost, `Controller lead lost: ${reason}`, options);
    this.name = "LeadLostError";
  }
}

/** Why a provider fetch lead's signal aborted. */
export class FetchLeadLostError extends OctoproxError {
  constructor(reason: string, options?: ErrorOptions) {
    super(ErrorCode.fetchLeadLost, `Fetch lead lost: ${reason}`, options);
    this.name = "FetchLeadLostError";
  }
}

/** The lease names another holder (or none): nothing was written, and the lead is lost. */
export class NotLeaderError extends OctoproxError {
  constructor(options?: ErrorOptions) {
    super(
      ErrorCode.notLeader,
      "Feed publish refused: this controller no longer holds the lease",
      options,
    );
    this.name = "NotLeaderError";
  }
}

/**
 * The TLS interception CA cannot be used: a file missing or unreadable, not a CA, out of its
 * validity, or a key that is not its certificate's. The message names the file at fault.
 */
export class MitmCaError extends OctoproxError {
  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.mitmCa, message, options);
    this.name = "MitmCaError";
  }
}

/** How a log line names an error: its message, or its type's name when it has none. */
export function errorText(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/**
 * An error's message and its causes', up to `depth` of them (the runtime's own error is often
 * the cause of ours): what a log line or a failure example says of it.
 */
export function errorChainText(error: unknown, depth = 3): string {
  let text = errorText(error);
  let cause: unknown = error instanceof Error ? error.cause : undefined;
  for (let level = 0; cause !== undefined && level < depth; level++) {
    text += `: ${errorText(cause)}`;
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return text;
}

/** How stats and states label an error: its type's name, then its message. */
export function errorLabel(error: unknown): string {
  if (error instanceof Error) {
    return error.message ? `${error.name}: ${error.message}` : error.name;
  }
  return String(error);
}
