/**
 * The IP database sync as this process runs it: its sources from the settings (the shared
 * folder first, then the api's internal endpoint with the gateway token), its lines through the
 * gateway's logger. With neither set it has nowhere to fetch from: the stack stays empty, and
 * one line at start says so.
 */
import type { FeedKeys } from "../../shared/feed/codec.ts";
import type { GatewaySettings } from "../../shared/settings.ts";
import type { Logger } from "../base/log.ts";
import { apiSource, folderSource, type GeoFileSource } from "../geo/sources.ts";
import { GeoDatabaseSync } from "../geo/sync.ts";

/** Deno's reader for the shared folder: undefined for a file it does not hold. */
async function readFolderFile(path: string): Promise<Uint8Array | undefined> {
  try {
    return await Deno.readFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    // Deno.errors.NotCapable: the process may not read the folder (its --allow-read).
    throw error;
  }
}

export function geoSync(
  settings: GatewaySettings,
  logger: Logger,
  feedKeys: FeedKeys,
): GeoDatabaseSync {
  const sources: GeoFileSource[] = [];
  if (settings.geoDir !== undefined) sources.push(folderSource(settings.geoDir, readFolderFile));
  if (settings.geoUrl !== undefined) {
    sources.push(apiSource(settings.geoUrl, feedKeys.gatewayTokenHex));
  }
  if (sources.length === 0) {
    logger.info(
      "No IP database source (OCTOPROX_GATEWAY_GEO_URL, OCTOPROX_GATEWAY_GEO_DIR): none is opened",
    );
  }
  return new GeoDatabaseSync({
    sources,
    logger: {
      info: (fields, message) => logger.info(message, fields),
      error: (fields, message) => logger.warn(message, fields),
    },
  });
}
