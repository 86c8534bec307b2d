/**
 * A provider-API connector's pool as the api answers it: the counts by state (exact, from the
 * state sets), the pool's settings, the fetch bookkeeping of the current generation and whether
 * the connector is depleted. No address or credential: those stay in Redis (and in extraction
 * answers). Redis not answering within the request deadline is a 503.
 */
import { NotFoundError } from "../../../shared/errors.ts";
import { ConnectorKind } from "../../../shared/roles.ts";
import type { ControlDeps } from "../../core/deps.ts";
import { redisDeadline } from "../../core/redis.ts";
import { readProviderApiConfig } from "../config.ts";
import { FetchCoordinator } from "../fetch/coordinator.ts";
import type { ConnectorRow } from "../../model/connectors.ts";
import { liveCount, type PoolCounts } from "./contract.ts";
import { poolStoreOf } from "./store.ts";

export interface PoolView {
  connector_id: string;
  /** The pool generation the fetch counts belong to; null before any lead made one. */
  generation: string | null;
  counts: PoolCounts;
  /** Checking, routed and stock: what the pool's sizes count. */
  live: number;
  pool: {
    min_size: number;
    target_size: number;
    max_size: number;
    reserve_for_gateway: number | null;
  } | null;
  fetch: {
    success: number;
    empty: number;
    duplicate_only: number;
    error: number;
    rate_limited: number;
    empty_streak: number;
    error_streak: number;
    backoff_until: string | null;
    in_flight: number;
    ledger_used: number;
    ledger_pending: number;
    max_total: number | null;
  };
  depleted_at: string | null;
}

const coordinators = new WeakMap<object, FetchCoordinator>();

/** What a connector of another kind answers when its pool is asked for (404). */
export function noPool(): NotFoundError {
  return new NotFoundError("Pool", "Only provider_api connectors have a pool");
}

export async function poolView(
  deps: Pick<ControlDeps, "redis" | "keys" | "settings">,
  connector: ConnectorRow,
): Promise<PoolView> {
  if (connector.kind !== ConnectorKind.providerApi) {
    throw noPool();
  }
  let coordinator = coordinators.get(deps.redis);
  if (coordinator === undefined) {
    coordinator = new FetchCoordinator({ redis: deps.redis, keys: deps.keys });
    coordinators.set(deps.redis, coordinator);
  }
  const fetches = coordinator;
  const [counts, stats] = await redisDeadline(
    deps.settings.redisRequestTimeoutMs,
    () => Promise.all([poolStoreOf(deps).counts(connector.id), fetches.stats(connector.id)]),
  );
  const config = readProviderApiConfig(connector.config);
  return {
    connector_id: connector.id,
    generation: stats.generation === "" ? null : stats.generation,
    counts,
    live: liveCount(counts),
    pool: config === undefined ? null : {
      min_size: config.pool.min_size,
      target_size: config.pool.target_size,
      max_size: config.pool.max_size,
      reserve_for_gateway: config.pool.reserve_for_gateway,
    },
    fetch: {
      success: stats.success,
      empty: stats.empty,
      duplicate_only: stats.duplicateOnly,
      error: stats.error,
      rate_limited: stats.rateLimited,
      empty_streak: stats.emptyStreak,
      error_streak: stats.errorStreak,
      backoff_until: stats.backoffUntilMs > Date.now()
        ? new Date(stats.backoffUntilMs).toISOString()
        : null,
      in_flight: stats.inFlight,
      ledger_used: stats.ledgerUsed,
      ledger_pending: stats.ledgerPending,
      max_total: config?.fetch.max_total ?? null,
    },
    depleted_at: connector.depletedAt?.toISOString() ?? null,
  };
}
