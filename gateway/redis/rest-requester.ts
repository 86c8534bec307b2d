/**
 * The HTTP side of the gateway's HTTP Redis transport: how `@upstash/redis` reaches the REST
 * endpoint (its `Requester`), one `fetch` per request.
 *
 * It is ours rather than the package's own for four reasons, each a behaviour the gateway needs:
 * - Answers are asked base64-encoded (`Upstash-Encoding: base64`) and decoded to bytes, never to
 *   text: the feed's sections are binary, and the package decodes every string as UTF-8, which
 *   corrupts them. The commands' adapter (http.ts) makes text of what is text.
 * - Each request has a deadline of its own (OCTOPROX_REDIS_REQUEST_TIMEOUT), and is sent once:
 *   the package retries five times over about 4 s, where the gateway's writers keep what Redis
 *   did not take and send it again themselves.
 * - It counts requests and bytes for /metrics, the figures a REST host bills by.
 * - It reads nothing from the environment (the package's own client reads telemetry variables,
 *   which the gateway's permissions do not grant).
 *
 * A Redis error of one command (WRONGTYPE, NOSCRIPT…) is that command's `error`, which the
 * package raises as its own error with Redis's words; a refused request (401, a transaction
 * aborted at queue time, a server error) or no answer at all raises `RedisHttpError`.
 */
import type { Requester, UpstashRequest, UpstashResponse } from "@upstash/redis";
import { errorText, RedisHttpError } from "../../shared/errors.ts";

/** What the requester counted since it was made. */
export interface RestCounts {
  requests: number;
  failed: number;
  bytesSent: number;
  bytesReceived: number;
}

export interface RestRequesterOptions {
  /** The endpoint's base URL (`https://…`), without a trailing slash. */
  url: string;
  token: string;
  /** Each request's deadline. */
  timeoutMs: number;
}

/** A REST answer before decoding: base64 strings (a bare `OK` left as is), numbers, nulls, arrays. */
type Encoded = string | number | null | Encoded[];

/** A decoded answer: bytes where Redis answered a string. */
export type RestValue = Uint8Array | "OK" | number | null | RestValue[];

const encoder = new TextEncoder();

export class RestRequester implements Requester {
  readonly counts: RestCounts = { requests: 0, failed: 0, bytesSent: 0, bytesReceived: 0 };
  /** Upstash's read-your-writes token: later reads see this client's earlier writes. */
  upstashSyncToken = "";
  readonly #url: string;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;

  constructor(options: RestRequesterOptions) {
    this.#url = options.url.replace(/\/+$/, "");
    this.#timeoutMs = options.timeoutMs;
    this.#headers = {
      authorization: `Bearer ${options.token}`,
      "content-type": "application/json",
      "upstash-encoding": "base64",
    };
  }

  async request<TResult = unknown>(req: UpstashRequest): Promise<UpstashResponse<TResult>> {
    const path = req.path ?? [];
    const url = [this.#url, ...path].join("/");
    const body = JSON.stringify(req.body);
    const headers = this.upstashSyncToken === ""
      ? this.#headers
      : { ...this.#headers, "upstash-sync-token": this.upstashSyncToken };
    this.counts.requests++;
    this.counts.bytesSent += encoder.encode(body).byteLength;
    let text: string;
    let status: number;
    try {
      const response = await fetch(url, {
        method: "POST",
        headers,
        body,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      status = response.status;
      text = await response.text();
      this.upstashSyncToken = response.headers.get("upstash-sync-token") ?? this.upstashSyncToken;
    } catch (error) {
      throw this.#refused(`did not answer: ${errorText(error)}`, undefined, error);
    }
    // The answers are JSON with base64 strings: ASCII, so characters are bytes.
    this.counts.bytesReceived += text.length;
    const answer = parseAnswer(text);
    const batch = path[0] === "pipeline" || path[0] === "multi-exec";
    if (status !== 200) {
      // A single command's Redis error is its answer; anything else refuses the request.
      if (status === 400 && !batch && typeof answer?.error === "string") {
        return { error: answer.error };
      }
      const said = typeof answer?.error === "string" ? answer.error : "no error text";
      throw this.#refused(`answered ${status}: ${said}`, status);
    }
    if (batch) {
      if (!Array.isArray(answer)) throw this.#refused("answered a batch with no list", status);
      return answer.map((item: { result?: Encoded; error?: string }) =>
        item.error === undefined ? { result: decode(item.result ?? null) } : { error: item.error }
      ) as UpstashResponse<TResult>;
    }
    if (answer === undefined || (!("result" in answer) && !("error" in answer))) {
      throw this.#refused("answered with no result", status);
    }
    return answer.error === undefined
      ? { result: decode(answer.result ?? null) as TResult }
      : { error: answer.error };
  }

  /** A request Redis did not answer: counted, and its error. */
  #refused(what: string, status: number | undefined, cause?: unknown): RedisHttpError {
    this.counts.failed++;
    return new RedisHttpError(
      `Redis REST endpoint ${what}`,
      status,
      cause === undefined ? undefined : { cause },
    );
  }
}

/** The answer's JSON object or list; undefined for anything else. */
// deno-lint-ignore no-explicit-any
function parseAnswer(text: string): any {
  try {
    const answer = JSON.parse(text);
    return typeof answer === "object" && answer !== null ? answer : undefined;
  } catch {
    return undefined;
  }
}

function decode(value: Encoded): RestValue {
  if (typeof value === "string") return value === "OK" ? "OK" : base64Bytes(value);
  if (Array.isArray(value)) return value.map(decode);
  return value;
}

function base64Bytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
