/**
 * sticky: `-sessid-` binds the session to one proxy; without it, sticky behaves as random (the
 * client's address is never a routing key).
 *
 * A binding lives in this strategy's memory (sticky-bindings.ts) and, when the router was given a
 * store, in Redis, both expiring the session's life after its last request (`-sesstime-` minutes,
 * else the project's session TTL). A session's first request on this gateway reads the binding
 * from the store, under the request deadline; a read that fails, times out or names a proxy that
 * cannot serve this request places the session afresh (fail open). A bound proxy that left
 * routing or can no longer serve the request (unhealthy, quarantined, at its limit, excluded for
 * this request's retry, another place asked) moves the session to a new binding. A new placement
 * hashes the session over the eligible proxies, so gateways without Redis usually agree.
 *
 * The Redis copy is written by a held background task, never awaited by a request: at once for a
 * new binding (and one warmed from Redis, so its life starts from this request), then at most once
 * per half the session's life while the session keeps coming. A write that fails leaves the
 * binding local until its next rewrite.
 */
import type { HeldTasks } from "../sticky/held-tasks.ts";
import { withDeadline } from "../../async/deadline.ts";
import type { StickyStore } from "../sticky/store.ts";
import type { CoreLog } from "../log.ts";
import type { ProxyEntry } from "../snapshot.ts";
import type {
  Candidates,
  RoutingStrategy,
  Selection,
  StrategyContext,
  StrategyDeps,
} from "../strategy-contract.ts";
import { random } from "./random.ts";
import { placeSession } from "./session-hash.ts";
import { type Binding, SessionBindings } from "./sticky-bindings.ts";

/** A session's life when neither `-sesstime-` nor the project says (the spec's five minutes). */
export const DEFAULT_SESSION_TTL_MS = 300_000;
/** Sessions one project keeps on one gateway before the least recently used is forgotten. */
export const DEFAULT_MAX_SESSIONS = 100_000;
/** The request deadline for a binding's read (OCTOPROX_REDIS_REQUEST_TIMEOUT's default). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 2_000;

/** The session's life: `-sesstime-` minutes, else the project's session TTL. */
export function sessionLifeMs(context: StrategyContext): number {
  const minutes = context.options.sessionMinutes;
  if (minutes !== undefined && minutes > 0) return minutes * 60_000;
  const seconds = context.project.project.session_ttl_seconds;
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : DEFAULT_SESSION_TTL_MS;
}

export function sticky(deps: Pick<StrategyDeps, "random" | "log" | "sticky">): RoutingStrategy {
  return new StickyStrategy(deps);
}

class StickyStrategy implements RoutingStrategy {
  readonly name = "sticky";
  private readonly unbound: RoutingStrategy;
  private readonly bindings: SessionBindings;
  private readonly store: StickyStore | undefined;
  private readonly held: HeldTasks | undefined;
  private readonly timeoutMs: number;
  private readonly log: CoreLog;
  /** Reads under way, so concurrent first requests of a session share one. */
  private readonly reads = new Map<string, Promise<string | undefined>>();
  /** Warned about a failing read / write since the last one that worked (one line per outage). */
  private readFailing = false;
  private writeFailing = false;

  constructor(deps: Pick<StrategyDeps, "random" | "log" | "sticky">) {
    const options = deps.sticky ?? {};
    this.unbound = random(deps);
    this.bindings = new SessionBindings(options.maxSessions ?? DEFAULT_MAX_SESSIONS);
    this.store = options.store;
    this.held = options.held;
    this.timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.log = deps.log;
  }

  /** Sessions held in memory (for tests and metrics). */
  get sessions(): number {
    return this.bindings.size;
  }

  select(candidates: Candidates, context: StrategyContext): Selection | Promise<Selection> {
    const sessionId = context.options.sessionId;
    if (sessionId === undefined) return this.unbound.select(candidates, context);
    const lifeMs = sessionLifeMs(context);
    const bound = this.bindings.get(sessionId, context.nowMs);
    if (bound !== undefined) return this.keepOrMove(candidates, context, sessionId, bound, lifeMs);
    if (this.store === undefined) return this.place(candidates, context, sessionId, lifeMs);
    return this.warm(this.store, candidates, context, sessionId, lifeMs);
  }

  /**
   * The proxy the session is bound to: from memory, else the shared copy (read under the
   * deadline, failing open to none). A binding read here is kept here as `warm` would keep it,
   * so the select that follows does not read Redis again; whether it can serve is select's call.
   * The session's life slides as for any of its requests: one held on a resting proxy (answered
   * 429) for longer than its life is still held when the proxy comes back.
   */
  heldProxy(context: StrategyContext): string | undefined | Promise<string | undefined> {
    const sessionId = context.options.sessionId;
    if (sessionId === undefined) return undefined;
    const bound = this.bindings.get(sessionId, context.nowMs);
    if (bound !== undefined) {
      this.keep(context, sessionId, bound, sessionLifeMs(context));
      return bound.proxyId;
    }
    const store = this.store;
    if (store === undefined) return undefined;
    return this.read(store, context.project.id, sessionId).then((stored) => {
      const again = this.bindings.get(sessionId, context.nowMs);
      if (again !== undefined) return again.proxyId;
      if (stored === undefined) return undefined;
      const lifeMs = sessionLifeMs(context);
      this.write(context, sessionId, this.bindings.bind(sessionId, stored, context.nowMs, lifeMs));
      return stored;
    });
  }

