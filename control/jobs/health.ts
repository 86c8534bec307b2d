/**
 * The health job. A batch:
 * 1. loads its proxies with their connectors in one query, leaving alone those that no longer
 *    qualify (draining, terminating, a disabled connector's);
 * 2. reads each proxy's soft health (the failures in a row so far);
 * 3. requests the connector's check URL, else the echo (control/jobs/health-echo.ts: one the
 *    proxies can reach), through each proxy, at most `health_check_concurrency` at once per
 *    worker (one bound shared by every batch);
 * 4. when checks of the echo endpoint failed, makes sure it answered after they failed: while it
 *    is down those failures are not counted, so an echo outage marks nobody down;
 * 5. hands each counted check's verdict to the worker's verdict writer as the check ends
 *    (control/jobs/health-verdicts.ts): its soft health with a day's expiry, and the status it
 *    changed as compare-and-set from the status loaded, written with the other verdicts of the
 *    second in one transaction and one change entry (through the proxies service, the one writer
 *    of proxy rows). The batch ends once its last verdict is written;
 * 6. hands the exits the answers named to attribution (control/geo/attribution.ts), which writes
 *    the rows whose location they moved. A failed attribution is logged and fails nothing: the
 *    verdicts stand, and the next check sees the exit again.
 *
 * A batch from the kind's first lane (new proxies, suspects) takes its probe slots ahead of the
 * periodic re-checks waiting for theirs.
 *
 * A passing check makes a proxy healthy and clears its count; a proxy is degraded at its first
 * failed check and unhealthy at the third in a row. A cloud instance stays initializing through
 * failures in its first five minutes (they still count). A lost soft-health hash resumes the
 * count where the stored status says it must at least be, so a wipe never makes a failing proxy
 * look better.
 */
import { and, eq, inArray, sql } from "drizzle-orm";
import type { Redis } from "ioredis";
import type { Db } from "../../db/client.ts";
import { connectors, credentials, proxies } from "../../db/schema.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { fillPlaceholders } from "../../shared/feed/placeholders.ts";
import { JobKind, ProxyStatus } from "../../shared/roles.ts";
import { errorText } from "../../shared/errors.ts";
import type { UpstreamScheme } from "../../shared/proxy-protocol/types.ts";
import type { Logger } from "../core/logging.ts";
import { Semaphore } from "../core/semaphore.ts";
import { probe } from "../upstream/probe.ts";
import type { Job, WorkBatch } from "../core/job.ts";
import { type StatusWriter, type Verdict, VerdictWriter } from "./health-verdicts.ts";
import type { Attributor, SeenExit } from "../geo/attribution.ts";
import { ObservationSource } from "../geo/observation.ts";
import type { GeoLocation } from "../../shared/geo/contract.ts";

export { SOFT_HEALTH_TTL_SECONDS, type StatusWriter } from "./health-verdicts.ts";
export const UNHEALTHY_AFTER_FAILURES = 3;
export const CLOUD_GRACE_MS = 5 * 60_000;
/** A direct ask that found the echo down stands this long: an outage is asked about no more. */
export const ECHO_FRESH_MS = 10_000;

export interface HealthJobOptions {
  db: Db;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  writeStatuses: StatusWriter;
  /** What checks of connectors without a URL of their own ask, and the echo monitor judges. */
  echoUrl: string;
  timeoutMs: number;
  /** The worker's probe bound, shared by all its health batches. */
  probes: Semaphore;
  /** Verdicts of one group at most this long apart (health-verdicts.ts). */
  verdictGroupMs?: number;
  /** Where the exits checks saw go (step 6); none: exits are not attributed. */
  attributor?: Attributor;
  now?: () => number;
}

interface Candidate {
  id: string;
  connectorId: string;
  connectorKind: string;
  scheme: string;
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  status: string;
  createdAt: Date;
  checkUrl: string | null;
}

