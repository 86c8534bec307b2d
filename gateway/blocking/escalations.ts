/**
 * The escalation book (docs/blocking.md, "Escalation"): where each site of an escalated project
 * stands, as every gateway shares it through Redis, and the judged answers this gateway saw.
 *
 * The request path reads memory only (`level`) and counts each judged answer by the tier of the
 * connector that gave it (`judged`). Every half second the counts go to Redis, one script call
 * per project (shared/lua/escalation_report.lua: the one place a site moves between tiers), and
 * the states of the projects whose version changed are read back. So a site moves within about a
 * second of the verdicts that moved it, on every gateway.
 *
 * Failing open: while Redis is away, sites keep the tier last read, the counts are kept (merged,
 * up to a bound) for the next write, and nothing on the request path waits.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { type CycleResult, Loop } from "../../shared/async/loop.ts";
import { type EscalationLevel, readEscalationState } from "../../shared/blocking/escalation.ts";
import { errorText } from "../../shared/errors.ts";
import { type LuaScript, runScript } from "../../shared/lua/loader.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { EscalationTiers, EscalationView } from "../../shared/routing/escalation-contract.ts";
import { counterSample, gaugeSample, type MetricSample } from "../base/metrics.ts";

export const ESCALATION_SYNC_INTERVAL_MS = 500;
/** Sites a project keeps state for in Redis at most (a new one past it is not tracked). */
export const ESCALATION_SITES_MAX = 10_000;
/** How long a project's states outlive its last report. */
const STATE_TTL_SECONDS = 7 * 86_400;
/** Unwritten runs held at most (project × site × tier). */
const MAX_PENDING = 20_000;

/** A site's answers on one tier since the last write, summed so runs survive. */
interface Run {
  sawOk: boolean;
  /** Blocks after the last good answer. */
  blocksAfter: number;
  sawBlock: boolean;
  /** Good answers after the last block. */
  oksAfter: number;
}

/** `later` appended to `earlier` (what a failed write merges back). */
function merged(earlier: Run, later: Run): Run {
  return {
    sawOk: earlier.sawOk || later.sawOk,
    blocksAfter: later.sawOk ? later.blocksAfter : earlier.blocksAfter + later.blocksAfter,
    sawBlock: earlier.sawBlock || later.sawBlock,
    oksAfter: later.sawBlock ? later.oksAfter : earlier.oksAfter + later.oksAfter,
  };
}

interface Held {
  tier: number;
  /** When requests may probe the tier below (epoch ms; 0: never). */
  probeAtMs: number;
}

export interface EscalationsOptions {
  redis: Pick<GatewayRedis, "evalsha" | "eval" | "mget" | "hgetall">;
  keys: Pick<RedisKeys, "escalation" | "escalationVersion">;
  /** The gateway's logger's shape (base/log.ts), the two levels used. */
  logger: {
    info(msg: string, fields?: Record<string, unknown>): void;
    warn(msg: string, fields?: Record<string, unknown>): void;
  };
  /** shared/lua/escalation_report.lua, registered. */
  script: LuaScript;
  /** The router: each project's policy and tiers in the snapshot in force. */
  tiers: EscalationTiers;
  /** The clock (tests move it). */
  nowMs?: () => number;
  intervalMs?: number;
}

export class Escalations extends Loop implements EscalationView {
  readonly #o: EscalationsOptions;
  readonly #now: () => number;
  /** By project, then site: the tier and probe time last read. */
  #levels = new Map<string, Map<string, Held>>();
  /** By project: the version its states were read at. */
  readonly #versions = new Map<string, string | null>();
  /** By project, then `site\ttier`: the runs not written yet. */
  #pending = new Map<string, Map<string, Run>>();
  #pendingSize = 0;
  #failing = false;
  ups = 0;
  downs = 0;
  failedProbes = 0;
  dropped = 0;

  constructor(options: EscalationsOptions) {
    super({ name: "escalation_sync" });
    this.#o = options;
    this.#now = options.nowMs ?? Date.now;
  }

