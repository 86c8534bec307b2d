/**
 * The gateway's feed follower. It follows the feed stream with a blocking read from its own
 * position, but whatever wakes it (an entry, the periodic re-check, a retry) it reads the head
 * as it stands then, never an entry's content:
 *
 * 1. GET the head. No head: keep what was applied. A head of another schema (a controller of
 *    another release during an upgrade): ignored the same way. The applied digest: done.
 * 2. The head and the manifest in one MULTI; the head's digest must be the manifest's HMAC under
 *    this process's secret.
 * 3. The sections whose digest differs from the applied copy, in one HMGET inside a MULTI with
 *    the head again: a head that moved meanwhile means a newer compile landed (its own entry
 *    wakes the follower), so the read starts over.
 * 4. Each fetched section is opened, its JSON digested against the manifest, and parsed.
 * 5. A complete feed goes to `apply`: fetched sections new, every other section the very object
 *    applied before, so the snapshot can keep its index.
 *
 * Anything that fails applies nothing (never a partial, missing or unverifiable feed); the read
 * is retried with back-off from the head. Only the current head is ever applied, so a lost or
 * repeated entry costs one read at most.
 *
 * Runtime-neutral: runs under Deno in the gateway and under Node in the tests. It takes the
 * Redis client (either transport, shared/redis/contract.ts) and a logger. It runs on the `Loop`
 * base (shared/async/loop.ts): a cycle reads the head; the wait for the next duty is either
 *
 * - a blocking read of the stream on a connection of its own (TCP): an edit is seen at once,
 *   and the back-off after a failure ends early on a new entry; or
 * - a wait of the poll interval (HTTP, which cannot block): an edit is seen within one interval
 *   and one read, at one GET of the head per interval.
 */
import type { BlockingStreamReader, GatewayRedis } from "../../shared/redis/contract.ts";
import {
  constantTimeEqual,
  FeedIntegrityError,
  type FeedKeys,
  manifestDigest,
  open,
  sectionDigest,
} from "../../shared/feed/codec.ts";
import { readHead, readManifest } from "../../shared/feed/manifest.ts";
import {
  type ConnectorSection,
  type FeedSections,
  GLOBAL_SECTION,
  type GlobalSection,
  type Manifest,
  RUNTIME_SECTION,
  type RuntimeSection,
} from "../../shared/feed/models.ts";
import { connectorIdOf, parseSection } from "../../shared/feed/sections.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { errorText } from "../../shared/errors.ts";
import { abortable } from "../../shared/async/abort.ts";
import { type CycleResult, Loop, UNCOUNTED } from "../../shared/async/loop.ts";
import { sleep } from "../../shared/async/sleep.ts";

/** What the follower logs through: pino's `(fields, message)` shape. */
export interface FeedLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** One verified, complete feed, handed to `apply`. */
export interface FeedUpdate {
  /** The head's digest this update brings the gateway to. */
  digest: string;
  /** The compile's wall-clock time (display only). */
  compiledAtMs: number;
  /** Every section; those not in `changed` are the very objects of the last update. */
  sections: FeedSections;
  /** Section names fetched for this update (new or changed). */
  changed: ReadonlySet<string>;
  /** Connector ids whose sections left the feed since the last update. */
  removedConnectors: ReadonlySet<string>;
  /** The first feed this process applies. */
  first: boolean;
}

/** How the follower waits for the next edit: on the stream (TCP), or a poll of the head (HTTP). */
export type FeedWait =
  | { blockingReader: () => BlockingStreamReader }
  | { pollIntervalMs: number };

export interface FeedFollowerOptions {
  /** The process's client: the head, manifest and section reads. */
  redis: Pick<GatewayRedis, "get" | "multi">;
  wait: FeedWait;
  keys: Pick<RedisKeys, "feedHead" | "feedManifest" | "feedSections" | "feedStream">;
  feedKeys: FeedKeys;
  logger: FeedLogger;
  /** Applies a verified feed; raising counts a failure and the read is retried. */
  apply: (update: FeedUpdate) => void | Promise<void>;
  /** The head is read at least this often, entry or not (a net for lost entries). */
  recheckIntervalMs?: number;
  /**
   * Told each time a read verified the head: a new feed applied, or the applied one still
   * current (OCTOPROX_FEED_MAX_STALE counts from the last).
   */
  onRead?: () => void;
  /** Waits after a failed read: the first, doubling to the last. */
  backoff?: { initialMs?: number; maxMs?: number };
  /**
   * How long a stop waits for a read of the head under way (default 2 s; the gateway passes its
   * request deadline): with Redis away a read can hang on its connection, and a stop must not.
   */
  stopWaitMs?: number;
}

