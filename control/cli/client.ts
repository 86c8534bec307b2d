/**
 * The CLI's one way to the admin API: a base URL, a bearer token, JSON in and out, and error
 * answers (`{error, detail}`) turned into messages that list every field the API named.
 */
import { ApiError, UnreachableError } from "./errors.ts";

/** JSON requests give up after this; uploads and backups stream without a deadline. */
const REQUEST_TIMEOUT_MS = 60_000;

export type Query = Record<string, string | number | boolean | undefined | null>;

export interface RequestOptions {
  body?: unknown;
  query?: Query;
  /** A streamed body (an upload), sent as it is, with its type and length when known. */
  stream?: { body: ReadableStream<Uint8Array>; contentType: string; lengthBytes?: number };
  /** No deadline: the request streams a large body or answer. */
  untimed?: boolean;
  /** Request fields besides the usual (an Idempotency-Key). */
  headers?: Record<string, string>;
  /** Ends the request early (a follow stopped by Ctrl-C), besides its deadline. */
  signal?: AbortSignal;
}

export interface Connection {
  url: string;
  token?: string;
  /** What a 401 suggests; a login's hint unless told (a distribution key has its own). */
  unauthorizedHint?: string;
}

const LOGIN_HINT = "(log in again with `octoprox login <url>`, or check OCTOPROX_TOKEN)";

export class Client {
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #hint: string;

  constructor(connection: Connection) {
    this.baseUrl = connection.url.replace(/\/+$/, "");
    this.#token = connection.token;
    this.#hint = connection.unauthorizedHint ?? LOGIN_HINT;
  }

  /** A JSON answer (undefined for 204). */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}) {
    const response = await this.send(method, path, options);
    const text = await response.text();
    if (text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (error) {
      throw new UnreachableError(this.baseUrl, {
        cause: new Error("the answer is not JSON (is this an Octoprox API?)", { cause: error }),
      });
    }
  }

  /** The raw answer of a successful request (its body not read yet): a download. */
  async send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    // The audit log says a write came from the CLI (x-octoprox-client).
    const headers: Record<string, string> = {
      accept: "application/json",
      "x-octoprox-client": "cli",
      ...options.headers,
    };
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    let body: BodyInit | undefined;
    if (options.stream) {
      headers["content-type"] = options.stream.contentType;
      if (options.stream.lengthBytes !== undefined) {
        headers["content-length"] = String(options.stream.lengthBytes);
      }
      body = options.stream.body;
    } else if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    const url = this.urlOf(path, options.query);
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers,
        body,
        // A streamed body needs half duplex (Node's fetch refuses one otherwise).
        ...(options.stream ? { duplex: "half" } : {}),
        signal: signalOf(options),
      } as RequestInit);
    } catch (error) {
      throw new UnreachableError(this.baseUrl, { cause: error });
    }
    if (!response.ok) throw await apiErrorOf(method, path, response, this.#hint);
    return response;
  }

  urlOf(path: string, query?: Query): string {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
    }
    const search = params.toString();
    return `${this.baseUrl}/api/v1${path}${search ? `?${search}` : ""}`;
  }
}

/** The request's deadline (none for a stream) and the caller's own signal, whichever ends first. */
function signalOf(options: RequestOptions): AbortSignal | undefined {
  const deadline = options.untimed || options.stream
    ? undefined
    : AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  if (options.signal === undefined) return deadline;
  return deadline === undefined ? options.signal : AbortSignal.any([deadline, options.signal]);
}

/** `POST /projects: 422 Invalid request` and one line per field the API named. */
async function apiErrorOf(
  method: string,
  path: string,
  response: Response,
  hint: string,
): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  let body: unknown = undefined;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // Not JSON (a proxy in between, say): its status says what happened.
  }
  const answer = (body ?? {}) as { error?: unknown; detail?: unknown; request_id?: unknown };
  const summary = typeof answer.error === "string"
    ? answer.error
    : response.statusText || "Request failed";
  const lines = [`${method} /api/v1${path.split("?")[0]}: ${response.status} ${summary}`];
  lines.push(...detailLines(answer.detail));
  if (typeof answer.request_id === "string") lines.push(`  request id: ${answer.request_id}`);
  if (response.status === 401) lines.push(`  ${hint}`);
  return new ApiError(response.status, lines.join("\n"), body);
}

/** Every field of `detail`: a list of `{field, message}`, an object, or text. */
export function detailLines(detail: unknown): string[] {
  if (detail === undefined || detail === null) return [];
  if (Array.isArray(detail)) {
    return detail.map((item) => {
      if (item && typeof item === "object" && "field" in item) {
        const { field, message } = item as { field: unknown; message?: unknown };
        return `  - ${String(field)}: ${String(message ?? "")}`;
      }
      return `  - ${typeof item === "string" ? item : JSON.stringify(item)}`;
    });
  }
  if (typeof detail === "object") {
    return Object.entries(detail as Record<string, unknown>).map(([key, value]) =>
      `  ${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`
    );
  }
  return [`  ${String(detail)}`];
}
