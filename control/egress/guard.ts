/**
 * The egress guard: the one way a provider descriptor's HTTP calls leave the control plane. A
 * descriptor is data an admin may write, so its calls must not reach the networks around us:
 *
 * - HTTPS only, without credentials in the URL.
 * - The host is resolved once, and refused when any address it resolves to is internal
 *   (loopback, private, carrier-grade NAT, link-local, unique-local, unspecified, multicast,
 *   reserved, cloud metadata; the gateway's destination guard's ranges, IPv4 forms inside IPv6
 *   included). The metadata names are refused without a lookup.
 * - The connection is pinned to the vetted address (the socket's lookup answers it), with the
 *   host as SNI and certificate name: a DNS answer that changes between check and connect
 *   cannot take the call elsewhere.
 * - No redirects, a deadline over the whole call, and a bounded answer.
 *
 * `allowLoopback` (OCTOPROX_EGRESS_ALLOW_LOOPBACK, for tests) admits 127.0.0.0/8 and ::1 only.
 * Alert webhooks (control/alerts/) go through the same guard with two leaves of their own: plain
 * HTTP (`allowHttp`), and `allowPrivate`, an admin's explicit per-channel leave to reach loopback,
 * private, shared and link-local addresses (metadata, unspecified, multicast and reserved ones
 * stay refused).
 * Error messages name the host and path, never the query: it may hold an API key.
 */
import { normaliseHost } from "../../shared/net/host.ts";
import { lookup as dnsLookup } from "node:dns/promises";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import { EgressRefusedError, VendorCallError } from "../../shared/errors.ts";
import { parseIp } from "../../shared/net/ip.ts";
import { prohibitedKind } from "../../shared/routing/destination-guard.ts";

export const DEFAULT_MAX_BYTES = 10 * 1024 * 1024;
export const DEFAULT_TIMEOUT_MS = 30_000;

/** Names of cloud metadata services, refused whatever they resolve to. */
const METADATA_NAMES: ReadonlySet<string> = new Set(["metadata.google.internal", "metadata"]);

export interface EgressOptions {
  method?: "GET" | "POST";
  headers?: Readonly<Record<string, string>>;
  body?: string;
  /** Deadline of the whole call: lookup, connection and answer. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** The largest answer body taken; a larger one is refused. */
  maxBytes?: number;
  /** Tests only: admit loopback addresses (never private or metadata ones). */
  allowLoopback?: boolean;
  /** A CA to trust instead of the system's store (tests); production leaves it unset. */
  ca?: string;
  /** Admit plain http:// (alert webhooks; descriptor calls stay HTTPS only). */
  allowHttp?: boolean;
  /** An admin's explicit leave: loopback, private, shared and link-local addresses admitted. */
  allowPrivate?: boolean;
}

/** What an admin's `allowPrivate` admits; metadata, unspecified and the rest stay refused. */
const PRIVATE_KINDS: ReadonlySet<string> = new Set([
  "loopback",
  "private",
  "shared (carrier-grade NAT)",
  "link-local",
]);

type AddressLeave = Pick<EgressOptions, "allowLoopback" | "allowPrivate">;

export interface EgressAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** How a message names a URL: host and path, never the query or the fragment. */
export function shownUrl(url: URL): string {
  return `${url.host}${url.pathname}`;
}

/** Why an address may not be reached, or undefined when it may. */
function addressRefusal(address: string, leave: AddressLeave): string | undefined {
  const ip = parseIp(address);
  if (ip === undefined) return `${address} is not an IP address`;
  const kind = prohibitedKind(ip);
  if (kind === undefined || (leave.allowLoopback && kind === "loopback")) return undefined;
  if (leave.allowPrivate && PRIVATE_KINDS.has(kind)) return undefined;
  return `${address} is a ${kind} address`;
}

