/**
 * The feed builder, on the leading controller: follows the change stream and the runtime stream,
 * compiles and publishes. A change after a quiet spell is compiled at once; changes that arrive
 * within the compile interval of the last compile wait and are compiled together, however many.
 * A new lead compiles at once and publishes nothing before a compile of its own (a process that
 * leads again while Postgres is away would otherwise roll the feed back to an older compile).
 *
 * Every runtime entry, whatever its kind, asks for the runtime section again: the builder reads
 * the runtime state from Redis and publishes on the compile in hand, without reading Postgres.
 * Provider-API connectors' sections are read from their pools at every publish too, so a pool
 * that changed (the pool job appends a runtime entry) is published the same way.
 * Each publish re-reads the runtime state, so the runtime section always matches the ids the
 * compile holds; the publisher writes only the sections whose digest moved.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { deriveFeedKeys, type FeedKeys, sectionDigest } from "../../shared/feed/codec.ts";
import { RUNTIME_SECTION, type RuntimeSection } from "../../shared/feed/models.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { Strategy } from "../../shared/roles.ts";
import { errorText } from "../../shared/errors.ts";
import { BroadcastFollower, type FollowerSnapshot } from "../core/consumers.ts";
import type { Logger } from "../core/logging.ts";
import type { CycleResult } from "../../shared/async/loop.ts";
import type { StreamEntry } from "../core/work-streams.ts";
import { compile, type Compiled, readRuntimeSection, type SectionText } from "./compile.ts";
import type { ControllerLease } from "../core/lease.ts";
import { awaitLead } from "../core/leased.ts";
import { FeedPublisher, NotLeaderError, type PublishResult } from "./publisher.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { poolSections } from "./pool-sections.ts";
import { poolStoreOf } from "../provider-api/pool/store.ts";

export interface FeedBuilderOptions {
  database: Pick<Database, "transaction">;
  redis: Redis;
  keys: RedisKeys;
  lease: ControllerLease;
  logger: Logger;
  compileIntervalMs: number;
  reconcileIntervalMs: number;
  /** OCTOPROX_INTERNAL_SECRET: the feed's keys are derived from it. */
  internalSecret: string;
  /** OCTOPROX_DEFAULT_STRATEGY: served for a project whose stored strategy no router has. */
  defaultStrategy: Strategy;
  /** The process's provider registry; the shipped descriptors alone when not given. */
  providers?: ProviderRegistry;
  /** Told after every compile that worked (the producers read `latest` themselves). */
  onCompiled?: (compiled: Compiled) => void;
  /** Told after every publish that worked, written or not. */
  onPublished?: (result: PublishResult) => void;
  /**
   * Asks workers to judge every exit again (`reattribute all`); true once Redis took it. Asked
   * when a publish finds the head gone, and again after each publish until taken.
   */
  requestReattribute?: () => Promise<boolean>;
}

/** The feed builder's row in the snapshot: a follower's, and its compiles and publishes. */
export interface FeedBuilderSnapshot extends FollowerSnapshot {
  compiles: number;
  compiled_at: string | null;
  pending_changes: boolean;
  /** Publishes that worked, whether they wrote anything or not. */
  publishes: number;
  publish_failures: number;
  /** When the last publish that worked ended. */
  published_at: string | null;
  publish_owed: boolean;
  publish_problem: string | null;
  head_digest: string | null;
  /** The sections of the last compile, the runtime section included. */
  sections: number | null;
  /**
   * What can be traffic-blocked (connectors with a limit, projects with a quota) and the blocks
   * the last published runtime section carried (epoch ms until, by id); null before a publish.
   */
  /** Cloud instances of the last compile by cloud, then status; null before a compile. */
  cloud_instances: Readonly<Record<string, Readonly<Record<string, number>>>> | null;
  traffic: {
    limited_connectors: readonly string[];
    limited_projects: readonly string[];
    connector_blocks: Record<string, number>;
    project_blocks: Record<string, number>;
  } | null;
}

