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
import { errorText } from "../../shared/errors.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import { PeriodicLoop } from "../../shared/async/loop.ts";

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

/**
 * On the `PeriodicLoop` base (shared/async/loop.ts): the first beat at the start, then one every
 * interval, start to start; a failed beat holds its back-off to the interval, so the next still
 * comes on time.
 */
export class GatewayHeartbeat extends PeriodicLoop {
  readonly #o: GatewayHeartbeatOptions;
  readonly #stats: HeartbeatStats = {
    beats: 0,
    failures: 0,
    consecutive_failures: 0,
    last_error: null,
  };
  #stopping: Promise<void> | undefined;
  #wrote = false;

  constructor(options: GatewayHeartbeatOptions) {
    super({ name: "gateway_heartbeat", intervalMs: options.intervalMs, runAtStart: true });
    this.#o = options;
  }

  /** Both keys live three intervals, so one late beat never delists the process. */
  get ttlMs(): number {
    return this.#o.intervalMs * 3;
  }

  stats(): HeartbeatStats {
    return { ...this.#stats, consecutive_failures: this.consecutiveFailures };
  }

  /** Beats now, then every interval, start to start. A second start does nothing. */
  override start(): Promise<void> {
    if (this.#stopping !== undefined) return Promise.resolve();
    return super.start();
  }

  /** Stops beating, waits for a beat under way, withdraws the keys. Safe twice; never rejects. */
  override stop(): Promise<void> {
    this.#stopping ??= (async () => {
      const withdrawn = (async () => {
        await super.stop();
        if (!this.#wrote) return;
        await this.#o.store.withdraw();
      })();
      const waitMs = this.#o.stopWaitMs;
      try {
        await (waitMs === undefined
          ? withdrawn
          : withDeadline("heartbeat withdrawal", waitMs, () => withdrawn));
      } catch (error) {
        this.#o.logger.warn("Heartbeat keys not withdrawn; they expire on their own", {
          error: errorText(error),
        });
      } finally {
        withdrawn.catch(() => {});
      }
    })();
    return this.#stopping;
  }

  /** One beat; a failure is counted by the base and told below. */
  protected override async cycle(): Promise<void> {
    const snapshot = await this.#o.report();
    await this.#o.store.write(
      { ...this.#o.registration, ttl_ms: this.ttlMs },
      JSON.stringify(snapshot),
    );
    this.#wrote = true;
    this.#stats.beats++;
  }

  protected override cycleFailed(error: unknown, consecutiveFailures: number): void {
    const text = errorText(error);
    this.#stats.failures++;
    if (consecutiveFailures === 1) {
      this.#o.logger.warn("Heartbeat not written; the System page shows this gateway late", {
        error: text,
      });
    }
    this.#stats.last_error = text;
  }

  protected override cycleRecovered(failures: number): void {
    this.#o.logger.info("Heartbeat written again", { failures });
  }
}