export interface FeedFollowerStats {
  ready: boolean;
  applied_digest: string | null;
  applied_at: string | null;
  compiled_at: string | null;
  applies: number;
  /** Sections fetched and opened over the process's life (unchanged ones are never fetched). */
  sections_fetched: number;
  head_reads: number;
  failures: number;
  consecutive_failures: number;
  last_error: string | null;
  /** What the follower is waiting out, when not failing: a missing head or another schema. */
  holding: string | null;
}

/** What one read of the head came to. */
export type SyncOutcome = "applied" | "current" | "no_head" | "other_schema" | "moved";

interface Applied {
  digest: string;
  compiledAtMs: number;
  manifest: Manifest;
  sections: FeedSections;
}

/** How often a read that found the head moving starts over before waiting for the entry. */
const MOVED_ATTEMPTS = 3;

export class FeedFollower extends Loop {
  readonly #o: FeedFollowerOptions;
  readonly #recheckMs: number;
  readonly #stopWaitMs: number;
  /** Polling (HTTP): the wait between reads of the head; undefined on the stream (TCP). */
  readonly #pollMs: number | undefined;
  #reader: BlockingStreamReader | undefined;
  #started = false;
  #stopped: Promise<void> | undefined;
  /** The last cycle read the head: the next waits for an entry (or the re-check) first. */
  #synced = false;
  #applied: Applied | undefined;
  #appliedAtMs: number | undefined;
  #position: string | undefined;
  #applies = 0;
  #sectionsFetched = 0;
  #headReads = 0;
  #failures = 0;
  #lastError: string | undefined;
  #holding: string | undefined;
  /** A sync in hand: concurrent callers (the loop, `syncNow`) share it. */
  #syncing: Promise<SyncOutcome> | undefined;

  constructor(options: FeedFollowerOptions) {
    super({
      name: "feed_follower",
      backoff: {
        initialMs: options.backoff?.initialMs ?? 500,
        maxMs: options.backoff?.maxMs ?? 15_000,
      },
    });
    this.#o = options;
    this.#recheckMs = options.recheckIntervalMs ?? 30_000;
    this.#stopWaitMs = options.stopWaitMs ?? 2_000;
    this.#pollMs = "pollIntervalMs" in options.wait ? options.wait.pollIntervalMs : undefined;
  }

  /** True once the first feed is applied; stays true (a gateway keeps its last feed). */
  get ready(): boolean {
    return this.#applied !== undefined;
  }

  /** The feed applied last, if any. */
  get sections(): FeedSections | undefined {
    return this.#applied?.sections;
  }

  stats(): FeedFollowerStats {
    const applied = this.#applied;
    return {
      ready: applied !== undefined,
      applied_digest: applied?.digest ?? null,
      applied_at: this.#appliedAtMs === undefined
        ? null
        : new Date(this.#appliedAtMs).toISOString(),
      compiled_at: applied ? new Date(applied.compiledAtMs).toISOString() : null,
      applies: this.#applies,
      sections_fetched: this.#sectionsFetched,
      head_reads: this.#headReads,
      failures: this.#failures,
      consecutive_failures: this.consecutiveFailures,
      last_error: this.#lastError ?? null,
      holding: this.#holding ?? null,
    };
  }

  /**
   * Starts following; a second call does nothing, and a stopped follower does not restart.
   * Resolves at once, unlike the base's task (the gateway's core awaits its start): the loop
   * runs on until `stop()`, and a loop that broke is logged here.
   */
  override start(): Promise<void> {
    if (this.#started || this.#stopped !== undefined) return Promise.resolve();
    this.#started = true;
    const wait = this.#o.wait;
    if ("blockingReader" in wait) this.#reader = wait.blockingReader();
    super.start().catch((error) => {
      this.#o.logger.error({ error: errorText(error) }, "Feed follower stopped on an error");
    });
    return Promise.resolve();
  }

  /**
   * Stops following and closes the follower's own connection. Never raises; safe twice; settles
   * within `stopWaitMs` whatever Redis does.
   */
  override stop(): Promise<void> {
    this.#stopped ??= (async () => {
      // The base aborts the loop's signal before its first wait, so the read below fails
      // after the abort and is not counted.
      const stopping = super.stop();
      // A blocked read cannot be cancelled on its connection; closing the connection ends it,
      // but not a read queued while the client reconnects (ioredis leaves it pending for ever),
      // so the loop stops waiting on the stop signal, not on the read.
      this.#reader?.close();
      await stopping;
      // A read of the head on the process's client fails at the client's next reconnect; the
      // stop waits for it a bounded while only.
      const syncing = this.#syncing;
      if (syncing !== undefined) {
        await abortable(syncing, AbortSignal.timeout(this.#stopWaitMs)).catch(() => {});
      }
    })();
    return this.#stopped;
  }

  /** Reads the head now and applies a new feed if there is one (also what the loop runs). */
  syncNow(): Promise<SyncOutcome> {
    this.#syncing ??= this.#sync().then((outcome) => {
      if (outcome === "applied" || outcome === "current") this.#o.onRead?.();
      return outcome;
    }).finally(() => {
      this.#syncing = undefined;
    });
    return this.#syncing;
  }

