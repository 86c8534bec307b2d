/**
 * A descriptor's HTTP calls, run under the egress guard: one `HttpCall` rendered from a
 * credential's and a connector's configs (real values: a call needs the secret itself, and
 * nothing rendered here is stored), its JSON answer read with JMESPath, its pages followed; the
 * token flow (`auth`) with a per-credential cache; and the credential check (`validation`).
 */
import { createHash } from "node:crypto";
import { type JSONValue, search } from "@jmespath-community/jmespath";
import { EgressRefusedError, VendorCallError } from "../../shared/errors.ts";
import { callHost, type Descriptor, type HttpCall } from "../../shared/vendors/descriptor.ts";
import { type RenderContext, renderTemplate } from "../../shared/vendors/templates.ts";
import { type EgressOptions, egressRequest, shownUrl } from "./guard.ts";

export const DEFAULT_MAX_PAGES = 1000;
export const DEFAULT_MAX_ITEMS = 100_000;

/** What every call takes: the guard's bounds and allowances. */
export type CallOptions = Pick<
  EgressOptions,
  "timeoutMs" | "signal" | "maxBytes" | "allowLoopback" | "ca"
>;

export interface ListOptions extends CallOptions {
  /** Pages followed at most; a list that goes on is an error, not a silent truncation. */
  maxPages?: number;
  /** Items taken at most, all pages together; more is an error. */
  maxItems?: number;
}

export interface RenderedCall {
  method: "GET" | "POST";
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
}

function renderValue(value: unknown, context: RenderContext): unknown {
  if (typeof value === "string") return renderTemplate(value, context);
  if (Array.isArray(value)) return value.map((entry) => renderValue(entry, context));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([key, entry]) => [key, renderValue(entry, context)]),
    );
  }
  return value;
}

/**
 * The call as it will be sent: URL, headers, query parameters and the strings of the body
 * rendered. The rendered URL must keep the host the descriptor wrote (a value cannot move it).
 */
export function renderCall(call: HttpCall, context: RenderContext): RenderedCall {
  const written = callHost(call.url);
  let url: URL;
  try {
    url = new URL(renderTemplate(call.url, context));
  } catch (error) {
    throw new EgressRefusedError(written ?? "", "a call's rendered URL is not a valid URL", {
      cause: error,
    });
  }
  if (written === undefined || url.hostname.toLowerCase() !== written) {
    throw new EgressRefusedError(
      url.hostname,
      `a call's rendered URL left its host ${written ?? "(a template)"}: ${shownUrl(url)}`,
    );
  }
  for (const [key, value] of Object.entries(call.params ?? {})) {
    url.searchParams.append(key, renderTemplate(value, context));
  }
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(call.headers ?? {})) {
    headers[key] = renderTemplate(value, context);
  }
  let body: string | undefined;
  if (call.body !== undefined) {
    body = JSON.stringify(renderValue(call.body, context));
    if (!Object.keys(headers).some((key) => key.toLowerCase() === "content-type")) {
      headers["content-type"] = "application/json";
    }
  }
  return { method: call.method, url: url.href, headers, body };
}

/** JMESPath's truth: false, null, "", [] and {} are false. */
function truthy(value: JSONValue): boolean {
  if (value === null || value === false || value === "") return false;
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === "object") return Object.keys(value).length > 0;
  return true;
}

function evaluate(data: JSONValue, expression: string, what: string, url: URL): JSONValue {
  try {
    return search(data, expression);
  } catch (error) {
    throw new VendorCallError(
      `${shownUrl(url)}: the descriptor's ${what} expression "${expression}" could not be read`,
      { cause: error },
    );
  }
}

export interface JsonAnswer {
  status: number;
  json: JSONValue;
  url: URL;
}

/** Sends a rendered request; a 2xx JSON answer, else a `VendorCallError` with the status. */
async function sendJson(request: RenderedCall, options: CallOptions): Promise<JsonAnswer> {
  const url = new URL(request.url);
  const answer = await egressRequest(request.url, {
    method: request.method,
    headers: request.headers,
    body: request.body,
    ...options,
  });
  if (answer.status < 200 || answer.status > 299) {
    throw new VendorCallError(`${shownUrl(url)} answered ${answer.status}`, {
      status: answer.status,
    });
  }
  try {
    return { status: answer.status, json: JSON.parse(answer.body.toString("utf8")), url };
  } catch (error) {
    throw new VendorCallError(`${shownUrl(url)} answered something that is not JSON`, {
      status: answer.status,
      cause: error,
    });
  }
}

