/**
 * Where a gateway gets an IP database file by its checksum: a shared folder (files named by
 * their SHA-256, OCTOPROX_GATEWAY_GEO_DIR), then the api's internal endpoint
 * (OCTOPROX_GATEWAY_GEO_URL, `Authorization: Bearer <gateway token>`). A source answers the
 * bytes, or undefined when it does not have the file; the sync checks what it got
 * (sync.ts). Web-standard fetch only, so both runtimes run it.
 */

/** One place files come from. */
export interface GeoFileSource {
  /** How log lines and errors name it (never with a secret). */
  readonly name: string;
  /** The file, or undefined when this source does not have it; throws when it cannot say. */
  fetch(
    checksum: string,
    expectedBytes: number,
    signal: AbortSignal,
  ): Promise<Uint8Array | undefined>;
}

/** A large file over a busy link: the whole answer within this. */
export const FETCH_TIMEOUT_MS = 5 * 60_000;

/** The path the api serves files under (control/api/internal-geo.ts). */
export const INTERNAL_GEO_FILES_PATH = "/internal/geo/files";

/** The api's internal endpoint: its base URL, and the gateway token (hex) it takes. */
export function apiSource(baseUrl: string, gatewayTokenHex: string): GeoFileSource {
  const base = baseUrl.replace(/\/+$/, "");
  const where = new URL(base).host;
  return {
    name: `api ${where}`,
    async fetch(checksum, expectedBytes, signal) {
      const response = await fetch(`${base}${INTERNAL_GEO_FILES_PATH}/${checksum}`, {
        headers: { authorization: `Bearer ${gatewayTokenHex}` },
        signal: AbortSignal.any([signal, AbortSignal.timeout(FETCH_TIMEOUT_MS)]),
      });
      if (response.status === 404) {
        await response.body?.cancel();
        return undefined;
      }
      if (!response.ok) {
        await response.body?.cancel();
        throw new Error(`the api at ${where} answered ${response.status} for a database file`);
      }
      // A file the feed says is this size: a longer answer is not it, and is not read whole.
      const declared = Number(response.headers.get("content-length"));
      if (Number.isFinite(declared) && declared > expectedBytes) {
        await response.body?.cancel();
        throw new Error(
          `the api at ${where} answered ${declared} bytes, ${expectedBytes} expected`,
        );
      }
      return new Uint8Array(await response.arrayBuffer());
    },
  };
}

/**
 * Reads a file of the folder; undefined when there is none of that name. The runtime's own
 * reader, handed in by the process (gateway/app), so this file stays runtime-neutral.
 */
export type FolderReader = (path: string) => Promise<Uint8Array | undefined>;

/** A shared folder of files named by their SHA-256 (the name the feed lists them under). */
export function folderSource(dir: string, readFile: FolderReader): GeoFileSource {
  const folder = dir.replace(/\/+$/, "");
  return {
    name: `folder ${folder}`,
    fetch: (checksum) => readFile(`${folder}/${checksum}`),
  };
}
