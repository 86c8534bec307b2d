/**
 * Preflight's one echo through the proxy a request was routed to: a GET of the echo URL
 * (OCTOPROX_GATEWAY_ECHO_URL, the api's `/echo`) sent through that upstream, whose answer names
 * the address the echo saw the request come from, which is the exit, and, when the echo places
 * it, where. The whole exchange runs under one deadline; any failure (the proxy, the echo, an
 * answer that is not the echo's) throws, and the caller forwards the request as unchecked.
 *
 * How the GET travels: an HTTP(S) proxy takes a plain-HTTP echo as a forward request (the form
 * every HTTP proxy serves; a CONNECT to port 80 is refused by many); a SOCKS proxy, or an https
 * echo, goes through a tunnel (TLS inside it for https; not through an https proxy, whose own
 * TLS the runtime cannot nest another in). A nonce in the query keeps a cache from answering
 * for the echo; an answer that repeats another nonce is refused.
 */
import { base64Encode, latin1Decode, utf8Encode } from "../../shared/proxy-protocol/bytes.ts";
import { basicProxyAuthorization } from "../../shared/proxy-protocol/http-request.ts";
import { exitAddress } from "../../shared/geo/observation-wire.ts";
import { countryCode, type GeoLocation } from "../../shared/geo/contract.ts";
import type { UpstreamChoice } from "../../shared/routing/contract.ts";
import { dialUpstream } from "../net/io/dial.ts";
import { Leg } from "../net/io/leg.ts";

/** The longest answer read: an echo's is a line of JSON. */
const MAX_ANSWER_BYTES = 64 * 1024;
const READ_BYTES = 4096;
/** A CONNECT answer's head at most. */
const MAX_HEAD_BYTES = 8192;

/** What the echo said: the exit's address, and where the echo placed it when it did. */
export interface EchoAnswer {
  ip: string;
  /** The echo's own word on the place (its `endpoint` source); null when it named no country. */
  place: GeoLocation | null;
}

export class EchoError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "EchoError";
  }
}

function nonce(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(9));
  return base64Encode(bytes).replace(/\+/g, "-").replace(/\//g, "_");
}

/** Asks the echo at `url` through `upstream`, within `timeoutMs` in all. */
export async function echoThrough(
  upstream: UpstreamChoice,
  url: URL,
  timeoutMs: number,
): Promise<EchoAnswer> {
  const startedMs = Date.now();
  const secure = url.protocol === "https:";
  const port = Number(url.port || (secure ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const said = nonce();
  const query = new URLSearchParams(url.search);
  query.set("nonce", said);
  const path = `${url.pathname}?${query}`;
  const authority = url.host;
  const forward = !secure && (upstream.scheme === "http" || upstream.scheme === "https");
  if (secure && upstream.scheme === "https") {
    throw new EchoError("an https echo cannot be reached through an https proxy");
  }
  const link = await dialUpstream({
    upstream,
    target: { host, port },
    tunnel: !forward,
    timeoutMs,
    maxHeadBytes: MAX_HEAD_BYTES,
  });
  let leg: Leg = link.leg;
  const left = () => timeoutMs - (Date.now() - startedMs);
  const timer = setTimeout(() => leg.close(), Math.max(1, left()));
  try {
    if (secure) leg = new Leg(await Deno.startTls(leg.conn as Deno.TcpConn, { hostname: host }));
    let head = `GET ${forward ? `http://${authority}${path}` : path} HTTP/1.1\r\n` +
      `Host: ${authority}\r\nAccept: application/json\r\nConnection: close\r\n`;
    if (forward && upstream.username !== null) {
      const credentials = { username: upstream.username, password: upstream.password ?? "" };
      head += `Proxy-Authorization: ${basicProxyAuthorization(credentials)}\r\n`;
    }
    await leg.write(utf8Encode(`${head}\r\n`));
    const answer = await readAll(leg, link.leftover);
    return readEcho(answer, said);
  } catch (error) {
    if (error instanceof EchoError) throw error;
    throw new EchoError(left() <= 0 ? "the echo did not answer in time" : "the echo failed", {
      cause: error,
    });
  } finally {
    clearTimeout(timer);
    leg.close();
    link.leg.close();
  }
}

/** Reads until the echo closes (it was asked to) or the answer is too long to be one. */
async function readAll(leg: Leg, first: Uint8Array): Promise<Uint8Array> {
  const chunks: Uint8Array[] = first.length > 0 ? [first] : [];
  let total = first.length;
  const buffer = new Uint8Array(READ_BYTES);
  for (;;) {
    const count = await leg.read(buffer);
    if (count === null) break;
    chunks.push(buffer.slice(0, count));
    total += count;
    if (total > MAX_ANSWER_BYTES) throw new EchoError("the echo's answer is too long");
    if (complete(chunks, total)) break;
  }
  return joined(chunks, total);
}

/** A head with a Content-Length whose body is all here: no need to wait for the close. */
function complete(chunks: readonly Uint8Array[], total: number): boolean {
  const text = latin1Decode(chunks.length === 1 ? chunks[0] : joined(chunks, total));
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return false;
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, end));
  return length !== null && text.length - end - 4 >= Number(length[1]);
}

