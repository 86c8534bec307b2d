/**
 * The gateway's heartbeat: every interval (OCTOPROX_HEARTBEAT_INTERVAL, 5 s) the process's
 * snapshot is written to Redis the way every control process writes its own
 * (shared/instance-registry.ts: the registry key, the snapshot key and the instance index in one
 * MULTI, both keys living three intervals), so the System page lists the gateway with its
 * heartbeat age and the feed it routes on. A beat that fails is logged once as the streak begins
 * and the next beat still comes on time; a clean stop withdraws the keys.
 *
 * For display only: nothing routes by it, and the gateway serves whether Redis takes it or not.
 */
import type { InstanceRegistration } from "../../shared/instance-registry.ts";
import type { Logger } from "../base/log.ts";

/**
 * Where the heartbeat writes the process's keys (instance-store.ts, over the core's Redis client).
 */
export interface InstanceStore {
  write(registration: InstanceRegistration, snapshotJson: string): Promise<void>;
  withdraw(): Promise<void>;
}

export interface GatewayHeartbeatOptions {
  store: InstanceStore;
  logger: Logger;
  intervalMs: number;
  registration: Omit<InstanceRegistration, "ttl_ms">;
  /** The snapshot as of now (the isolates are asked for theirs, bounded). */
  report(): Promise<object>;
  /**
   * The longest a stop waits for the beat under way and the withdrawal together (the request
   * deadline): with Redis away the keys expire on their own, and the stop goes on.
   */
  stopWaitMs?: number;
}

export interface HeartbeatStats {
  beats: number;
  failures: number;
  consecutive_failures: number;
  last_error: string | null;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message || error.name : String(error);
}

export class GatewayHeartbeat {
  readonly #o: GatewayHeartbeatOptions;
  readonly #stats: HeartbeatStats = {
    beats: 0,
    failures: 0,
    consecutive_failures: 0,
    last_error: null,
  };
  #timer: ReturnType<typeof setTimeout> | undefined;
  #beating: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #wrote = false;

  constructor(options: GatewayHeartbeatOptions) {
    this.#o = options;
  }

  /** Both keys live three intervals, so one late beat never delists the process. */
  get ttlMs(): number {
    return this.#o.intervalMs * 3;
  }

  stats(): HeartbeatStats {
    return { ...this.#stats };
  }

  /** Beats now, then every interval, start to start. A second start does nothing. */
  start(): void {
    if (this.#beating !== undefined || this.#stopping !== undefined) return;
    this.#schedule(Date.now());
  }

  /** Stops beating, waits for a beat under way, withdraws the keys. Safe twice; never rejects. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      if (this.#timer !== undefined) clearTimeout(this.#timer);
      this.#timer = undefined;
      const withdrawn = (async () => {
        await this.#beating;
        if (!this.#wrote) return;
        await this.#o.store.withdraw();
      })();
      const waitMs = this.#o.stopWaitMs;
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        await (waitMs === undefined ? withdrawn : Promise.race([
          withdrawn,
          new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`No answer within ${waitMs} ms`)),
              waitMs,
            );
          }),
        ]));
      } catch (error) {
        this.#o.logger.warn("Heartbeat keys not withdrawn; they expire on their own", {
          error: errorText(error),
        });
      } finally {
        clearTimeout(timer);
        withdrawn.catch(() => {});
      }
    })();
    return this.#stopping;
  }

  #schedule(dueAtMs: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopping !== undefined) return;
      this.#beating = this.#beat().finally(() => {
        this.#beating = undefined;
        // Start to start: a slow beat does not push the schedule back.
        if (this.#stopping === undefined) {
          this.#schedule(Math.max(dueAtMs + this.#o.intervalMs, Date.now()));
        }
      });
    }, Math.max(0, dueAtMs - Date.now()));
  }

  /** One beat; never rejects. */
  async #beat(): Promise<void> {
    try {
      const snapshot = await this.#o.report();
      await this.#o.store.write(
        { ...this.#o.registration, ttl_ms: this.ttlMs },
        JSON.stringify(snapshot),
      );
      this.#wrote = true;
      this.#stats.beats++;
      if (this.#stats.consecutive_failures > 0) {
        this.#o.logger.info("Heartbeat written again", {
          failures: this.#stats.consecutive_failures,
        });
      }
      this.#stats.consecutive_failures = 0;
    } catch (error) {
      const text = errorText(error);
      this.#stats.failures++;
      this.#stats.consecutive_failures++;
      if (this.#stats.consecutive_failures === 1) {
        this.#o.logger.warn("Heartbeat not written; the System page shows this gateway late", {
          error: text,
        });
      }
      this.#stats.last_error = text;
    }
  }
}