/**
 * Why a descriptor's call host is refused when an admin saves it, or undefined when it is
 * acceptable. Names are resolved at call time (this install may not resolve vendor names), so
 * here only what is visibly internal is refused: IP literals in the blocked ranges, `localhost`
 * and names under `.localhost`, `.internal` and `.local`, and the metadata names.
 */
export function checkEgressHost(
  host: string,
  options: { allowLoopback?: boolean } = {},
): string | undefined {
  const name = normaliseHost(host);
  if (name === "") return "the host is empty";
  if (parseIp(name) !== undefined) {
    const refusal = addressRefusal(name, options);
    return refusal === undefined ? undefined : `${host}: ${refusal}`;
  }
  if (METADATA_NAMES.has(name)) return `${host} is a cloud metadata service`;
  if (name === "localhost") {
    return options.allowLoopback ? undefined : `${host} is this machine (loopback)`;
  }
  for (const suffix of [".localhost", ".internal", ".local"]) {
    if (name.endsWith(suffix)) return `${host} is a local name (${suffix})`;
  }
  return undefined;
}

/** The URL as the guard takes it; refuses what is not plain HTTPS (or HTTP, when allowed). */
function parseTarget(text: string, allowHttp = false): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch (error) {
    throw new EgressRefusedError("", "a vendor call's URL is not a valid URL", { cause: error });
  }
  const host = normaliseHost(url.hostname);
  if (url.protocol !== "https:" && !(allowHttp && url.protocol === "http:")) {
    throw new EgressRefusedError(
      host,
      `vendor calls use HTTPS only: ${url.protocol}//${shownUrl(url)} was refused`,
    );
  }
  if (url.username !== "" || url.password !== "") {
    throw new EgressRefusedError(
      host,
      `a vendor call's URL may not carry credentials (${shownUrl(url)}); send them in headers`,
    );
  }
  return url;
}

/** Resolves the host once and vets every address; answers the one to connect to. */
async function vettedAddress(
  url: URL,
  leave: AddressLeave,
): Promise<{ address: string; family: 4 | 6 }> {
  const host = normaliseHost(url.hostname);
  if (METADATA_NAMES.has(host)) {
    throw new EgressRefusedError(host, `${shownUrl(url)}: ${host} is a cloud metadata service`);
  }
  let addresses: { address: string; family: number }[];
  try {
    addresses = parseIp(host) !== undefined
      ? [{ address: host, family: host.includes(":") ? 6 : 4 }]
      : await dnsLookup(host, { all: true, verbatim: true });
  } catch (error) {
    throw new VendorCallError(`${shownUrl(url)}: ${host} does not resolve`, { cause: error });
  }
  if (addresses.length === 0) {
    throw new VendorCallError(`${shownUrl(url)}: ${host} does not resolve`);
  }
  for (const { address } of addresses) {
    const refusal = addressRefusal(address, leave);
    if (refusal !== undefined) {
      const via = address === host ? "" : ` (${host} resolves to it)`;
      throw new EgressRefusedError(host, `${shownUrl(url)} was refused: ${refusal}${via}`);
    }
  }
  const chosen = addresses[0];
  return { address: chosen.address, family: chosen.family === 6 ? 6 : 4 };
}

/** How long a save waits for a name's addresses before leaving them to the call itself. */
const VET_LOOKUP_TIMEOUT_MS = 5_000;

/**
 * Refuses a target the guard would refuse, before anything is sent: its scheme, credentials in
 * it, a metadata name, or an address (every one its host resolves to) outside what the leave
 * admits. A host that does not resolve now, or not within a few seconds, passes: the call checks
 * again when it is made.
 */
export async function vetTarget(
  target: string,
  options: Pick<EgressOptions, "allowHttp" | "allowLoopback" | "allowPrivate"> = {},
): Promise<void> {
  const url = parseTarget(target, options.allowHttp);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      vettedAddress(url, options),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, VET_LOOKUP_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    if (error instanceof EgressRefusedError) throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** A socket lookup that answers the vetted address, whatever name it is asked for. */
function pinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return (_hostname, options, callback) => {
    // Node asks for every address when it races families (autoSelectFamily), one otherwise.
    if ((options as { all?: boolean }).all) {
      (callback as (error: null, addresses: { address: string; family: number }[]) => void)(
        null,
        [{ address, family }],
      );
    } else callback(null, address, family);
  };
}