export class FeedBuilder extends BroadcastFollower {
  readonly #o: FeedBuilderOptions;
  readonly #providers: ProviderRegistry;
  #feedKeys: Promise<FeedKeys> | undefined;
  #publisher: FeedPublisher | undefined;
  #term = 0;
  #leadSignal: AbortSignal | undefined;
  #dirty = false;
  #lastCompileAt = Number.NEGATIVE_INFINITY;
  #latest: Compiled | undefined;
  /** The runtime section of the last publish that worked. */
  #lastRuntime: RuntimeSection | undefined;
  /** The lease term the latest compile was made under: a new lead publishes only its own. */
  #compiledTerm = 0;
  /** A publish is owed: after a compile, on a runtime entry, or after a publish that failed. */
  #publishOwed = false;
  /** A `reattribute all` asked for that Redis has not taken yet. */
  #reattributeOwed = false;
  #publishProblem: string | undefined;
  #compiles = 0;
  #publishes = 0;
  #publishFailures = 0;
  #publishedAt: number | undefined;
  #lastPublish: PublishResult | undefined;

  constructor(options: FeedBuilderOptions) {
    super({
      name: "feed_builder",
      logger: options.logger,
      reader: options.redis.duplicate({ enableOfflineQueue: true }),
      streams: [
        { name: "changes", key: options.keys.changesStream },
        { name: "runtime", key: options.keys.runtimeStream },
      ],
      reconcileIntervalMs: options.reconcileIntervalMs,
    });
    this.#o = options;
    this.#providers = options.providers ?? new ProviderRegistry();
  }

  /** The last compile that worked, kept across lost leads and Postgres outages. */
  get latest(): Compiled | undefined {
    return this.#latest;
  }

  /**
   * Why the feed cannot be published, while leading: set by a publish that failed and cleared
   * by the next that works. Readiness reads it.
   */
  get publishProblem(): string | undefined {
    return this.#o.lease.leading ? this.#publishProblem : undefined;
  }

