/**
 * A role runtime: what one role runs inside a process (its loops, its listener), its readiness
 * and its section of the heartbeat snapshot. A process of role `all` runs every runtime; they
 * talk only through Postgres and Redis.
 */
import type { Store } from "../../shared/errors.ts";
import { errorText } from "../../shared/errors.ts";
import type { Role } from "../../shared/roles.ts";
import type { Logger } from "../core/logging.ts";
import type { Loop, LoopSnapshot } from "../../shared/async/loop.ts";
import { TaskSet } from "../core/tasks.ts";

export type RuntimeName = Exclude<Role, "all">;

export const RuntimeState = {
  created: "created",
  starting: "starting",
  running: "running",
  stopping: "stopping",
  stopped: "stopped",
} as const;
export type RuntimeState = (typeof RuntimeState)[keyof typeof RuntimeState];

export interface RuntimeSnapshot {
  state: RuntimeState;
  loops: LoopSnapshot[];
  /** Anything else the runtime reports, such as the job kinds a worker takes. */
  [detail: string]: unknown;
}

export interface RoleRuntime {
  readonly name: RuntimeName;
  /** The stores the runtime cannot work without: the process is unready while one is away. */
  readonly stores: readonly Store[];
  /** Starts everything; on failure, stops what it started and raises. */
  start(): Promise<void>;
  /** Stops its loops together and closes what it opened. Never raises; safe twice. */
  stop(): Promise<void>;
  /** The runtime's own reason not to serve, or undefined when it has none. */
  readiness(): string | undefined;
  snapshot(): RuntimeSnapshot;
}

export interface RuntimeOptions {
  logger: Logger;
}

/**
 * The shared part of every runtime: the state, the named loops (a TaskSet), and a stop that
 * runs every step even when one fails. Subclasses add steps around the loops.
 */
export abstract class BaseRuntime implements RoleRuntime {
  abstract readonly name: RuntimeName;
  abstract readonly stores: readonly Store[];
  protected readonly logger: Logger;
  protected readonly tasks: TaskSet;
  #state: RuntimeState = RuntimeState.created;
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: RuntimeOptions) {
    this.logger = options.logger;
    this.tasks = new TaskSet(options.logger);
  }

  get state(): RuntimeState {
    return this.#state;
  }

  /** The loops this runtime runs, started after `beforeLoops`. None yet for any role. */
  protected loops(): Loop[] {
    return [];
  }

  /** Steps before the loops start (a lease, a seed). */
  protected beforeLoops(): Promise<void> {
    return Promise.resolve();
  }

  /** Steps after the loops started (a listener, so nothing is served before the loops run). */
  protected afterLoops(): Promise<void> {
    return Promise.resolve();
  }

  /** Undoes `afterLoops`, before the loops stop. Must not raise. */
  protected beforeLoopsStop(): Promise<void> {
    return Promise.resolve();
  }

  /** Undoes `beforeLoops`, after the loops stopped. Must not raise. */
  protected afterLoopsStop(): Promise<void> {
    return Promise.resolve();
  }

  /** Extra details for the snapshot. */
  protected details(): Record<string, unknown> {
    return {};
  }

  start(): Promise<void> {
    this.#starting ??= this.#start();
    return this.#starting;
  }

  async #start(): Promise<void> {
    if (this.#state !== RuntimeState.created) throw new Error(`${this.name} runtime was stopped`);
    this.#state = RuntimeState.starting;
    try {
      await this.beforeLoops();
      for (const loop of this.loops()) this.tasks.start(loop);
      await this.afterLoops();
      this.#state = RuntimeState.running;
      this.logger.debug({ runtime: this.name }, "Runtime started");
    } catch (error) {
      await this.#stop();
      throw error;
    }
  }

  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    if (this.#state === RuntimeState.stopped) return;
    this.#state = RuntimeState.stopping;
    await this.#quietly("close its listener", () => this.beforeLoopsStop());
    await this.#quietly("stop its loops", () => this.tasks.stop());
    await this.#quietly("release what it held", () => this.afterLoopsStop());
    this.#state = RuntimeState.stopped;
    this.logger.debug({ runtime: this.name }, "Runtime stopped");
  }

  async #quietly(what: string, step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (error) {
      this.logger.warn(
        { runtime: this.name, error: errorText(error) },
        `Runtime failed to ${what}`,
      );
    }
  }

  readiness(): string | undefined {
    return this.#state === RuntimeState.running ? undefined : `${this.name}: ${this.#state}`;
  }

  snapshot(): RuntimeSnapshot {
    return { ...this.details(), state: this.#state, loops: this.tasks.snapshot() };
  }
}
