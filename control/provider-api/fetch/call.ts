/**
 * A provider-API connector's fetch call: its `fetch` settings rendered with the connector's
 * credential and the call's `{count}` (method, URL with its query, headers, a JSON body and
 * the auth), then sent through the egress guard (control/egress/guard.ts: HTTPS only, no
 * internal address, the connection pinned to the vetted address, no redirects, a bounded
 * answer) within the connector's `timeout_ms` and the caller's signal.
 *
 * The rendering is the descriptors' (control/egress/http-call.ts): the URL must keep the
 * host the config wrote. Nothing rendered here is stored or logged: errors name the host and
 * the path only (the config keeps credentials out of the URL's path), never the query, a
 * header or the answer.
 */
import { EgressRefusedError, VendorCallError } from "../../../shared/errors.ts";
import type { RenderContext } from "../../../shared/vendors/templates.ts";
import { renderTemplate } from "../../../shared/vendors/templates.ts";
import type { ControlSettings } from "../../../shared/settings.ts";
import { callOptions } from "../../egress/call-options.ts";
import { egressRequest, shownUrl } from "../../egress/guard.ts";
import { renderCall, type RenderedCall } from "../../egress/http-call.ts";
import type { FetchConfig } from "../config.ts";

/** The guard's allowances a fetch call takes from its process's settings. */
export interface ProviderEgress {
  /** Tests only (OCTOPROX_EGRESS_ALLOW_LOOPBACK): loopback providers are reachable. */
  allowLoopback?: boolean;
  /** A CA to trust instead of the system's (OCTOPROX_EGRESS_CA_FILE's PEM). */
  ca?: string;
}

/** The process's allowances, as its descriptor calls take them. */
export function providerEgress(settings: ControlSettings): ProviderEgress {
  const { allowLoopback, ca } = callOptions(settings);
  return { allowLoopback, ca };
}

export interface ProviderCallOptions extends ProviderEgress {
  /** The call's deadline: the connector's `fetch.timeout_ms`. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** The largest answer taken (the guard's default, 10 MiB, unless told). */
  maxBytes?: number;
}

export interface ProviderAnswer {
  status: number;
  body: Buffer;
  /** From sending to the whole answer read. */
  durationMs: number;
}

/** Sets a header, replacing one of the same name in another case. */
function setHeader(headers: Record<string, string>, name: string, value: string): void {
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === name.toLowerCase()) delete headers[key];
  }
  headers[name] = value;
}

/**
 * The call as it will be sent: URL, query parameters, headers and body rendered with the
 * credential and `count`, then the auth. Throws an `EgressRefusedError` when the rendered URL
 * is no URL or left the host the config wrote (the config's checks make that rare).
 */
export function renderFetchCall(
  fetch: FetchConfig,
  credential: Readonly<Record<string, unknown>>,
  count: number,
): RenderedCall {
  const context: RenderContext = { credential, count };
  const rendered = renderCall({
    method: fetch.method,
    url: fetch.url,
    ...(fetch.headers === undefined ? {} : { headers: fetch.headers }),
    ...(fetch.params === undefined ? {} : { params: fetch.params }),
    ...(fetch.body === undefined ? {} : { body: fetch.body }),
  }, context);
  const headers = { ...rendered.headers };
  let url = rendered.url;
  const auth = fetch.auth;
  if (auth.type === "bearer") {
    setHeader(headers, "Authorization", `Bearer ${renderTemplate(auth.token, context)}`);
  } else if (auth.type === "basic") {
    const pair = `${renderTemplate(auth.username, context)}:${
      renderTemplate(auth.password, context)
    }`;
    setHeader(headers, "Authorization", `Basic ${Buffer.from(pair, "utf8").toString("base64")}`);
  } else if (auth.type === "api_key") {
    const value = renderTemplate(auth.value, context);
    if (auth.query !== undefined) {
      const withKey = new URL(url);
      withKey.searchParams.set(auth.query, value);
      url = withKey.href;
    } else {
      setHeader(headers, auth.header ?? "X-Api-Key", value);
    }
  }
  return { method: rendered.method, url, headers, body: rendered.body };
}

/** A Retry-After header in seconds: a number of seconds, or an HTTP date from now. */
export function retryAfterSeconds(
  header: string | string[] | undefined,
  nowMs = Date.now(),
): number | undefined {
  const text = (Array.isArray(header) ? header[0] : header)?.trim();
  if (text === undefined || text === "") return undefined;
  if (/^\d{1,10}$/.test(text)) return Number(text);
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/**
 * Sends a rendered call under the egress guard and answers its 2xx answer. Any other status is
 * a `VendorCallError` with that status (and a 429's or 503's Retry-After, in seconds); a call
 * with no answer (no connection, the deadline, the signal) is one without a status; what the
 * guard refuses is an `EgressRefusedError`.
 */
export async function callProvider(
  call: RenderedCall,
  options: ProviderCallOptions,
): Promise<ProviderAnswer> {
  let url: URL;
  try {
    url = new URL(call.url);
  } catch (error) {
    throw new EgressRefusedError("", "a provider call's URL is not a valid URL", { cause: error });
  }
  const startedAt = performance.now();
  const answer = await egressRequest(call.url, {
    method: call.method,
    headers: call.headers,
    body: call.body,
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    allowLoopback: options.allowLoopback,
    ca: options.ca,
    maxBytes: options.maxBytes,
  });
  const durationMs = performance.now() - startedAt;
  if (answer.status < 200 || answer.status > 299) {
    const retryAfter = answer.status === 429 || answer.status === 503
      ? retryAfterSeconds(answer.headers["retry-after"])
      : undefined;
    throw new VendorCallError(`${shownUrl(url)} answered ${answer.status}`, {
      status: answer.status,
      ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }),
    });
  }
  return { status: answer.status, body: answer.body, durationMs };
}

/** Renders and sends a connector's fetch call for `count` proxies. */
export function fetchProvider(
  fetch: FetchConfig,
  credential: Readonly<Record<string, unknown>>,
  count: number,
  options: Omit<ProviderCallOptions, "timeoutMs"> & { timeoutMs?: number },
): Promise<ProviderAnswer> {
  return callProvider(renderFetchCall(fetch, credential, count), {
    ...options,
    timeoutMs: options.timeoutMs ?? fetch.timeout_ms,
  });
}
