/**
 * Pool holds: what this gateway process holds through each provider-API connector's proxies
 * (reserved and active transfers, from the dispatch counts every isolate shares), written every
 * second to the pool's held hash (`pool:<connector>:held`, this instance's field,
 * `<count>:<written at>`). The pool job sums the fresh fields of every gateway: a refill plans by
 * the slots the pool has free, not by how many proxies it holds. A connector whose count went
 * back to zero is written once more at zero, then left alone; a field a gateway stopped writing
 * goes stale and the pool job no longer counts it.
 *
 * The main isolate alone writes it (the counts are the process's). One held write at a time,
 * under the request deadline; a write that fails is counted and the next second's carries the
 * counts again. Runtime-neutral.
 */
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { RoutingSnapshot } from "../../shared/routing/snapshot.ts";
import { ConnectorKind } from "../../shared/roles.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { PeriodicLoop } from "../../shared/async/loop.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";

export const POOL_HOLDS_INTERVAL_MS = 1_000;
/** The hash outlives a gateway's last write by this much (the job reads fields a few s old). */
const HELD_TTL_MS = 60_000;

export interface PoolHoldsOptions {
  redis: Pick<GatewayRedis, "pipeline">;
  keys: Pick<RedisKeys, "poolHeld">;
  /** This gateway process's instance id: its field in each hash. */
  instance: string;
  /** The snapshot in force, and the counts of its connectors' slots. */
  snapshot: () => RoutingSnapshot | undefined;
  writeTimeoutMs: number;
  intervalMs?: number;
  now?: () => number;
}

export class PoolHolds extends PeriodicLoop {
  readonly #o: PoolHoldsOptions;
  readonly #now: () => number;
  /** Connectors written non-zero last time: each gets one write at zero when it empties. */
  #holding = new Set<string>();
  #writes = 0;
  #failures = 0;

  constructor(options: PoolHoldsOptions) {
    super({ name: "pool_holds", intervalMs: options.intervalMs ?? POOL_HOLDS_INTERVAL_MS });
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** What each provider-API connector of the snapshot holds now, non-zero ones only. */
  held(): Map<string, number> {
    const held = new Map<string, number>();
    const snapshot = this.#o.snapshot();
    if (snapshot === undefined) return held;
    for (const index of snapshot.connectors.values()) {
      if (index.connector.kind !== ConnectorKind.providerApi) continue;
      const count = snapshot.dispatch.connectorInFlight(index.slot);
      if (count > 0) held.set(index.id, count);
    }
    return held;
  }

  protected override cycle(): Promise<boolean> {
    return this.writeNow();
  }

  /** Writes what the process holds now (and the zeros owed); false when nothing was due. */
  async writeNow(): Promise<boolean> {
    const held = this.held();
    const zeroed = [...this.#holding].filter((id) => !held.has(id));
    if (held.size === 0 && zeroed.length === 0) return false;
    const at = this.#now();
    try {
      await withDeadline("pool holds write", this.#o.writeTimeoutMs, async () => {
        const pipeline = this.#o.redis.pipeline();
        for (const [connectorId, count] of [...held, ...zeroed.map((id) => [id, 0] as const)]) {
          const key = this.#o.keys.poolHeld(connectorId);
          pipeline.hset(key, this.#o.instance, `${count}:${at}`);
          pipeline.pexpire(key, HELD_TTL_MS);
        }
        const replies = await pipeline.exec();
        const refused = replies?.find(([error]) => error !== null);
        if (replies === null || refused !== undefined) {
          throw refused?.[0] ?? new Error("Pipeline discarded");
        }
      });
      this.#writes++;
      this.#holding = new Set(held.keys());
    } catch {
      // Counted on /metrics; the next second's write carries the counts again.
      this.#failures++;
    }
    return true;
  }

  /** This process's series for the gateway's /metrics. */
  samples(): MetricSample[] {
    const name = "octoprox_gateway_pool_holds_writes_total";
    return [
      counterSample(name, this.#writes, 'result="written"'),
      counterSample(name, this.#failures, 'result="failed"'),
    ];
  }
}