  override snapshot(): FeedBuilderSnapshot {
    return {
      ...super.snapshot(),
      compiles: this.#compiles,
      compiled_at: this.#latest ? new Date(this.#latest.compiledAt).toISOString() : null,
      pending_changes: this.#dirty,
      publishes: this.#publishes,
      publish_failures: this.#publishFailures,
      published_at: this.#publishedAt === undefined
        ? null
        : new Date(this.#publishedAt).toISOString(),
      publish_owed: this.#publishOwed,
      publish_problem: this.#publishProblem ?? null,
      head_digest: this.#lastPublish?.headDigest ?? null,
      sections: this.#latest ? this.#latest.sections.size + 1 : null,
      cloud_instances: this.#latest?.cloudInstances ?? null,
      traffic: this.#latest && this.#lastRuntime
        ? {
          limited_connectors: this.#latest.limited.connectors,
          limited_projects: this.#latest.limited.projects,
          connector_blocks: Object.fromEntries(
            this.#lastRuntime.traffic_blocks.map((b) => [b.connector_id, b.until_ms]),
          ),
          project_blocks: Object.fromEntries(
            this.#lastRuntime.project_blocks.map((b) => [b.project_id, b.until_ms]),
          ),
        }
        : null,
    };
  }

  protected override async nextDuty(signal: AbortSignal): Promise<void> {
    const lead = await awaitLead(this.#o.lease, signal, () => this.resetStreak());
    if (!lead) return;
    this.#leadSignal = lead.signal;
    if (lead.term !== this.#term) {
      this.#term = lead.term;
      this.requestFullRead("new lead");
    }
  }

  protected override readSignal(signal: AbortSignal): AbortSignal {
    return this.#leadSignal ? AbortSignal.any([signal, this.#leadSignal]) : signal;
  }

  protected override blockMsNow(): number {
    // An owed publish is retried at the next cycle, not after a whole blocked read.
    if (this.#publishOwed && this.#canPublish()) return 1;
    if (!this.#dirty) return super.blockMsNow();
    return this.#lastCompileAt + this.#o.compileIntervalMs - Date.now();
  }

  protected override async readAll(): Promise<void> {
    await this.#compile();
    // A full read (new lead, reconcile, gap) also checks every stored section opens to its
    // digest: a section altered in place is otherwise invisible to the manifest check.
    await this.#publish(true);
  }

  protected override onEntries(stream: string, entries: readonly StreamEntry[]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    // Told apart by stream: every runtime entry asks for the runtime section again.
    if (stream === this.#o.keys.runtimeStream) this.#publishOwed = true;
    else this.#dirty = true;
    return Promise.resolve();
  }

  protected override async cycle(signal: AbortSignal): Promise<CycleResult> {
    if (!this.#o.lease.leading) return false;
    const result = await super.cycle(signal);
    if (this.#dirty && Date.now() - this.#lastCompileAt >= this.#o.compileIntervalMs) {
      await this.#compile();
      await this.#publish();
      return true;
    }
    if (this.#publishOwed && this.#canPublish()) {
      await this.#publish();
      return true;
    }
    return result;
  }

  #keys(): Promise<FeedKeys> {
    this.#feedKeys ??= deriveFeedKeys(this.#o.internalSecret);
    return this.#feedKeys;
  }

  /** Only on a compile of this lead's own term. */
  #canPublish(): boolean {
    return this.#latest !== undefined && this.#compiledTerm === this.#o.lease.term &&
      this.#o.lease.leading;
  }

  async #compile(): Promise<void> {
    // Cleared first: a change read while the compile runs asks for the next one.
    this.#dirty = false;
    this.#lastCompileAt = Date.now();
    const term = this.#o.lease.term;
    try {
      this.#latest = await compile(this.#o.database, {
        keys: await this.#keys(),
        defaultStrategy: this.#o.defaultStrategy,
        providers: this.#providers,
        logger: this.logger,
        internalSecret: this.#o.internalSecret,
      });
    } catch (error) {
      this.#dirty = true;
      throw error;
    }
    this.#compiledTerm = term;
    this.#compiles += 1;
    this.#publishOwed = true;
    this.#o.onCompiled?.(this.#latest);
  }

  async #publish(verifySections = false): Promise<void> {
    const compiled = this.#latest;
    if (!compiled || !this.#canPublish()) return;
    this.#publishOwed = false;
    try {
      const keys = await this.#keys();
      const nowMs = Date.now();
      const pool = poolStoreOf({
        redis: this.#o.redis,
        keys: this.#o.keys,
        settings: { internalSecret: this.#o.internalSecret },
      });
      const pools = await poolSections(
        compiled.pools,
        pool,
        keys,
        nowMs,
        compiled.poolConcurrency,
      );
      const runtime = await readRuntimeSection(this.#o.redis, this.#o.keys, {
        ...compiled,
        proxyIds: pools.proxyIds.size === 0
          ? compiled.proxyIds
          : new Set([...compiled.proxyIds, ...pools.proxyIds]),
      }, nowMs);
      const runtimeJson = JSON.stringify(runtime);
      const sections = new Map<string, SectionText>(compiled.sections);
      for (const [name, text] of pools.sections) sections.set(name, text);
      sections.set(RUNTIME_SECTION, {
        json: runtimeJson,
        digest: await sectionDigest(keys, runtimeJson),
      });
      this.#publisher ??= new FeedPublisher({
        redis: this.#o.redis,
        keys: this.#o.keys,
        feedKeys: keys,
        lease: this.#o.lease,
      });
      const result = await this.#publisher.publish(sections, compiled.compiledAt, {
        verifySections,
      });
      this.#lastRuntime = runtime;
      this.#published(result);
      if (this.#reattributeOwed && this.#o.requestReattribute !== undefined) {
        this.#reattributeOwed = !await this.#o.requestReattribute();
      }
    } catch (error) {
      this.#publishFailures += 1;
      if (error instanceof NotLeaderError) {
        // The lease is marked lost; the next lead compiles and publishes afresh.
        this.#publishProblem = undefined;
        throw error;
      }
      this.#publishOwed = true;
      this.#publishProblem = errorText(error);
      throw error;
    }
  }

  #published(result: PublishResult): void {
    this.#publishes += 1;
    this.#publishedAt = Date.now();
    this.#lastPublish = result;
    if (this.#publishProblem !== undefined) {
      this.logger.info({}, "Feed published again after failures");
    }
    this.#publishProblem = undefined;
    if (result.headWasMissing) {
      // A first start, a wiped Redis or a switch of release: the builder cannot tell them
      // apart. Every exit is judged again (the verdicts and records Redis held are gone), owed
      // until Redis takes the ask.
      this.#reattributeOwed = true;
      this.logger.warn({ head_digest: result.headDigest }, "Feed head found gone; published whole");
    } else if (result.rewrittenWhole !== undefined) {
      this.logger.warn(
        { reason: result.rewrittenWhole, head_digest: result.headDigest },
        "Stored feed did not verify; published whole",
      );
    }
    if (result.outcome !== "unchanged") {
      this.logger.debug({
        head_digest: result.headDigest,
        written: result.written.length,
        removed: result.removed.length,
        appended: result.outcome === "appended",
      }, "Feed published");
    }
    this.#o.onPublished?.(result);
  }
}