  /**
   * One read of the head. The position is taken before the head is read: an entry appended
   * after it wakes the blocked read of the next duty, so no publish can fall between the read
   * and the wait. A head that kept moving is left to the entry of the compile that moved it,
   * which wakes that read at once (it came after the position).
   */
  protected override async cycle(signal: AbortSignal): Promise<CycleResult> {
    try {
      const reader = this.#reader;
      if (reader !== undefined) {
        this.#position ??= await abortable(reader.tail(this.#o.keys.feedStream), signal);
      }
      await abortable(this.syncNow(), signal);
    } catch (error) {
      // A stop is not a failure.
      if (signal.aborted) return UNCOUNTED;
      throw error;
    }
    this.#synced = true;
  }

  /**
   * After a read of the head, the blocking read of the stream: an entry, or the re-check
   * interval. A read that fails counts as a failed cycle and is backed off; after a failure the
   * head is read again at once (the back-off was waited already).
   */
  protected override async nextDuty(signal: AbortSignal): Promise<void> {
    if (!this.#synced) return;
    this.#synced = false;
    if (this.#pollMs !== undefined) {
      // Polling: the next cycle reads the head after one interval (a stop ends the wait).
      await sleep(this.#pollMs, signal).catch(() => {});
      return;
    }
    const reader = this.#reader!;
    const startedAt = Date.now();
    try {
      const last = await abortable(
        reader.after(this.#o.keys.feedStream, this.#position!, this.#recheckMs),
        signal,
      );
      if (last !== undefined) this.#position = last;
    } catch (error) {
      if (signal.aborted) return;
      this.recordFailure(startedAt, error);
      await this.backOff(this.backoffDelayMs(this.consecutiveFailures, startedAt), signal);
    }
  }

  /**
   * Waits out the back-off after a failed read, but a new entry on the feed stream ends the
   * wait: a refused feed (forged, or written under another secret) must not hold back the next
   * good publish for a back-off of up to 15 s. When the stream cannot be read either (Redis
   * away), the rest of the back-off is slept.
   */
  protected override async backOff(delayMs: number, signal: AbortSignal): Promise<void> {
    const reader = this.#reader;
    const until = Date.now() + delayMs;
    if (reader !== undefined && this.#position !== undefined) {
      try {
        const last = await abortable(
          reader.after(this.#o.keys.feedStream, this.#position, delayMs),
          signal,
        );
        if (last !== undefined) {
          this.#position = last;
          return;
        }
      } catch {
        // Counted by the read that follows, which fails the same way.
      }
    }
    // A stop ends the wait (sleep rejects for nothing else).
    await sleep(Math.max(0, until - Date.now()), signal).catch(() => {});
  }

  async #sync(): Promise<SyncOutcome> {
    for (let attempt = 1;; attempt++) {
      const outcome = await this.#syncOnce();
      if (outcome !== "moved" || attempt >= MOVED_ATTEMPTS) return outcome;
    }
  }

  async #syncOnce(): Promise<SyncOutcome> {
    const { redis, keys, feedKeys } = this.#o;
    this.#headReads += 1;
    const headText = await redis.get(keys.feedHead);
    if (headText === null) {
      this.#hold("no head", "No feed head in Redis; keeping the feed applied");
      return "no_head";
    }
    const read = readHead(headText);
    if (read.kind === "other_schema") {
      this.#hold(
        `feed schema ${String(read.schema)}`,
        "Feed head of another schema ignored; keeping the feed applied",
      );
      return "other_schema";
    }
    if (read.kind === "invalid") throw new FeedIntegrityError(`Feed head: ${read.problem}`);
    this.#holding = undefined;
    const head = read.head;
    const applied = this.#applied;
    if (applied && head.digest === applied.digest) return "current";

    // The head and the manifest together, so the manifest is the one the head names.
    const [headAgain, manifestText] = await execAll<[string | null, string | null]>(
      redis.multi().get(keys.feedHead).get(keys.feedManifest),
    );
    if (headAgain !== headText) return "moved";
    if (manifestText === null) throw new FeedIntegrityError("Feed head without a manifest");
    if (!constantTimeEqual(await manifestDigest(feedKeys, manifestText), head.digest)) {
      throw new FeedIntegrityError("Feed manifest does not verify with this secret");
    }
    const manifest = readManifest(manifestText);
    if (!manifest) throw new FeedIntegrityError("Feed manifest does not match its model");
    const listed = manifest.sections;
    if (!Object.hasOwn(listed, GLOBAL_SECTION) || !Object.hasOwn(listed, RUNTIME_SECTION)) {
      // A feed without them is partial or empty: never applied.
      throw new FeedIntegrityError("Feed manifest lacks its global or runtime section");
    }

    const wanted = Object.keys(listed).filter((name) =>
      applied?.manifest.sections[name] !== listed[name]
    );
    let fetched: (Uint8Array | null)[] = [];
    if (wanted.length > 0) {
      const [headThird, values] = await execAll<[string | null, (Uint8Array | null)[]]>(
        redis.multi().get(keys.feedHead).hmgetBuffer(keys.feedSections, ...wanted),
      );
      if (headThird !== headText) return "moved";
      fetched = values;
    }
    const opened = await Promise.all(wanted.map(async (name, i) => {
      const bytes = fetched[i];
      if (bytes === null || bytes === undefined) {
        throw new FeedIntegrityError(`Feed section ${name} is listed but missing`);
      }
      const json = await open(feedKeys, bytes);
      if (!constantTimeEqual(await sectionDigest(feedKeys, json), listed[name])) {
        throw new FeedIntegrityError(`Feed section ${name} does not match its digest`);
      }
      return parseSection(name, json);
    }));
    this.#sectionsFetched += opened.length;

    let global: GlobalSection | undefined = applied?.sections.global;
    let runtime: RuntimeSection | undefined = applied?.sections.runtime;
    const fresh = new Map<string, ConnectorSection>();
    for (const parsed of opened) {
      if (parsed.kind === "global") global = parsed.section;
      else if (parsed.kind === "runtime") runtime = parsed.section;
      else fresh.set(parsed.connectorId, parsed.section);
    }
    const connectors = new Map<string, ConnectorSection>();
    for (const name of Object.keys(listed).sort()) {
      const id = connectorIdOf(name);
      if (id === undefined) continue;
      const section = fresh.get(id) ?? applied?.sections.connectors.get(id);
      if (!section) throw new FeedIntegrityError(`Feed section ${name} could not be carried over`);
      connectors.set(id, section);
    }
    if (!global || !runtime) {
      throw new FeedIntegrityError("Feed lacks its global or runtime section");
    }
    const removedConnectors = new Set<string>();
    for (const id of applied?.sections.connectors.keys() ?? []) {
      if (!connectors.has(id)) removedConnectors.add(id);
    }
    const sections: FeedSections = { global, runtime, connectors };
    await this.#o.apply({
      digest: head.digest,
      compiledAtMs: head.compiled_at,
      sections,
      changed: new Set(wanted),
      removedConnectors,
      first: applied === undefined,
    });
    this.#applied = { digest: head.digest, compiledAtMs: head.compiled_at, manifest, sections };
    this.#appliedAtMs = Date.now();
    this.#applies += 1;
    if (applied === undefined) {
      this.#o.logger.info({ digest: head.digest, sections: wanted.length }, "First feed applied");
    }
    return "applied";
  }

  /** Logs once per spell what the follower is waiting out. */
  #hold(reason: string, message: string): void {
    if (this.#holding === reason) return;
    this.#holding = reason;
    this.#o.logger.warn({ reason, applied: this.#applied?.digest ?? null }, message);
  }

  protected override cycleRecovered(failures: number): void {
    this.#o.logger.info({ failures }, "Feed reads recovered");
  }

  protected override cycleFailed(error: unknown, consecutiveFailures: number): void {
    this.#failures += 1;
    const message = errorText(error);
    // One line per streak and cause: a lasting fault must not flood the log.
    if (message !== this.#lastError || consecutiveFailures === 1) {
      this.#o.logger.error(
        {
          error: message,
          failures: consecutiveFailures,
          applied: this.#applied?.digest ?? null,
        },
        "Feed read failed; keeping the feed applied",
      );
    }
    this.#lastError = message;
  }
}

/** Runs a MULTI and returns its replies, raising the first command's error. */
async function execAll<T extends unknown[]>(
  multi: { exec(): Promise<[Error | null, unknown][] | null> },
): Promise<T> {
  const replies = await multi.exec();
  if (!replies) throw new Error("Feed read transaction was discarded");
  for (const [error] of replies) if (error) throw error;
  return replies.map(([, value]) => value) as T;
}
