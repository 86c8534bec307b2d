/**
 * geo_database_sync: the gateway's IP databases follow the feed. Each applied feed offers its
 * `geo` part (the databases in the order consulted, each by checksum); in the background the
 * loop fetches the files it lacks (sources.ts), checks each against its SHA-256 and size, opens
 * it with the same readers the control plane checked it with (shared/geo), and swaps the
 * stack whole once every listed file is open. Never on the request path: a request reads
 * the stack in force (contract.ts), the old one until the new one is complete.
 *
 * A file that cannot be had (no source has it, a checksum that does not match, a file that
 * does not open) fails the cycle: the stack in force stays, and the loop tries again after its
 * back-off. A file already open is never fetched again, whatever its database is renamed to.
 */
import { type CycleResult, Loop, type LoopLogger } from "../../shared/async/loop.ts";
import { toHex } from "../../shared/feed/codec.ts";
import type { FeedGeo } from "../../shared/feed/models.ts";
import { type GeoDatabase, GeoFormat } from "../../shared/geo/contract.ts";
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { openMmdb } from "../../shared/geo/mmdb.ts";
import { GeoStack } from "../../shared/geo/stack.ts";
import type { GeoView } from "./contract.ts";
import type { GeoFileSource } from "./sources.ts";

const CHECKSUM = /^[0-9a-f]{64}$/;
/** Waits between tries of a feed whose files cannot all be had: a second, doubling to 5 min. */
const BACKOFF = { initialMs: 1000, maxMs: 5 * 60_000 };
/** With nothing offered, the loop only waits for the next feed. */
const IDLE_WAIT_MS = 60 * 60_000;

export interface GeoSyncStats {
  /** Databases in the stack in force. */
  loaded: number;
  /** The feed lists databases the stack in force does not hold yet. */
  pending: boolean;
  /** Files fetched, checked and opened. */
  fetched: number;
  /** Files refused: a checksum or size that does not match, or a file that does not open. */
  refused: number;
  swaps: number;
  /** The databases in force: name, format, checksum, entries. */
  databases: { name: string; format: string; checksum: string; entries: number }[];
  last_error: string | null;
}

export interface GeoSyncOptions {
  /** Asked in order: the first that has a file gives it. */
  sources: readonly GeoFileSource[];
  logger?: LoopLogger;
}

/** An opened file and what the feed named it by. */
interface Opened {
  checksum: string;
  database: GeoDatabase;
}