interface Outcome {
  candidate: Candidate;
  ok: boolean;
  latencyMs: number;
  usesEcho: boolean;
  /** When the check ended (the job's clock). */
  endedAt: number;
  error?: string;
  exitIp?: string;
  exitPlace?: GeoLocation;
}

/** The count a proxy's stored status says it has at least, when its soft health is gone. */
export function floorFailures(status: string): number {
  if (status === ProxyStatus.unhealthy) return UNHEALTHY_AFTER_FAILURES;
  if (status === ProxyStatus.degraded) return 1;
  return 0;
}

/** The status a proxy moves to after a check, by the rules above. */
export function nextStatus(
  current: string,
  ok: boolean,
  failures: number,
  inCloudGrace: boolean,
): string {
  if (current === ProxyStatus.draining || current === ProxyStatus.terminating) return current;
  if (ok) return ProxyStatus.healthy;
  if (failures >= UNHEALTHY_AFTER_FAILURES) {
    return inCloudGrace ? ProxyStatus.initializing : ProxyStatus.unhealthy;
  }
  if (inCloudGrace && current === ProxyStatus.initializing) return ProxyStatus.initializing;
  return ProxyStatus.degraded;
}

export class HealthCheckJob implements Job {
  readonly kind = JobKind.health;
  readonly #o: HealthJobOptions;
  readonly #echo: EchoMonitor;
  readonly #echoUrl: URL;
  readonly #verdicts: VerdictWriter;
  #checks = 0;