function joined(chunks: readonly Uint8Array[], total: number): Uint8Array {
  const all = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return all;
}

/** The body of a chunked answer, whole (an echo's is small and arrives complete). */
function dechunk(body: string): string {
  let out = "";
  let at = 0;
  for (;;) {
    const lineEnd = body.indexOf("\r\n", at);
    if (lineEnd < 0) throw new EchoError("the echo's chunked answer is cut short");
    const size = parseInt(body.slice(at, lineEnd).split(";")[0].trim(), 16);
    if (!Number.isFinite(size)) throw new EchoError("the echo's chunked answer is malformed");
    if (size === 0) return out;
    out += body.slice(lineEnd + 2, lineEnd + 2 + size);
    at = lineEnd + 2 + size + 2;
  }
}

/**
 * The echo's JSON: its `ip` (or httpbin's `origin`), and `country`/`region`/`city`/`asn` when it
 * placed the address.
 */
export function readEcho(answer: Uint8Array, said: string): EchoAnswer {
  const text = latin1Decode(answer);
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) throw new EchoError("the echo's answer has no complete head");
  const head = text.slice(0, end);
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head);
  if (status === null) throw new EchoError("the echo's answer is not HTTP");
  if (status[1] !== "200") throw new EchoError(`the echo answered ${status[1]}`);
  let body = text.slice(end + 4);
  if (/\r\ntransfer-encoding:[^\r]*chunked/i.test(head)) body = dechunk(body);
  let raw: unknown;
  try {
    // The body was read as latin1 to find the head; JSON is UTF-8.
    raw = JSON.parse(new TextDecoder().decode(Uint8Array.from(body, (c) => c.charCodeAt(0))));
  } catch {
    throw new EchoError("the echo's answer is not JSON");
  }
  if (typeof raw !== "object" || raw === null) throw new EchoError("the echo's answer is not JSON");
  const r = raw as Record<string, unknown>;
  if (r.nonce !== undefined && r.nonce !== said) {
    throw new EchoError("the echo's answer is to another request");
  }
  // httpbin's `{"origin": "<caller>[, <proxy>]"}` names the exit first.
  const address = typeof r.ip === "string"
    ? r.ip
    : typeof r.origin === "string"
    ? r.origin.split(",")[0].trim()
    : undefined;
  const ip = address === undefined ? undefined : exitAddress(address);
  if (ip === undefined) throw new EchoError("the echo's answer names no address");
  const country = countryCode(r.country);
  const place = country === null ? null : {
    country,
    region: typeof r.region === "string" && r.region !== "" ? r.region.toUpperCase() : null,
    city: typeof r.city === "string" && r.city !== "" ? r.city : null,
    asn: typeof r.asn === "number" && Number.isInteger(r.asn) ? r.asn : null,
  };
  return { ip, place };
}
