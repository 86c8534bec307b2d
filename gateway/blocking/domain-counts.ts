/**
 * A project's judging counts per site, as the request path records them (the DomainTally
 * contract): held in memory and added to the day's hash of the project in Redis by one pipeline
 * every interval (`HINCRBY`, the key kept DOMAIN_COUNTS_DAYS days and a day more), which the api
 * reads (`GET /projects/{id}/domains`). A write that fails keeps its counts for the next (up to
 * the bound of fields held), so a short outage loses nothing; past the bound, new fields are
 * dropped and counted.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { errorText } from "../../shared/errors.ts";
import { countDay, DOMAIN_COUNTS_DAYS, type RedisKeys } from "../../shared/redis-keys.ts";
import type { DomainTally } from "../base/domain-tally.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";
import { HeldWriteLoop } from "../metering/held-write-loop.ts";

export const DOMAIN_COUNTS_INTERVAL_MS = 2_000;
/** Fields held between writes at most (project, site, connector and count). */
const MAX_FIELDS = 50_000;

/** Sites (project × site) whose verdicts are kept for /metrics' top sites, at most. */
const MAX_RANKED = 10_000;

export interface DomainCountsOptions {
  redis: Pick<GatewayRedis, "pipeline">;
  keys: Pick<RedisKeys, "domainCounts">;
  /** The gateway's logger's shape (base/log.ts), the two levels used. */
  logger: {
    info(msg: string, fields?: Record<string, unknown>): void;
    warn(msg: string, fields?: Record<string, unknown>): void;
  };
  /** Each write's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT). */
  writeTimeoutMs: number;
  /** Sites named on /metrics (the most judged here); 0 or absent: none. */
  topSites?: number;
  intervalMs?: number;
  nowMs?: () => number;
}

export class DomainCounts extends HeldWriteLoop implements DomainTally {
  readonly #o: DomainCountsOptions;
  readonly #now: () => number;
  /** By key, then by field: the increments not written yet. */
  #pending = new Map<string, Map<string, number>>();
  #fields = 0;
  #written = 0;
  #dropped = 0;
  #failing = false;
  /** By `project\tsite`: the verdicts judged here since start, for /metrics' top sites. */
  readonly #ranked = new Map<string, { ok: number; blocked: number; rate_limited: number }>();

  constructor(options: DomainCountsOptions) {
    super({
      name: "domain_counts",
      intervalMs: options.intervalMs ?? DOMAIN_COUNTS_INTERVAL_MS,
    });
    this.#o = options;
    this.#now = options.nowMs ?? Date.now;
  }

  judged(
    projectId: string,
    site: string,
    connectorId: string,
    verdict: "ok" | "blocked" | "rate_limited",
    bytes: number,
  ): void {
    this.#add(projectId, `${site}\t${connectorId}\t${verdict}`, 1);
    if (this.#o.topSites) this.#rank(projectId, site, verdict);
    if (verdict !== "ok" && bytes > 0) {
      this.#add(projectId, `${site}\t${connectorId}\tblocked_bytes`, bytes);
    }
  }

  goodBytes(projectId: string, site: string, connectorId: string, bytes: number): void {
    this.#add(projectId, `${site}\t${connectorId}\tok_bytes`, bytes);
  }

  retried(projectId: string, site: string, connectorId: string): void {
    this.#add(projectId, `${site}\t${connectorId}\tretries`, 1);
  }

  shadow(projectId: string, site: string, rule: string, verdict: string): void {
    this.#add(projectId, `${site}\t\tshadow:${rule}:${verdict}`, 1);
  }

  #add(projectId: string, field: string, by: number): void {
    try {
      if (this.closing) return;
      const key = this.#o.keys.domainCounts(projectId, countDay(this.#now()));
      let fields = this.#pending.get(key);
      if (fields === undefined) this.#pending.set(key, fields = new Map());
      const held = fields.get(field);
      if (held === undefined) {
        if (this.#fields >= MAX_FIELDS) {
          this.#dropped++;
          return;
        }
        this.#fields++;
        fields.set(field, by);
      } else fields.set(field, held + by);
    } catch {
      // Never raise on the request path.
    }
  }

  protected override async writePending(): Promise<void> {
    const batch = this.#pending;
    if (batch.size === 0) return;
    this.#pending = new Map();
    const fields = this.#fields;
    this.#fields = 0;
    const ttlSeconds = (DOMAIN_COUNTS_DAYS + 1) * 86_400;
    try {
      const replies = await withDeadline("domain counts write", this.#o.writeTimeoutMs, () => {
        const pipeline = this.#o.redis.pipeline();
        for (const [key, counts] of batch) {
          for (const [field, by] of counts) pipeline.hincrby(key, field, by);
          pipeline.expire(key, ttlSeconds);
        }
        return pipeline.exec();
      });
      const failed = replies?.find(([error]) => error !== null);
      if (replies === null || failed !== undefined) {
        throw failed?.[0] ?? new Error("the pipeline was not run");
      }
      this.#written += fields;
      if (this.#failing) {
        this.#failing = false;
        this.#o.logger.info("Domain counts reach Redis again");
      }
    } catch (error) {
      // Kept for the next write: added back under what came since, within the bound.
      for (const [key, counts] of batch) {
        for (const [field, by] of counts) this.#restore(key, field, by);
      }
      if (!this.#failing) {
        this.#failing = true;
        this.#o.logger.warn("Domain counts cannot reach Redis: kept for the next write", {
          error: errorText(error),
        });
      }
    }
  }

  #restore(key: string, field: string, by: number): void {
    let fields = this.#pending.get(key);
    if (fields === undefined) this.#pending.set(key, fields = new Map());
    const held = fields.get(field);
    if (held !== undefined) fields.set(field, held + by);
    else if (this.#fields < MAX_FIELDS) {
      this.#fields++;
      fields.set(field, by);
    } else this.#dropped++;
  }

  #rank(projectId: string, site: string, verdict: "ok" | "blocked" | "rate_limited"): void {
    const key = `${projectId}\t${site}`;
    let counts = this.#ranked.get(key);
    if (counts === undefined) {
      // Past the bound the newest sites are not ranked: the most judged were met long before.
      if (this.#ranked.size >= MAX_RANKED) return;
      this.#ranked.set(key, counts = { ok: 0, blocked: 0, rate_limited: 0 });
    }
    counts[verdict]++;
  }

  samples(): MetricSample[] {
    const name = "octoprox_gateway_domain_counts_total";
    const samples = [
      counterSample(name, this.#written, 'result="written"'),
      counterSample(name, this.#dropped, 'result="dropped"'),
    ];
    const top = this.#o.topSites ?? 0;
    if (top === 0 || this.#ranked.size === 0) return samples;
    const judged = (c: { ok: number; blocked: number; rate_limited: number }) =>
      c.ok + c.blocked + c.rate_limited;
    const ranked = [...this.#ranked].sort((a, b) => judged(b[1]) - judged(a[1])).slice(0, top);
    for (const [key, counts] of ranked) {
      const tab = key.indexOf("\t");
      const labels = `project="${key.slice(0, tab)}",site="${labelValue(key.slice(tab + 1))}"`;
      for (const verdict of ["ok", "blocked", "rate_limited"] as const) {
        samples.push(
          counterSample(
            "octoprox_gateway_site_verdicts_total",
            counts[verdict],
            `${labels},verdict="${verdict}"`,
          ),
        );
      }
    }
    return samples;
  }
}

/** A site as a label value: host characters pass, anything else (never in a site) is dropped. */
function labelValue(site: string): string {
  return site.replace(/[^a-z0-9.:_-]/gi, "");
}
