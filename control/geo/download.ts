/**
 * A URL database's download: its URL with `{YYYY}` and `{MM}` filled for the month (UTC), its
 * credentials in the Authorization header, through the egress guard (HTTPS only, no internal
 * address, no redirect, a deadline and a size bound), then unpacked (unpack.ts). Messages name
 * the host and path only: a URL's query, like the credentials, may hold a licence key.
 */
import { errorText } from "../../shared/errors.ts";
import type { GeoFormat } from "../../shared/geo/contract.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { callOptions } from "../egress/call-options.ts";
import { egressRequest, shownUrl } from "../egress/guard.ts";
import { type DownloadAuth, fillDownloadUrl } from "../model/geo.ts";
import { MAX_GEO_FILE_BYTES } from "./files.ts";
import { unpackDownload } from "./unpack.ts";

/** A large city database over a slow link: minutes, not the seconds a vendor call gets. */
export const DOWNLOAD_TIMEOUT_MS = 5 * 60_000;

export interface DownloadSource {
  format: GeoFormat;
  url: string;
  auth: DownloadAuth | null;
}

/** A download that brought no file: the reason names the host and path, never a secret. */
export class DownloadError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DownloadError";
  }
}

function authorization(auth: DownloadAuth | null): Record<string, string> {
  if (auth === null) return {};
  if (auth.type === "basic") {
    const pair = Buffer.from(`${auth.username}:${auth.password}`, "utf8").toString("base64");
    return { authorization: `Basic ${pair}` };
  }
  return { authorization: `Bearer ${auth.token}` };
}

/** The stored auth as a download takes it; anything else (a hand-edited row) is none. */
export function storedAuth(value: unknown): DownloadAuth | null {
  if (typeof value !== "object" || value === null) return null;
  const auth = value as Record<string, unknown>;
  if (
    auth.type === "basic" && typeof auth.username === "string" &&
    typeof auth.password === "string"
  ) {
    return { type: "basic", username: auth.username, password: auth.password };
  }
  if (auth.type === "token" && typeof auth.token === "string") {
    return { type: "token", token: auth.token };
  }
  return null;
}

/** Downloads the file for `at`'s month; DownloadError for anything that brought no file. */
export async function downloadFile(
  source: DownloadSource,
  options: { settings: ControlSettings; at: Date; signal?: AbortSignal },
): Promise<Uint8Array> {
  const target = fillDownloadUrl(source.url, options.at);
  let where = target;
  try {
    where = shownUrl(new URL(target));
  } catch {
    // The guard says what is wrong with it.
  }
  let answer;
  try {
    answer = await egressRequest(target, {
      ...callOptions(options.settings, options.signal),
      timeoutMs: DOWNLOAD_TIMEOUT_MS,
      maxBytes: MAX_GEO_FILE_BYTES,
      headers: { accept: "*/*", ...authorization(source.auth) },
    });
  } catch (error) {
    throw new DownloadError(errorText(error), { cause: error });
  }
  if (answer.status < 200 || answer.status > 299) {
    throw new DownloadError(`${where} answered ${answer.status}`);
  }
  try {
    return unpackDownload(new Uint8Array(answer.body), source.format, MAX_GEO_FILE_BYTES);
  } catch (error) {
    throw new DownloadError(`${where}: ${errorText(error)}`, { cause: error });
  }
}