  level(projectId: string, site: string): EscalationLevel | undefined {
    const held = this.#levels.get(projectId)?.get(site);
    if (held === undefined) return undefined;
    return { tier: held.tier, probing: held.tier > 0 && this.#now() >= held.probeAtMs };
  }

  /** A judged answer of an escalated project, through `connectorId` (a block: not `ok`). */
  judged(projectId: string, site: string, connectorId: string, ok: boolean): void {
    try {
      // The caller judged the project escalated; one with a single tier is skipped at the write.
      const tier = this.#o.tiers.tierOf(projectId, connectorId);
      if (tier === undefined) return;
      let runs = this.#pending.get(projectId);
      if (runs === undefined) this.#pending.set(projectId, runs = new Map());
      const key = `${site}\t${tier}`;
      let run = runs.get(key);
      if (run === undefined) {
        if (this.#pendingSize >= MAX_PENDING) {
          this.dropped++;
          return;
        }
        this.#pendingSize++;
        runs.set(key, run = { sawOk: false, blocksAfter: 0, sawBlock: false, oksAfter: 0 });
      }
      if (ok) {
        run.sawOk = true;
        run.blocksAfter = 0;
        run.oksAfter++;
      } else {
        run.sawBlock = true;
        run.oksAfter = 0;
        run.blocksAfter++;
      }
    } catch {
      // Never raise on the request path.
    }
  }

  /** Sites above the cheapest tier, as last read. */
  get escalatedSites(): number {
    let count = 0;
    for (const sites of this.#levels.values()) {
      for (const held of sites.values()) if (held.tier > 0) count++;
    }
    return count;
  }

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(this.#o.intervalMs ?? ESCALATION_SYNC_INTERVAL_MS, signal);
  }

  /** Writes the runs, then reads the states that changed; never throws (fails open). */
  protected override async cycle(): Promise<CycleResult> {
    try {
      const wrote = await this.#write();
      const read = await this.#read();
      if (this.#failing) {
        this.#failing = false;
        this.#o.logger.info("Escalation reaches Redis again");
      }
      return wrote || read;
    } catch (error) {
      if (!this.#failing) {
        this.#failing = true;
        this.#o.logger.warn("Escalation cannot reach Redis: sites keep the tier last read", {
          error: errorText(error),
        });
      }
      return false;
    }
  }

  async #write(): Promise<boolean> {
    if (this.#pending.size === 0) return false;
    const batch = this.#pending;
    this.#pending = new Map();
    this.#pendingSize = 0;
    const now = this.#now();
    try {
      for (const [projectId, runs] of batch) {
        const escalation = this.#o.tiers.escalation(projectId);
        if (escalation !== undefined) {
          const { policy, tiers } = escalation;
          const args = [
            String(now),
            String(policy.up_after_blocks),
            String(policy.down_after_probes),
            String(policy.probe_after_seconds * 1000),
            String(tiers - 1),
            String(STATE_TTL_SECONDS),
            String(ESCALATION_SITES_MAX),
          ];
          for (const [key, run] of runs) {
            const tab = key.lastIndexOf("\t");
            args.push(
              key.slice(0, tab),
              key.slice(tab + 1),
              run.sawOk ? "1" : "0",
              String(run.blocksAfter),
              run.sawBlock ? "1" : "0",
              String(run.oksAfter),
            );
          }
          const reply = await runScript(this.#o.redis, this.#o.script, [
            this.#o.keys.escalation(projectId),
            this.#o.keys.escalationVersion(projectId),
          ], args) as number[];
          this.ups += Number(reply[0]) || 0;
          this.downs += Number(reply[1]) || 0;
          this.failedProbes += Number(reply[2]) || 0;
        }
        batch.delete(projectId);
      }
    } catch (error) {
      // What was not written is kept for the next write, ahead of what came since.
      for (const [projectId, runs] of batch) {
        for (const [key, run] of runs) this.#restore(projectId, key, run);
      }
      throw error;
    }
    return true;
  }

  #restore(projectId: string, key: string, run: Run): void {
    let runs = this.#pending.get(projectId);
    if (runs === undefined) this.#pending.set(projectId, runs = new Map());
    const later = runs.get(key);
    if (later !== undefined) runs.set(key, merged(run, later));
    else if (this.#pendingSize < MAX_PENDING) {
      this.#pendingSize++;
      runs.set(key, run);
    } else this.dropped++;
  }

  async #read(): Promise<boolean> {
    const projects = this.#o.tiers.escalatedProjects();
    for (const projectId of [...this.#levels.keys()]) {
      if (!projects.includes(projectId)) {
        this.#levels.delete(projectId);
        this.#versions.delete(projectId);
      }
    }
    if (projects.length === 0) return false;
    const versions = await this.#o.redis.mget(
      ...projects.map((id) => this.#o.keys.escalationVersion(id)),
    );
    let any = false;
    for (let index = 0; index < projects.length; index++) {
      const projectId = projects[index];
      const version = versions[index] ?? null;
      if (this.#versions.has(projectId) && this.#versions.get(projectId) === version) continue;
      const hash = version === null
        ? {}
        : await this.#o.redis.hgetall(this.#o.keys.escalation(projectId));
      const sites = new Map<string, Held>();
      for (const [site, text] of Object.entries(hash)) {
        const state = readEscalationState(text);
        if (state !== undefined && (state.tier > 0 || state.probeAtMs > 0)) {
          sites.set(site, { tier: state.tier, probeAtMs: state.probeAtMs });
        }
      }
      this.#levels.set(projectId, sites);
      this.#versions.set(projectId, version);
      any = true;
    }
    return any;
  }

  /** The isolate's series for /metrics (every isolate writes its own counts: they add up). */
  samples(): MetricSample[] {
    const name = "octoprox_gateway_escalations_total";
    return [
      counterSample(name, this.ups, 'direction="up"'),
      counterSample(name, this.downs, 'direction="down"'),
      counterSample("octoprox_gateway_escalation_probes_failed_total", this.failedProbes),
      gaugeSample("octoprox_gateway_escalated_sites", this.escalatedSites, "max"),
    ];
  }
}