  constructor(options: HealthJobOptions) {
    this.#o = options;
    this.#echoUrl = new URL(options.echoUrl);
    this.#echo = new EchoMonitor(this.#echoUrl, options.timeoutMs, options.logger, options.now);
    this.#verdicts = new VerdictWriter({
      redis: options.redis,
      keys: options.keys,
      logger: options.logger,
      writeStatuses: options.writeStatuses,
      groupMs: options.verdictGroupMs,
      now: options.now,
    });
  }

  /** Verdict groups written so far. */
  get verdictGroups(): number {
    return this.#verdicts.groups;
  }

  get checks(): number {
    return this.#checks;
  }

  #now(): number {
    return (this.#o.now ?? Date.now)();
  }

  async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    const candidates = await this.#load(batch.keys);
    if (candidates.length === 0) return;
    const failuresSoFar = await this.#softHealth(candidates);
    const urgent = batch.first === true;
    const seen: SeenExit[] = [];
    // Each verdict is handed on as its check ends, not when the batch's slowest one does.
    const written = await Promise.allSettled(candidates.map(async (candidate) => {
      const outcome = await this.#check(candidate, signal, urgent);
      this.#checks++;
      if (outcome.ok && outcome.exitIp !== undefined) {
        seen.push({
          proxyId: candidate.id,
          ip: outcome.exitIp,
          seenAt: new Date(outcome.endedAt),
          endpoint: outcome.exitPlace ?? null,
        });
      }
      // A stop cut the probe short: its failure says nothing about the proxy.
      if (signal.aborted) return;
      // Only an answer after the failure tells a failing proxy from an echo outage: one from
      // before could predate the outage.
      if (!outcome.ok && outcome.usesEcho && !await this.#echo.isUp(outcome.endedAt)) return;
      await this.#verdicts.submit(
        this.#verdict(outcome, failuresSoFar.get(candidate.id) ?? 0),
      );
    }));
    if (signal.aborted) throw signal.reason;
    const failed = written.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    await this.#attribute(seen);
  }

  async #attribute(seen: readonly SeenExit[]): Promise<void> {
    const attributor = this.#o.attributor;
    if (attributor === undefined || seen.length === 0) return;
    try {
      await attributor.apply(seen, ObservationSource.health);
    } catch (error) {
      this.#o.logger.warn(
        { exits: seen.length, error: errorText(error) },
        "Exits seen by health checks not attributed; the next checks see them again",
      );
    }
  }

  /** The soft health a check leaves and the status it moves the proxy to, by the rules above. */
  #verdict(outcome: Outcome, failuresSoFar: number): Verdict {
    const { candidate } = outcome;
    const now = this.#now();
    const failures = outcome.ok ? 0 : failuresSoFar + 1;
    const inGrace = candidate.connectorKind === "cloud" &&
      now - candidate.createdAt.getTime() < CLOUD_GRACE_MS;
    const to = nextStatus(candidate.status, outcome.ok, failures, inGrace);
    return {
      proxyId: candidate.id,
      health: {
        failures,
        latency_ms: outcome.ok ? Math.round(outcome.latencyMs) : "",
        checked_at: now,
        error: outcome.error ?? "",
      },
      ...(to === candidate.status ? {} : {
        change: {
          id: candidate.id,
          connectorId: candidate.connectorId,
          from: candidate.status,
          to,
        },
      }),
    };
  }

  async #load(ids: readonly string[]): Promise<Candidate[]> {
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
    const valid = ids.filter((id) => uuid.test(id));
    if (valid.length === 0) return [];
    const rows = await this.#o.db
      .select({
        id: proxies.id,
        connectorId: proxies.connectorId,
        connectorKind: connectors.kind,
        scheme: proxies.scheme,
        host: proxies.host,
        port: proxies.port,
        username: proxies.username,
        password: proxies.password,
        status: proxies.status,
        createdAt: proxies.createdAt,
        checkUrl: connectors.healthcheckUrl,
        dynamic: sql<boolean>`coalesce((${proxies.metadata} ->> 'dynamic') = 'true', false)`,
        connectorConfig: connectors.config,
        credentialConfig: credentials.config,
      })
      .from(proxies)
      .innerJoin(connectors, eq(connectors.id, proxies.connectorId))
      .leftJoin(credentials, eq(credentials.id, connectors.credentialId))
      .where(and(inArray(proxies.id, valid), eq(connectors.enabled, true)));
    // A dynamic-sessions row is a vendor session per request: no one check speaks for it. A
    // vendor row keeps its secrets as placeholders: each slot is checked through its own
    // credentials, filled as the feed fills them.
    return rows.filter((row) =>
      !row.dynamic &&
      row.status !== ProxyStatus.draining && row.status !== ProxyStatus.terminating
    ).map(({ dynamic: _d, connectorConfig, credentialConfig, ...row }) => {
      const sources = { connector: connectorConfig, credential: credentialConfig ?? undefined };
      return {
        ...row,
        username: fillPlaceholders(row.username, sources),
        password: fillPlaceholders(row.password, sources),
      };
    });
  }

  async #softHealth(candidates: readonly Candidate[]): Promise<Map<string, number>> {
    const pipeline = this.#o.redis.pipeline();
    for (const c of candidates) pipeline.hget(this.#o.keys.proxyHealth(c.id), "failures");
    const replies = (await pipeline.exec()) ?? [];
    const counts = new Map<string, number>();
    candidates.forEach((c, i) => {
      const [error, value] = replies[i] ?? [];
      if (error) throw error;
      const stored = value === null || value === undefined ? undefined : Number(value);
      // A lost hash resumes where the stored status says the count must at least be.
      counts.set(c.id, Math.max(stored ?? 0, floorFailures(c.status)));
    });
    return counts;
  }

  async #check(candidate: Candidate, signal: AbortSignal, urgent: boolean): Promise<Outcome> {
    const url = candidate.checkUrl ?? this.#o.echoUrl;
    const usesEcho = candidate.checkUrl === null;
    return await this.#o.probes.run(async () => {
      const startedAt = performance.now();
      const askedAt = this.#now();
      try {
        const result = await probe({
          proxy: {
            scheme: candidate.scheme as UpstreamScheme,
            host: candidate.host,
            port: candidate.port,
            username: candidate.username ?? undefined,
            password: candidate.password ?? undefined,
          },
          url: usesEcho ? this.#echoUrl : url,
          timeoutMs: this.#o.timeoutMs,
          signal,
        });
        if (usesEcho && result.ok) this.#echo.noteAnswer(askedAt);
        return {
          candidate,
          ok: result.ok,
          latencyMs: result.latencyMs,
          usesEcho,
          endedAt: this.#now(),
          error: result.ok ? undefined : `HTTP ${result.status}`,
          exitIp: result.exitIp,
          exitPlace: result.exitPlace,
        };
      } catch (error) {
        return {
          candidate,
          ok: false,
          latencyMs: performance.now() - startedAt,
          usesEcho,
          endedAt: this.#now(),
          error: errorText(error),
        };
      }
    }, urgent);
  }
}

