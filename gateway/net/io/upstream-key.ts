/**
 * One upstream proxy as dialed, credential included, as a string: the key of what is kept per
 * exit (the keep-alive pool, io/upstream-pool.ts; the browser-grade engine's clients,
 * tls/impersonation.ts).
 */
import type { UpstreamChoice } from "../../../shared/routing/contract.ts";

// Per upstream object: a snapshot's rows are immutable and live until the next feed replaces them.
const poolKeys = new WeakMap<UpstreamChoice, string>();

/** The pool key: one upstream proxy as dialed, credential included. */
export function upstreamPoolKey(upstream: UpstreamChoice): string {
  let key = poolKeys.get(upstream);
  if (key === undefined) {
    key = JSON.stringify([
      upstream.proxyId,
      upstream.scheme,
      upstream.host,
      upstream.port,
      upstream.username,
      upstream.password,
    ]);
    poolKeys.set(upstream, key);
  }
  return key;
}
