/**
 * A gateway's copy of its sticky sessions for one project: session id to proxy id, each binding
 * expiring `lifeMs` after the session's last request (the expiry slides, and without it a gateway
 * would keep every session it ever saw). The map is kept in last-use order, so the oldest
 * bindings are at its front: a few there are swept at each new binding, and past `maxSessions`
 * the least recently used one goes.
 */

export interface Binding {
  proxyId: string;
  /** The session's life: `-sesstime-` minutes, or the project's session TTL. */
  lifeMs: number;
  expiresAtMs: number;
  /** When the Redis copy was last written (-Infinity: never). */
  writtenAtMs: number;
}

/** Front entries looked at for expiry per new binding. */
const SWEEP_PER_BIND = 4;

export class SessionBindings {
  private readonly map = new Map<string, Binding>();
  private readonly maxSessions: number;

  constructor(maxSessions: number) {
    this.maxSessions = Math.max(1, Math.floor(maxSessions));
  }

  get size(): number {
    return this.map.size;
  }

  /** The session's live binding; an expired one is dropped. */
  get(sessionId: string, nowMs: number): Binding | undefined {
    const binding = this.map.get(sessionId);
    if (binding === undefined) return undefined;
    if (binding.expiresAtMs > nowMs) return binding;
    this.map.delete(sessionId);
    return undefined;
  }

  /** A request of the session: its life starts again. */
  touch(sessionId: string, binding: Binding, nowMs: number, lifeMs: number): void {
    binding.lifeMs = lifeMs;
    binding.expiresAtMs = nowMs + lifeMs;
    // Moved to the back: the front stays the least recently used.
    this.map.delete(sessionId);
    this.map.set(sessionId, binding);
  }

  /** Binds the session (afresh or again), its Redis copy not yet written. */
  bind(sessionId: string, proxyId: string, nowMs: number, lifeMs: number): Binding {
    this.map.delete(sessionId);
    this.sweep(nowMs);
    while (this.map.size >= this.maxSessions) {
      const oldest = this.map.keys().next();
      if (oldest.done === true) break;
      this.map.delete(oldest.value);
    }
    const binding: Binding = {
      proxyId,
      lifeMs,
      expiresAtMs: nowMs + lifeMs,
      writtenAtMs: -Infinity,
    };
    this.map.set(sessionId, binding);
    return binding;
  }

  private sweep(nowMs: number): void {
    let looked = 0;
    for (const [sessionId, binding] of this.map) {
      if (looked++ === SWEEP_PER_BIND) break;
      if (binding.expiresAtMs <= nowMs) this.map.delete(sessionId);
    }
  }
}