/** Runs a call once and answers its JSON (no items, no pages): what checks and tokens read. */
export function fetchJson(
  call: HttpCall,
  context: RenderContext,
  options: CallOptions = {},
): Promise<JsonAnswer> {
  return sendJson(renderCall(call, context), options);
}

/** A page's items: the `items` selection, or the whole answer (a list's entries). */
function pageItems(call: HttpCall, page: JsonAnswer): JSONValue[] {
  const selected = call.items === undefined
    ? page.json
    : evaluate(page.json, call.items, "items", page.url);
  if (Array.isArray(selected)) return selected;
  if (selected === null) return [];
  if (call.items === undefined && typeof selected === "object") return [selected];
  throw new VendorCallError(
    `${shownUrl(page.url)}: the descriptor's items expression found no list in the answer`,
    { status: page.status },
  );
}

/**
 * Runs a listing call with its pages: every page's items, concatenated. Later pages are GET
 * requests of the `next_url` each page names (relative ones read against it) with the first
 * call's headers; each must stay on the first call's host, and the list must end within the
 * page and item caps.
 */
export async function runCall(
  call: HttpCall,
  context: RenderContext,
  options: ListOptions = {},
): Promise<JSONValue[]> {
  const maxPages = options.maxPages ?? DEFAULT_MAX_PAGES;
  const maxItems = options.maxItems ?? DEFAULT_MAX_ITEMS;
  const first = renderCall(call, context);
  const home = new URL(first.url);
  const seen = new Set<string>();
  const items: JSONValue[] = [];
  let request: RenderedCall = first;
  for (let pages = 1;; pages++) {
    seen.add(request.url);
    const page = await sendJson(request, options);
    for (const item of pageItems(call, page)) {
      if (items.length >= maxItems) {
        throw new VendorCallError(
          `${shownUrl(home)}: the list holds more than ${maxItems} items, the most a call takes`,
        );
      }
      items.push(item);
    }
    if (call.next_url === undefined) return items;
    const next = evaluate(page.json, call.next_url, "next_url", page.url);
    if (next === null || next === "" || next === false) return items;
    if (typeof next !== "string") {
      throw new VendorCallError(`${shownUrl(page.url)}: next_url found no URL in the answer`);
    }
    let nextUrl: URL;
    try {
      nextUrl = new URL(next, page.url);
    } catch (error) {
      throw new VendorCallError(`${shownUrl(page.url)}: the next page's URL is not a URL`, {
        cause: error,
      });
    }
    if (nextUrl.host !== home.host || nextUrl.protocol !== home.protocol) {
      const where = `another host (${nextUrl.host}); pages must stay on ${home.host}`;
      throw new EgressRefusedError(
        nextUrl.hostname,
        `${shownUrl(home)}: the next page is on ${where}`,
      );
    }
    if (seen.has(nextUrl.href)) {
      throw new VendorCallError(`${shownUrl(nextUrl)}: the pages loop back to one already read`);
    }
    if (pages >= maxPages) {
      throw new VendorCallError(
        `${shownUrl(home)}: the list goes on past ${maxPages} pages, the most a call follows`,
      );
    }
    request = { method: "GET", url: nextUrl.href, headers: first.headers, body: undefined };
  }
}

// ---------------------------------------------------------------------------------------------
// The token flow.

interface CachedToken {
  token: string;
  expiresAtMs: number;
}

/**
 * Tokens by credential, owned by the caller (one per worker process, say). Keys are digests of
 * the descriptor and the credential's config, so the cache never holds a secret in clear; a
 * token asked for by several callers at once is fetched once.
 */
export class TokenCache {
  readonly #entries = new Map<string, CachedToken>();
  readonly #pending = new Map<string, Promise<string>>();
  readonly #nowMs: () => number;

  constructor(options: { nowMs?: () => number } = {}) {
    this.#nowMs = options.nowMs ?? Date.now;
  }

