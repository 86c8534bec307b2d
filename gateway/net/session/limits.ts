/** The socket layer's bounds, from the settings, and how a client's project narrows them. */
import type { Client } from "../../../shared/routing/contract.ts";

export interface NetLimits {
  maxHeaderBytes: number;
  clientIdleTimeoutMs: number;
  connectTimeoutMs: number;
}

/**
 * How long an attempt may take to reach its upstream (and a forwarded request to see its first
 * answer byte): OCTOPROX_CONNECT_TIMEOUT, or the client's project's shorter one.
 */
export function connectTimeoutFor(limits: NetLimits, client: Client): number {
  const own = client.connectTimeoutMs;
  return own !== undefined && own < limits.connectTimeoutMs ? own : limits.connectTimeoutMs;
}

/**
 * Without a project's own max_retries: seed 001's default, a failed attempt may go on to one
 * other proxy (2 distinct ones in all).
 */
export const DEFAULT_MAX_RETRIES = 1;

/**
 * How many distinct proxies a request that may be retried (a GET or HEAD without a body; a
 * tunnel until it is up) is tried on: one, then as many more as its project's max_retries.
 */
export function attemptsFor(client: Client): number {
  return 1 + (client.maxRetries ?? DEFAULT_MAX_RETRIES);
}