/** Reads the body whole, refusing it past `maxBytes`. */
function readBody(
  response: IncomingMessage,
  url: URL,
  maxBytes: number,
  host: string,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tooLarge = () =>
      new EgressRefusedError(
        host,
        `${shownUrl(url)} answered more than ${maxBytes} bytes, the most a call takes`,
      );
    const declared = Number(response.headers["content-length"]);
    if (Number.isFinite(declared) && declared > maxBytes) {
      response.destroy();
      return reject(tooLarge());
    }
    const chunks: Buffer[] = [];
    let size = 0;
    response.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        response.destroy();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    response.once("end", () => resolve(Buffer.concat(chunks)));
    response.once("error", reject);
    // A close before the end: the connection dropped mid-answer (a settled promise ignores it).
    response.once("close", () => {
      if (!response.complete) reject(new Error("the answer was cut short"));
    });
  });
}

/**
 * Makes one HTTPS request under the guard and answers its status, headers and body. Refusals
 * are `EgressRefusedError`; a call that found no answer (no connection, TLS refused, the
 * deadline, the signal) is a `VendorCallError` without a status. Any status that is not a
 * redirect is answered: the caller judges it.
 */
export async function egressRequest(
  target: string,
  options: EgressOptions = {},
): Promise<EgressAnswer> {
  const url = parseTarget(target, options.allowHttp);
  const host = normaliseHost(url.hostname);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const onAbort = () => controller.abort();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  if (options.signal?.aborted) controller.abort();
  const failed = (error: unknown): Error => {
    if (error instanceof EgressRefusedError || error instanceof VendorCallError) return error;
    if (timedOut) {
      return new VendorCallError(`${shownUrl(url)} did not answer within ${timeoutMs} ms`, {
        cause: error,
      });
    }
    if (options.signal?.aborted) {
      return new VendorCallError(`the call to ${shownUrl(url)} was cancelled`, {
        cause: options.signal.reason,
      });
    }
    return new VendorCallError(`${shownUrl(url)} could not be reached`, { cause: error });
  };
  try {
    const pin = await Promise.race([
      vettedAddress(url, options),
      new Promise<never>((_resolve, reject) => {
        if (controller.signal.aborted) reject(controller.signal.reason);
        controller.signal.addEventListener("abort", () => reject(controller.signal.reason), {
          once: true,
        });
      }),
    ]);
    const body = options.body === undefined ? undefined : Buffer.from(options.body, "utf8");
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const plain = url.protocol === "http:";
      const request = (plain ? http : https).request({
        protocol: url.protocol,
        host,
        port: url.port === "" ? (plain ? 80 : 443) : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: options.method ?? "GET",
        headers: {
          accept: "application/json",
          "user-agent": "octoprox",
          ...options.headers,
          ...(body === undefined ? {} : { "content-length": String(body.length) }),
        },
        lookup: pinnedLookup(pin.address, pin.family),
        // SNI and the certificate check name the host; an IP host is checked as an IP.
        ...(parseIp(host) === undefined ? { servername: host } : {}),
        ca: options.ca,
        // A connection of its own: a pooled one would skip the pinned lookup.
        agent: false,
        signal: controller.signal,
      }, resolve);
      request.once("error", reject);
      request.end(body);
    });
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400) {
      response.destroy();
      const why = `a redirect (${status}); vendor calls do not follow redirects`;
      throw new EgressRefusedError(host, `${shownUrl(url)} answered ${why}`);
    }
    const answer = await readBody(response, url, maxBytes, host);
    return { status, headers: response.headers, body: answer };
  } catch (error) {
    throw failed(error);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}
