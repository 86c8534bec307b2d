/** The socket layer's bounds, from the settings, and how a client's project narrows them. */
import type { Client } from "../core/contract.ts";

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