/** A database under the name the feed gives it, its file's reader shared. */
function named(name: string, file: GeoDatabase): GeoDatabase {
  if (file.name === name) return file;
  return {
    name,
    format: file.format,
    size: file.size,
    version: file.version,
    lookup: (address) => file.lookup(address),
  };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function open(name: string, format: string, bytes: Uint8Array): GeoDatabase {
  if (format === GeoFormat.mmdb) return openMmdb(name, bytes);
  if (format === GeoFormat.geofeed) return openGeofeed(name, utf8.decode(bytes));
  throw new Error(`${name}: the format ${format} is not one this gateway reads`);
}

const keyOf = (format: string, checksum: string) => `${format}:${checksum}`;

export class GeoDatabaseSync extends Loop implements GeoView {
  readonly #sources: readonly GeoFileSource[];
  /** The latest feed's geo part; undefined until a feed is applied. */
  #wanted: FeedGeo | undefined;
  #wantedSignature = "";
  /** What the stack in force was built from, to tell an offer that changes nothing. */
  #inForce = "";
  #stack: GeoStack | undefined;
  #databases: GeoSyncStats["databases"] = [];
  /** Files open, by format and checksum: the stack's, and those fetched for the next one. */
  #files = new Map<string, Opened>();
  #fetched = 0;
  #refused = 0;
  #swaps = 0;
  #lastError: string | null = null;

  constructor(options: GeoSyncOptions) {
    super({ name: "geo_database_sync", logger: options.logger, backoff: BACKOFF });
    this.#sources = options.sources;
  }

  stack(): GeoStack | undefined {
    return this.#stack;
  }

  /** An applied feed's geo part: the loop makes the stack it lists, in the background. */
  offer(geo: FeedGeo): void {
    const signature = signatureOf(geo);
    this.#wanted = geo;
    // Feeds apply often; only a list that changed cuts a wait (a failing one keeps its back-off).
    if (signature === this.#wantedSignature) return;
    this.#wantedSignature = signature;
    if (signature !== this.#inForce) this.wake();
  }

  stats(): GeoSyncStats {
    return {
      loaded: this.#stack?.databases.length ?? 0,
      pending: this.#wanted !== undefined && this.#wantedSignature !== this.#inForce,
      fetched: this.#fetched,
      refused: this.#refused,
      swaps: this.#swaps,
      databases: this.#databases,
      last_error: this.#lastError,
    };
  }

  /** At once while the feed lists a stack not in force (after a failure's back-off). */
  protected override nextDuty(signal: AbortSignal): Promise<void> {
    if (this.#wanted !== undefined && this.#wantedSignature !== this.#inForce) {
      return Promise.resolve();
    }
    return this.waitFor(IDLE_WAIT_MS, signal);
  }

  /** A feed listing other files ends the back-off: they may be had where the last were not. */
  protected override backOff(delayMs: number, signal: AbortSignal): Promise<void> {
    return this.waitFor(delayMs, signal);
  }

  protected override async cycle(signal: AbortSignal): Promise<CycleResult> {
    const wanted = this.#wanted;
    if (wanted === undefined) return false;
    const signature = signatureOf(wanted);
    if (signature === this.#inForce) return false;
    try {
      const databases: GeoDatabase[] = [];
      for (const entry of wanted.databases) {
        signal.throwIfAborted();
        const file = await this.#file(
          entry.name,
          entry.format,
          entry.checksum,
          entry.size_bytes,
          signal,
        );
        databases.push(named(entry.name, file));
      }
      // Whole: the stack is swapped only once every listed file is open.
      this.#stack = new GeoStack(databases);
      this.#inForce = signature;
      this.#swaps++;
      this.#lastError = null;
      this.#databases = wanted.databases.map((entry, i) => ({
        name: entry.name,
        format: entry.format,
        checksum: entry.checksum,
        entries: databases[i].size,
      }));
      const kept = new Set(wanted.databases.map((entry) => keyOf(entry.format, entry.checksum)));
      for (const key of this.#files.keys()) if (!kept.has(key)) this.#files.delete(key);
      this.logger.info(
        { databases: wanted.databases.map((entry) => entry.name) },
        "IP databases in force",
      );
    } catch (error) {
      this.#lastError = error instanceof Error ? error.message : String(error);
      throw error;
    }
  }

  /** The opened file of that checksum: kept, or fetched, checked and opened now. */
  async #file(
    name: string,
    format: string,
    checksum: string,
    sizeBytes: number,
    signal: AbortSignal,
  ): Promise<GeoDatabase> {
    const key = keyOf(format, checksum);
    const held = this.#files.get(key);
    if (held !== undefined) return held.database;
    if (!CHECKSUM.test(checksum)) throw new Error(`${name}: the feed's checksum is not a SHA-256`);
    const reasons: string[] = [];
    for (const source of this.#sources) {
      let bytes: Uint8Array | undefined;
      try {
        bytes = await source.fetch(checksum, sizeBytes, signal);
      } catch (error) {
        reasons.push(`${source.name}: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      if (bytes === undefined) {
        reasons.push(`${source.name}: no such file`);
        continue;
      }
      const refusal = await mismatch(bytes, checksum, sizeBytes);
      if (refusal !== undefined) {
        this.#refused++;
        reasons.push(`${source.name}: ${refusal}`);
        continue;
      }
      let database: GeoDatabase;
      try {
        database = open(name, format, bytes);
      } catch (error) {
        this.#refused++;
        reasons.push(`${source.name}: ${error instanceof Error ? error.message : String(error)}`);
        continue;
      }
      this.#fetched++;
      this.#files.set(key, { checksum, database });
      return database;
    }
    throw new Error(`${name} (${checksum.slice(0, 12)}): ${reasons.join("; ") || "no source"}`);
  }
}

/** Why fetched bytes are not the file the feed lists, or undefined when they are. */
async function mismatch(
  bytes: Uint8Array,
  checksum: string,
  sizeBytes: number,
): Promise<string | undefined> {
  if (bytes.byteLength !== sizeBytes) {
    return `${bytes.byteLength} bytes where the feed lists ${sizeBytes}`;
  }
  const digest = toHex(
    new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>)),
  );
  return digest === checksum ? undefined : `its SHA-256 is ${digest.slice(0, 12)}…, not the feed's`;
}

/** What a stack is built from: the names, formats and files, in order. */
function signatureOf(geo: FeedGeo): string {
  return geo.databases.map((entry) => `${entry.name}\0${entry.format}\0${entry.checksum}`)
    .join("\n");
}
