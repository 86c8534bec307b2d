/**
 * On-demand country groups, the gateway's half: a request naming a country that an "All
 * countries" session pool has no rows for asks a worker for the group (the provision job, key
 * `<connector>:<country>`) and waits, up to PROVISION_WAIT_MS, for a snapshot whose pool serves
 * it; then it is routed as usual. Each key is asked once per wait period however many requests
 * want it, and the worker's row lock makes one group of two gateways' asks.
 *
 * Runs unchanged on Node and Deno; the ask itself (a work-stream append) is the I/O edge's.
 */
import type { RoutingSnapshot } from "./snapshot.ts";

/** How long a request waits for its group to reach this gateway. */
export const PROVISION_WAIT_MS = 5_000;

export interface ProvisionRequests {
  /** Appends `<connector>:<country>` to the provision work stream; true when Redis took it. */
  ask(key: string): Promise<boolean>;
}

interface Waiter {
  ready: (snapshot: RoutingSnapshot) => boolean;
  resolve: (served: boolean) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class ProvisionWaits {
  private readonly requests: ProvisionRequests;
  private readonly waitMs: number;
  private readonly nowMs: () => number;
  private readonly waiters = new Set<Waiter>();
  /** Keys asked, with when: asked again only once a wait period has passed. */
  private readonly asked = new Map<string, number>();

  constructor(
    requests: ProvisionRequests,
    options: { waitMs?: number; nowMs?: () => number } = {},
  ) {
    this.requests = requests;
    this.waitMs = options.waitMs ?? PROVISION_WAIT_MS;
    this.nowMs = options.nowMs ?? Date.now;
  }

  /** This gateway asked for the key within the last wait period. */
  recentlyAsked(key: string): boolean {
    const at = this.asked.get(key);
    return at !== undefined && this.nowMs() - at < this.waitMs;
  }

  /**
   * Asks for each key not asked lately, then waits for a snapshot `ready` accepts: true when
   * one came within the wait period, false when none did (or Redis took no ask).
   */
  provide(
    keys: readonly string[],
    ready: (snapshot: RoutingSnapshot) => boolean,
  ): Promise<boolean> {
    const nowMs = this.nowMs();
    for (const [key, at] of this.asked) if (nowMs - at >= this.waitMs) this.asked.delete(key);
    const fresh = keys.filter((key) => !this.asked.has(key));
    for (const key of fresh) this.asked.set(key, nowMs);
    // The waiter is in place before any ask goes out, so no swap can come between the two.
    let waiter: Waiter | undefined;
    const served = new Promise<boolean>((resolve) => {
      waiter = {
        ready,
        resolve,
        timer: setTimeout(() => {
          this.waiters.delete(waiter!);
          resolve(false);
        }, this.waitMs),
      };
      this.waiters.add(waiter);
    });
    if (fresh.length > 0) {
      void Promise.all(fresh.map((key) => this.requests.ask(key).catch(() => false))).then(
        (taken) => {
          if (taken.some(Boolean)) return;
          // Redis took none: nothing will come, so the request is answered now.
          for (const key of fresh) this.asked.delete(key);
          if (fresh.length === keys.length && this.waiters.delete(waiter!)) {
            clearTimeout(waiter!.timer);
            waiter!.resolve(false);
          }
        },
      );
    }
    return served;
  }

  /** A new snapshot is in force: the requests it serves go on. */
  swapped(snapshot: RoutingSnapshot): void {
    for (const waiter of this.waiters) {
      if (!waiter.ready(snapshot)) continue;
      clearTimeout(waiter.timer);
      this.waiters.delete(waiter);
      waiter.resolve(true);
    }
  }

  /** Ends every wait (the gateway stops): each request gets its refusal. */
  close(): void {
    for (const waiter of this.waiters) {
      clearTimeout(waiter.timer);
      waiter.resolve(false);
    }
    this.waiters.clear();
  }
}
