/**
 * The dashboard's one way to the admin API: the same /api/v1 a script uses, with the signed-in
 * user's bearer token. Every failure is an ApiError carrying the API's own words and, for a
 * validation error, the field each message names (`body.name`), so forms show it beside the
 * field.
 */

const TOKEN_KEY = "octoprox.token";

export interface FieldIssue {
  field: string;
  message: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly issues: FieldIssue[];

  constructor(status: number, message: string, issues: FieldIssue[] = []) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.issues = issues;
  }

  /** The message for one field (`name` or `rate_limit.burst`), if the API named it. */
  forField(field: string): string | undefined {
    return this.issues.find((issue) =>
      issue.field === `body.${field}` || issue.field.startsWith(`body.${field}.`)
    )?.message;
  }

  /** The message for exactly one field, not those under it (`config` alone: the vendor's refusal). */
  forFieldExactly(field: string): string | undefined {
    return this.issues.find((issue) => issue.field === `body.${field}`)?.message;
  }
}

type Listener = () => void;
const signedOut = new Set<Listener>();

export function token(): string | null {
  return localStorage.getItem(TOKEN_KEY);
}

export function setToken(value: string | null): void {
  if (value === null) localStorage.removeItem(TOKEN_KEY);
  else localStorage.setItem(TOKEN_KEY, value);
}

/** Called when the API refuses the token (expired or revoked): the app shows sign-in. */
export function onSignedOut(listener: Listener): () => void {
  signedOut.add(listener);
  return () => signedOut.delete(listener);
}

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | undefined | null>;
  signal?: AbortSignal;
  /** A body sent as it is (a file upload), with its content type. */
  raw?: { body: BodyInit; contentType: string };
}

function urlOf(path: string, query?: RequestOptions["query"]): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const search = params.toString();
  return `/api/v1${path}${search ? `?${search}` : ""}`;
}

export async function api<T = unknown>(
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<T> {
  // The audit log says a write came from the dashboard (x-octoprox-client).
  const headers: Record<string, string> = { "x-octoprox-client": "dashboard" };
  const bearer = token();
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  let body: BodyInit | undefined;
  if (options.raw) {
    headers["content-type"] = options.raw.contentType;
    body = options.raw.body;
  } else if (options.body !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(options.body);
  }
  let response: Response;
  try {
    response = await fetch(urlOf(path, options.query), {
      method,
      headers,
      body,
      signal: options.signal,
    });
  } catch (error) {
    if ((error as Error).name === "AbortError") throw error;
    throw new ApiError(0, "The API does not answer. Is Octoprox running?");
  }
  const text = await response.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!response.ok) {
    const answer = (parsed ?? {}) as { error?: string; detail?: FieldIssue[] };
    if (response.status === 401 && bearer) {
      setToken(null);
      for (const listener of signedOut) listener();
    }
    throw new ApiError(
      response.status,
      answer.error ?? `${response.status} ${response.statusText}`,
      Array.isArray(answer.detail) ? answer.detail : [],
    );
  }
  return parsed as T;
}

/**
 * A text body sent with XMLHttpRequest, whose upload events fetch lacks: `onProgress` hears the
 * bytes sent so far and the total while the body goes up. Failures are ApiErrors as above.
 */
export function upload<T = unknown>(
  path: string,
  options: {
    query?: RequestOptions["query"];
    body: Blob | string;
    contentType: string;
    onProgress?: (sent: number, total: number) => void;
  },
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", urlOf(path, options.query));
    const bearer = token();
    if (bearer) xhr.setRequestHeader("authorization", `Bearer ${bearer}`);
    xhr.setRequestHeader("x-octoprox-client", "dashboard");
    xhr.setRequestHeader("content-type", options.contentType);
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) options.onProgress?.(event.loaded, event.total);
    };
    xhr.onerror = () => reject(new ApiError(0, "The API does not answer. Is Octoprox running?"));
    xhr.onload = () => {
      let parsed: unknown = undefined;
      try {
        parsed = xhr.responseText ? JSON.parse(xhr.responseText) : undefined;
      } catch {
        parsed = undefined;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve(parsed as T);
        return;
      }
      const answer = (parsed ?? {}) as { error?: string; detail?: FieldIssue[] };
      if (xhr.status === 401 && bearer) {
        setToken(null);
        for (const listener of signedOut) listener();
      }
      reject(
        new ApiError(
          xhr.status,
          answer.error ?? `${xhr.status} ${xhr.statusText}`,
          Array.isArray(answer.detail) ? answer.detail : [],
        ),
      );
    };
    xhr.send(options.body);
  });
}
