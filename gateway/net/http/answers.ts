/**
 * The answers the gateway gives itself: a short plain-text reason as the body and a
 * `Proxy-Status` field (RFC 9209) naming the error, so a client can tell the gateway's own
 * answers from the origin's. 407 adds the challenge clients need to send credentials.
 */
import { latin1Encode } from "./heads.ts";

export interface Answer {
  status: number;
  /** An RFC 9209 error token (or the extension `bandwidth_limit_exceeded`). */
  proxyStatus: string;
  /** One short sentence, no secrets: the body, and `details` in Proxy-Status. */
  reason: string;
}

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: "Bad Request",
  403: "Forbidden",
  407: "Proxy Authentication Required",
  417: "Expectation Failed",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  509: "Bandwidth Limit Exceeded",
};

export const PROXY_AUTHENTICATE = 'Basic realm="octoprox"';

/** A structured-field string (RFC 8941): printable ASCII, `\` and `"` escaped. */
export function sfString(text: string): string {
  const printable = text.replace(/[^\x20-\x7e]/g, "?").slice(0, 200);
  return `"${printable.replace(/[\\"]/g, (char) => `\\${char}`)}"`;
}

/** The `Proxy-Status` value for an error. */
export function proxyStatusValue(token: string, details: string): string {
  const safeToken = /^[a-z][a-z0-9_.*-]*$/.test(token) ? token : "proxy_internal_error";
  return `octoprox; error=${safeToken}; details=${sfString(details)}`;
}

/**
 * The `Proxy-Status` value of a target's answer a block rule judged and the client got after
 * all: its status, and the verdict and rule in `details`.
 */
export function verdictProxyStatus(status: number, verdict: string, rule: string): string {
  return `octoprox; received-status=${status}; details=${sfString(`${verdict} by rule ${rule}`)}`;
}

export interface AnswerOptions {
  /** Keep the client's connection for another request (otherwise `Connection: close`). */
  keepAlive: boolean;
  /** The request's method: a HEAD answer has no body. */
  method?: string;
}

export function encodeAnswer(answer: Answer, options: AnswerOptions): Uint8Array {
  const text = STATUS_TEXT[answer.status] ?? "Error";
  const body = `${answer.reason.replace(/[\r\n]+/g, " ")}\n`;
  const bodyBytes = new TextEncoder().encode(body);
  let head = `HTTP/1.1 ${answer.status} ${text}\r\n` +
    "Content-Type: text/plain; charset=utf-8\r\n" +
    `Content-Length: ${bodyBytes.length}\r\n` +
    `Proxy-Status: ${proxyStatusValue(answer.proxyStatus, answer.reason)}\r\n`;
  if (answer.status === 407) head += `Proxy-Authenticate: ${PROXY_AUTHENTICATE}\r\n`;
  head += options.keepAlive ? "\r\n" : "Connection: close\r\n\r\n";
  const headBytes = latin1Encode(head);
  if (options.method === "HEAD") return headBytes;
  const out = new Uint8Array(headBytes.length + bodyBytes.length);
  out.set(headBytes, 0);
  out.set(bodyBytes, headBytes.length);
  return out;
}

export const CONNECTION_ESTABLISHED: Uint8Array = latin1Encode(
  "HTTP/1.1 200 Connection established\r\n\r\n",
);

export const CONTINUE_100: Uint8Array = latin1Encode("HTTP/1.1 100 Continue\r\n\r\n");
