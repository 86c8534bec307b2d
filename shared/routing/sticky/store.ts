/**
 * Where sticky bindings are shared between gateways: `<prefix>sticky:<project>:<session>` in
 * Redis (redis-store.ts), behind this interface so the routing core stays runtime-neutral and
 * tests can hand in a store that fails or hangs.
 */
export interface StickyStore {
  /**
   * The proxy id the session is bound to, or undefined when there is none. May reject (the
   * caller counts that as no binding); should give up once `signal` aborts (the request deadline).
   */
  get(projectId: string, sessionId: string, signal: AbortSignal): Promise<string | undefined>;
  /** Binds the session to the proxy for `ttlMs` from now, replacing any binding. */
  set(projectId: string, sessionId: string, proxyId: string, ttlMs: number): Promise<void>;
}