/**
 * Tells an echo outage from failing proxies. Failed checks of the echo count only when it
 * answered after they failed: through any proxy's check, else when the worker asks it directly.
 * Evidence from before the failures is not enough, since the outage may have begun in between
 * (with answers ten seconds old taken as proof, the first ten seconds of an outage counted every
 * failure). A direct ask that found it down stands for ten seconds, so an outage is asked about
 * at most once every ten seconds; while it answers, a direct ask is made only for failures no
 * check's answer followed, one at a time.
 */
export class EchoMonitor {
  readonly #url: URL;
  readonly #timeoutMs: number;
  readonly #logger: Logger;
  readonly #now: () => number;
  #lastAnswerAt = Number.NEGATIVE_INFINITY;
  #lastDirectAt = Number.NEGATIVE_INFINITY;
  #lastDirectUp = true;
  #down = false;
  #direct: Promise<boolean> | undefined;

  constructor(url: URL, timeoutMs: number, logger: Logger, now: () => number = Date.now) {
    this.#url = url;
    this.#timeoutMs = timeoutMs;
    this.#logger = logger;
    this.#now = now;
  }

  /**
   * A check through a proxy got the echo's answer. `askedAt` is when that check was sent: the
   * answer was made after it, while one read back later may have been made before an outage
   * began, and so proves nothing about failures that ended in between.
   */
  noteAnswer(askedAt: number): void {
    this.#lastAnswerAt = Math.max(this.#lastAnswerAt, askedAt);
    this.#mark(true);
  }

  /** Whether the echo answered at or after `since` (the last failure to judge). */
  async isUp(since: number): Promise<boolean> {
    for (;;) {
      if (this.#lastAnswerAt >= since) return true;
      if (this.#lastDirectAt >= since) return this.#lastDirectUp;
      if (!this.#lastDirectUp && this.#now() - this.#lastDirectAt < ECHO_FRESH_MS) return false;
      // An ask in flight may have begun before `since`: wait for it, then judge again.
      this.#direct ??= this.#askDirectly().finally(() => {
        this.#direct = undefined;
      });
      await this.#direct;
    }
  }

  async #askDirectly(): Promise<boolean> {
    this.#lastDirectAt = this.#now();
    let up: boolean;
    try {
      const response = await fetch(this.#url, {
        signal: AbortSignal.timeout(Math.min(this.#timeoutMs, ECHO_FRESH_MS)),
      });
      await response.body?.cancel();
      up = response.ok;
    } catch {
      up = false;
    }
    this.#lastDirectUp = up;
    this.#mark(up);
    return up;
  }

  #mark(up: boolean): void {
    if (up && this.#down) {
      this.#down = false;
      this.#logger.info(
        { url: this.#url.origin + this.#url.pathname },
        "Echo endpoint answers again; its checks count again",
      );
    } else if (!up && !this.#down) {
      this.#down = true;
      this.#logger.warn(
        { url: this.#url.origin + this.#url.pathname },
        "Echo endpoint does not answer; failed checks of it are not counted",
      );
    }
  }
}