  /** Tokens kept now. */
  get size(): number {
    return this.#entries.size;
  }

  /** Forgets a credential's token (a vendor refused it before its TTL ran out). */
  forget(descriptor: Descriptor, credential: Readonly<Record<string, unknown>>): void {
    this.#entries.delete(credentialKey(descriptor, credential));
  }

  /** The token kept under `key` while younger than its TTL, else the one `fetch` answers. */
  obtain(key: string, ttlMs: number, fetch: () => Promise<string>): Promise<string> {
    const cached = this.#entries.get(key);
    if (cached !== undefined && this.#nowMs() < cached.expiresAtMs) {
      return Promise.resolve(cached.token);
    }
    let pending = this.#pending.get(key);
    if (pending === undefined) {
      pending = fetch().then((token) => {
        this.#entries.set(key, { token, expiresAtMs: this.#nowMs() + ttlMs });
        return token;
      }).finally(() => this.#pending.delete(key));
      this.#pending.set(key, pending);
    }
    return pending;
  }
}

/** JSON with keys in order, so equal configs give equal text. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    const fields = Object.keys(record).sort().map((key) =>
      `${JSON.stringify(key)}:${stableJson(record[key])}`
    );
    return `{${fields.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** A digest of the descriptor and credential: the cache never holds the secret in clear. */
function credentialKey(
  descriptor: Descriptor,
  credential: Readonly<Record<string, unknown>>,
): string {
  return createHash("sha256").update(descriptor.id).update("\0").update(stableJson(credential))
    .digest("hex");
}

/**
 * The credential's token from the descriptor's `auth` flow (undefined when it has none): from
 * the cache while younger than `ttl_seconds`, else from the token call, read at `token_path`.
 */
export function authToken(
  descriptor: Descriptor,
  context: RenderContext,
  cache: TokenCache,
  options: CallOptions = {},
): Promise<string | undefined> {
  const auth = descriptor.auth;
  if (auth === undefined) return Promise.resolve(undefined);
  const key = credentialKey(descriptor, context.credential ?? {});
  return cache.obtain(key, auth.ttl_seconds * 1000, async () => {
    const answer = await fetchJson(auth.call, { ...context, auth: null }, options);
    const found = evaluate(answer.json, auth.token_path, "token_path", answer.url);
    if (typeof found !== "string" || found === "") {
      throw new VendorCallError(
        `${shownUrl(answer.url)}: token_path "${auth.token_path}" found no token in the answer`,
        { status: answer.status },
      );
    }
    return found;
  });
}

/**
 * Checks a credential with the descriptor's `validation` call (after its token flow, when it
 * has one): a 2xx answer, and `success` truthy on it when given. A refusal (a 4xx answer, or a
 * falsy `success`) is a `VendorCallError` with the descriptor's `error_message` and the vendor's
 * status, the vendor's own answer its cause; a vendor in trouble (5xx, no answer) is not a
 * refusal of the credential, and its own error is thrown as it is.
 */
export async function validateCredential(
  descriptor: Descriptor,
  credentialConfig: Readonly<Record<string, unknown>>,
  options: CallOptions & { cache?: TokenCache } = {},
): Promise<void> {
  const validation = descriptor.validation;
  const message = validation?.error_message ?? "the vendor refused the credential";
  const refused = (error: unknown): never => {
    const status = error instanceof VendorCallError ? error.status : undefined;
    if (status !== undefined && status >= 400 && status < 500) {
      throw new VendorCallError(`${message} (the vendor answered ${status})`, {
        status,
        cause: error,
      });
    }
    throw error;
  };
  const context: RenderContext = { credential: credentialConfig };
  const token = await authToken(descriptor, context, options.cache ?? new TokenCache(), options)
    .catch(refused);
  if (validation === undefined) return;
  const answer = await fetchJson(
    validation.call,
    { ...context, auth: token === undefined ? null : { token } },
    options,
  ).catch(refused);
  if (validation.success !== undefined) {
    const verdict = evaluate(answer.json, validation.success, "success", answer.url);
    if (!truthy(verdict)) {
      throw new VendorCallError(`${message} (the vendor answered ${answer.status})`, {
        status: answer.status,
      });
    }
  }
}
