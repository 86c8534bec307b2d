/**
 * The CLI's failures, from the error catalogue: each knows its exit status (1: the command
 * failed, 2: it was used wrong), so main.ts maps every error to a status in one place.
 */
import { ErrorCode, OctoproxError } from "../../shared/errors.ts";

export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** The command could not do what was asked (exit 1); the message is for a person. */
export class CliError extends OctoproxError {
  readonly exitCode: number = EXIT_FAILED;
  constructor(message: string, options?: { cause?: unknown; code?: ErrorCode }) {
    super(options?.code ?? ErrorCode.invalid, message, options);
    this.name = "CliError";
  }
}

/** The command line itself is wrong: a missing option, a bad value (exit 2). */
export class UsageError extends CliError {
  override readonly exitCode: number = EXIT_USAGE;
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** The API did not answer at all (refused, timed out, not an Octoprox). */
export class UnreachableError extends CliError {
  readonly url: string;
  constructor(url: string, options?: { cause?: unknown }) {
    super(`Cannot reach the Octoprox API at ${url}${reasonOf(options?.cause)}`, {
      ...options,
      code: ErrorCode.upstreamConnect,
    });
    this.name = "UnreachableError";
    this.url = url;
  }
}

/** An answer with an error status; `body` is its parsed JSON (`{error, detail}`) when any. */
export class ApiError extends CliError {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, message: string, body: unknown) {
    super(message, { code: codeOf(status) });
    this.name = "ApiError";
    this.status = status;
    this.body = body;
  }

  /** `detail`'s field issues, when the answer lists some (a 422). */
  get issues(): { field: string; message: string; line?: number }[] {
    const detail = (this.body as { detail?: unknown } | undefined)?.detail;
    if (!Array.isArray(detail)) return [];
    return detail.filter((item): item is { field: string; message: string; line?: number } =>
      typeof item === "object" && item !== null && typeof item.field === "string"
    );
  }
}

function codeOf(status: number): ErrorCode {
  if (status === 401) return ErrorCode.unauthorized;
  if (status === 403) return ErrorCode.forbidden;
  if (status === 404) return ErrorCode.notFound;
  if (status === 409) return ErrorCode.conflict;
  if (status === 503) return ErrorCode.storeUnavailable;
  return ErrorCode.invalid;
}

/** The runtime's reason a request failed (ECONNREFUSED, a timeout), for the one-line message. */
function reasonOf(cause: unknown): string {
  if (!(cause instanceof Error)) return "";
  if (cause.name === "TimeoutError") return ": no answer in time";
  const inner = cause.cause as { code?: string; message?: string } | undefined;
  const reason = inner?.code ?? inner?.message ?? cause.message;
  return reason ? `: ${reason}` : "";
}
