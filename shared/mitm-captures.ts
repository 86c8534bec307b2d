/**
 * An interception capture: one exchange inside an intercepted tunnel, as the Inspector shows it,
 * kept in its project's capped stream (`mitm:requests:<project>`, about the last thousand,
 * shared/redis-keys.ts). The gateway writes entries through `encodeMitmCapture`, the api reads
 * them back through `decodeMitmCapture`. Everything is scrubbed before it is encoded (no query,
 * no credential, no cookie): the stream is readable by every role of the project's install.
 */

/** A header as captured: its name as sent, its value (scrubbed where it is a secret). */
export type CapturedHeader = [name: string, value: string];

export interface MitmCapture {
  /** Epoch ms the exchange ended. */
  atMs: number;
  method: string;
  /** The target's host and port (`host:port`). */
  host: string;
  /** The path, its query replaced by `?…` when it had one. */
  path: string;
  /** The status the client got (the target's, or the gateway's own; 0: none). */
  status: number;
  /** The gateway's own answer's Proxy-Status token; "" when the target answered. */
  proxyStatus: string;
  /** From the request's head to the answer's first byte, and to its end. */
  firstByteMs: number | null;
  totalMs: number;
  connectorId: string | null;
  proxyId: string | null;
  /** Request bytes sent upstream, answer bytes relayed to the client. */
  bytesUp: number;
  bytesDown: number;
  /** The client's request headers as it sent them, and as the target got them. */
  requestHeaders: CapturedHeader[];
  sentHeaders: CapturedHeader[];
  responseHeaders: CapturedHeader[];
  /** The client's TLS fingerprints (its ClientHello) and the name it asked for. */
  ja3: string;
  ja4: string;
  sni: string;
  /** The upstream side's HTTP/2 fingerprint (browser-grade modes only; "" otherwise). */
  http2: string;
  /** How the gateway's side towards the target was made: `plain`. */
  mode: string;
}

/** Headers whose values are secrets: kept by name, their value replaced. */
const SECRET_HEADERS: ReadonlySet<string> = new Set([
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  "x-auth-token",
]);

export const SCRUBBED = "[scrubbed]";

/** Most headers kept per list, and characters per value: a capture is for reading. */
export const MAX_CAPTURED_HEADERS = 100;
export const MAX_CAPTURED_VALUE_CHARS = 1_000;

/** Headers as a capture keeps them: secrets' values scrubbed, long values cut. */
export function captureHeaders(
  headers: Iterable<{ name: string; value: string }>,
): CapturedHeader[] {
  const captured: CapturedHeader[] = [];
  for (const { name, value } of headers) {
    if (captured.length >= MAX_CAPTURED_HEADERS) break;
    const lower = name.toLowerCase();
    captured.push([
      name,
      SECRET_HEADERS.has(lower) ? SCRUBBED : value.slice(0, MAX_CAPTURED_VALUE_CHARS),
    ]);
  }
  return captured;
}

/** A path as captured: its query dropped (it may carry tokens), its length bounded. */
export function capturePath(path: string): string {
  const query = path.indexOf("?");
  const bare = query === -1 ? path : `${path.slice(0, query)}?…`;
  return bare.slice(0, 2_000);
}

/** The entry's field/value pairs for XADD: scalars as text, header lists as JSON. */
export function encodeMitmCapture(capture: MitmCapture): string[] {
  return [
    "at",
    String(capture.atMs),
    "method",
    capture.method,
    "host",
    capture.host,
    "path",
    capture.path,
    "status",
    String(capture.status),
    "proxy_status",
    capture.proxyStatus,
    "first_byte_ms",
    capture.firstByteMs === null ? "" : String(Math.round(capture.firstByteMs)),
    "total_ms",
    String(Math.round(capture.totalMs)),
    "connector",
    capture.connectorId ?? "",
    "proxy",
    capture.proxyId ?? "",
    "bytes_up",
    String(capture.bytesUp),
    "bytes_down",
    String(capture.bytesDown),
    "request_headers",
    JSON.stringify(capture.requestHeaders),
    "sent_headers",
    JSON.stringify(capture.sentHeaders),
    "response_headers",
    JSON.stringify(capture.responseHeaders),
    "ja3",
    capture.ja3,
    "ja4",
    capture.ja4,
    "sni",
    capture.sni,
    "http2",
    capture.http2,
    "mode",
    capture.mode,
  ];
}

function headersOf(text: string | undefined): CapturedHeader[] {
  if (text === undefined || text === "") return [];
  try {
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) return [];
    return parsed.filter((pair): pair is CapturedHeader =>
      Array.isArray(pair) && pair.length === 2 && typeof pair[0] === "string" &&
      typeof pair[1] === "string"
    );
  } catch {
    return [];
  }
}

/** An entry's fields back into a capture; undefined for one this release cannot read. */
export function decodeMitmCapture(fields: readonly string[]): MitmCapture | undefined {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i], fields[i + 1]);
  const atMs = Number(map.get("at"));
  const status = Number(map.get("status"));
  const method = map.get("method") ?? "";
  if (!Number.isFinite(atMs) || !Number.isInteger(status) || method === "") return undefined;
  const firstByte = map.get("first_byte_ms") ?? "";
  const number = (name: string) => {
    const value = Number(map.get(name));
    return Number.isFinite(value) ? value : 0;
  };
  return {
    atMs,
    method,
    host: map.get("host") ?? "",
    path: map.get("path") ?? "",
    status,
    proxyStatus: map.get("proxy_status") ?? "",
    firstByteMs: firstByte === "" ? null : Number(firstByte),
    totalMs: number("total_ms"),
    connectorId: map.get("connector") || null,
    proxyId: map.get("proxy") || null,
    bytesUp: number("bytes_up"),
    bytesDown: number("bytes_down"),
    requestHeaders: headersOf(map.get("request_headers")),
    sentHeaders: headersOf(map.get("sent_headers")),
    responseHeaders: headersOf(map.get("response_headers")),
    ja3: map.get("ja3") ?? "",
    ja4: map.get("ja4") ?? "",
    sni: map.get("sni") ?? "",
    http2: map.get("http2") ?? "",
    mode: map.get("mode") ?? "",
  };
}
