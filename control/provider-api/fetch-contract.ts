/**
 * The fetch path's contract with the pool job: the pool job decides when a connector's pool is
 * short and by how much; `refill` (control/provider-api/fetch/refill.ts) calls the provider under the
 * connector's leader, pacing, permits and ledger (control/provider-api/fetch/coordinator.ts), reads
 * the answers, adds what is new to the pool and records each fetch's classification.
 */
import type { ProviderApiConfig } from "./config.ts";
import type { FetchKind } from "./answer.ts";

/** The connector as the fetch path needs it. */
export interface ProviderApiConnector {
  id: string;
  projectId: string;
  config: ProviderApiConfig;
  /** The connector's `provider_api` credential config (every key secret); {} without one. */
  credential: Readonly<Record<string, unknown>>;
}

/** A connector's fetch bookkeeping, as /metrics, the api and the pool job read it. */
export interface FetchStats {
  generation: string;
  /** Fetches by section 8.1's classification, since the generation began. */
  success: number;
  empty: number;
  duplicateOnly: number;
  error: number;
  /** Error fetches the provider answered 429. */
  rateLimited: number;
  /** Empty fetches in a row (reset by any fetch that found a proxy, new or not). */
  emptyStreak: number;
  /** Error fetches in a row (reset by any fetch that was not an Error). */
  errorStreak: number;
  /** No call before this (epoch ms); 0 when not backing off. */
  backoffUntilMs: number;
  /** The `max_total` ledger: proxies counted (settled) and reserved by calls in flight. */
  ledgerUsed: number;
  ledgerPending: number;
  /** Calls in flight now, across every worker. */
  inFlight: number;
}

export interface RefillResult {
  /** Calls made, and their classifications. */
  calls: number;
  byKind: Readonly<Record<FetchKind, number>>;
  /** Entries added to the pool (checking). */
  added: number;
  /** Why calls stopped short of the need, when they did. */
  stoppedBy?: "not_leader" | "backoff" | "ledger" | "in_flight" | "interval" | "aborted";
  /** The connector's empty streak reached `depleted_after_empty` with this refill. */
  depleted: boolean;
}

/**
 * A connector's fetch leadership (seed 001 section 8): one holder per upstream at a time, under
 * the install's pool generation and a monotonic epoch. Every fenced step (a call's permit, the
 * ledger, the pool's moves) is refused unless the lead key still holds this generation and
 * epoch. The lead renews itself while held; a renewal that fails or cannot be confirmed aborts
 * `signal` at once (fail closed: never a local leader).
 */
export interface FetchLead {
  readonly connectorId: string;
  readonly generation: string;
  readonly epoch: number;
  readonly signal: AbortSignal;
  /** Gives the lead up (best effort); safe twice. */
  release(): Promise<void>;
}

export interface FetchLeader {
  /** Takes the connector's lead; undefined when another holder has it or Redis is unsure. */
  lead(connectorId: string, signal: AbortSignal): Promise<FetchLead | undefined>;
}

export interface Refiller {
  /**
   * Fetches under `lead` until about `need` new proxies are in the pool or a bound stops it
   * (the ledger, back-off, pacing, the lead lost, the signal). Never throws: a failed call is
   * an Error fetch, counted and backed off.
   */
  refill(
    connector: ProviderApiConnector,
    need: number,
    lead: FetchLead,
    signal: AbortSignal,
  ): Promise<RefillResult>;
  stats(connectorId: string): Promise<FetchStats>;
}