  /** The bound proxy when it can still serve; otherwise the session moves. */
  private keepOrMove(
    candidates: Candidates,
    context: StrategyContext,
    sessionId: string,
    bound: Binding,
    lifeMs: number,
  ): Selection {
    const proxy = eligible(candidates, bound.proxyId);
    if (proxy === undefined) return this.place(candidates, context, sessionId, lifeMs);
    this.keep(context, sessionId, bound, lifeMs);
    return proxy;
  }

  /** Slides the binding's life from this request; rewrites its Redis copy past half of it. */
  private keep(context: StrategyContext, sessionId: string, bound: Binding, lifeMs: number): void {
    const nowMs = context.nowMs;
    this.bindings.touch(sessionId, bound, nowMs, lifeMs);
    if (nowMs - bound.writtenAtMs >= lifeMs / 2) this.write(context, sessionId, bound);
  }

  /** A new binding, by the session's hash over what can serve this request. */
  private place(
    candidates: Candidates,
    context: StrategyContext,
    sessionId: string,
    lifeMs: number,
  ): Selection {
    const proxy = placeSession(candidates, sessionId);
    if (proxy === undefined) return undefined;
    this.write(context, sessionId, this.bindings.bind(sessionId, proxy.id, context.nowMs, lifeMs));
    return proxy;
  }

  /** The session's first request here: the shared binding if it can serve, else a new one. */
  private async warm(
    store: StickyStore,
    candidates: Candidates,
    context: StrategyContext,
    sessionId: string,
    lifeMs: number,
  ): Promise<Selection> {
    const stored = await this.read(store, context.project.id, sessionId);
    // Another request of the session may have bound it while this one waited.
    const bound = this.bindings.get(sessionId, context.nowMs);
    if (bound !== undefined) return this.keepOrMove(candidates, context, sessionId, bound, lifeMs);
    const proxy = stored === undefined ? undefined : eligible(candidates, stored);
    if (proxy === undefined) return this.place(candidates, context, sessionId, lifeMs);
    this.write(context, sessionId, this.bindings.bind(sessionId, proxy.id, context.nowMs, lifeMs));
    return proxy;
  }

  private read(
    store: StickyStore,
    projectId: string,
    sessionId: string,
  ): Promise<string | undefined> {
    const pending = this.reads.get(sessionId);
    if (pending !== undefined) return pending;
    const read = withDeadline(
      "Sticky binding read",
      this.timeoutMs,
      (signal) => store.get(projectId, sessionId, signal),
    ).then((proxyId) => {
      this.readFailing = false;
      return proxyId;
    }, (error: unknown) => {
      if (!this.readFailing) {
        this.readFailing = true;
        this.log.warn("Sticky binding unreadable: session placed afresh", {
          project: projectId,
          error: error instanceof Error ? error.message : String(error),
        });
      }
      return undefined;
    });
    this.reads.set(sessionId, read);
    void read.then(() => this.reads.delete(sessionId));
    return read;
  }

  /** Writes the binding's Redis copy in the background, for the session's whole life. */
  private write(context: StrategyContext, sessionId: string, binding: Binding): void {
    binding.writtenAtMs = context.nowMs;
    const store = this.store;
    const held = this.held;
    if (store === undefined || held === undefined) return;
    const projectId = context.project.id;
    const { proxyId, lifeMs } = binding;
    held.run(async () => {
      try {
        await withDeadline(
          "Sticky binding write",
          this.timeoutMs,
          () => store.set(projectId, sessionId, proxyId, lifeMs),
        );
        this.writeFailing = false;
      } catch (error) {
        if (!this.writeFailing) {
          this.writeFailing = true;
          this.log.warn("Sticky binding not written to Redis: kept on this gateway", {
            project: projectId,
            error: error instanceof Error ? error.message : String(error),
          });
        }
      }
    });
  }
}

/** A place's rows as a set, built once per rows array (they live as long as their index). */
const rowSets = new WeakMap<readonly ProxyEntry[], ReadonlySet<ProxyEntry>>();

/**
 * The proxy if it can serve this request: still in routing, healthy for the place asked, of an
 * eligible connector, and usable now (not quarantined, not excluded, under its limit).
 */
function eligible(candidates: Candidates, proxyId: string): ProxyEntry | undefined {
  for (const choice of candidates.choices) {
    const entry = choice.connector.proxy(proxyId);
    if (entry === undefined) continue;
    let rows = rowSets.get(choice.rows);
    if (rows === undefined) {
      rows = new Set(choice.rows);
      rowSets.set(choice.rows, rows);
    }
    return rows.has(entry) && candidates.usable(entry) ? entry : undefined;
  }
  return undefined;
}
