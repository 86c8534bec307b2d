/**
 * Every core: the worker isolates that serve beside the main one in a gateway process
 * (OCTOPROX_GATEWAY_ISOLATES). Each worker (isolate-worker.ts) runs its own listeners on the
 * main isolate's ports with SO_REUSEPORT, so the kernel spreads new connections over the
 * isolates, and routes on the main isolate's dispatch counts (a SharedArrayBuffer, Atomics), so
 * concurrency limits and least_used stay exact for the process. The feed is followed once, here
 * in the main isolate, which hands each applied feed's delta to the workers with the slots it
 * numbered; the connection budget is one shared word too.
 *
 * A worker that fails to start or to bind is stopped and left out with a warning: the process
 * serves from the isolates it has. One that crashes later is logged and not replaced.
 */
import type { GatewaySettings } from "../../shared/settings.ts";
import type { Dispatch, DispatchBuffers } from "../../shared/routing/dispatch.ts";
import type { SectionsDelta } from "../../shared/routing/feed-share.ts";
import type { ConnectionBudget } from "../net/io/budget.ts";
import type { FeedFreshness } from "../../shared/routing/feed-freshness.ts";
import type { FromWorker, ToWorker } from "./isolate-messages.ts";
import type { Logger } from "../base/log.ts";
import type { MetricsSnapshot } from "../base/metrics.ts";
import type { MitmCaFiles } from "./mitm-ca.ts";

export interface IsolatePoolOptions {
  /** Worker isolates to start (the isolates serving the process, less the main one). */
  workers: number;
  settings: GatewaySettings;
  /**
   * The CA's files as the main isolate read and checked them: each worker loads the same CA
   * from this text rather than reading the files again (mitm-ca.ts says why).
   */
  mitmCa: MitmCaFiles;
  instance: string;
  logger: Logger;
  /** Writes a worker's log lines (whole lines, in order with the main isolate's own). */
  writeLines: (text: string) => void;
  /** The main isolate's counts. */
  dispatch: Dispatch;
  budget: ConnectionBudget;
  /** When the main isolate last read the feed: every worker refuses on it as the main one. */
  freshness: FeedFreshness;
  /** A worker's rate limiter tripped a proxy: the main isolate excludes it too. */
  quarantined?: (proxyId: string, untilMs: number) => void;
}

const START_WAIT_MS = 15_000;
const BIND_WAIT_MS = 5_000;
const METRICS_WAIT_MS = 1_000;
/** A worker's stop waits for its handlers at most STOP_WAIT_MS (listener.ts); then some room. */
const STOP_WAIT_MS = 8_000;

/**
 * The worker isolates' entry, beside this module. In the single-file bundle
 * (`npm run build:gateway -- --bundle`) this module is inside dist/octoprox-gateway.js and the
 * worker is bundled beside it, as octoprox-gateway-worker.js.
 */
const WORKER_ENTRY = import.meta.url.endsWith(".js")
  ? "./octoprox-gateway-worker.js"
  : "./isolate-worker.ts";

interface Member {
  index: number;
  worker: Worker;
  /** Resolves with the next message of this type (one waiter per type at a time). */
  waiters: Map<string, (message: FromWorker) => void>;
  metrics: Map<number, (snapshot: MetricsSnapshot | undefined) => void>;
  alive: boolean;
}

/** Resolves with `promise`'s value, or `fallback` once `ms` pass. */
function within<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<T>((resolve) => {
      timer = setTimeout(() => resolve(fallback), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export class IsolatePool {
  readonly #options: IsolatePoolOptions;
  readonly #members: Member[] = [];
  #metricsId = 0;
  #stopping: Promise<void> | undefined;

  constructor(options: IsolatePoolOptions) {
    this.#options = options;
  }

  /** Worker isolates serving now. */
  get size(): number {
    return this.#members.filter((member) => member.alive).length;
  }

  /** Starts the workers and waits until each built its core (or failed, and was left out). */
  async start(): Promise<void> {
    const { workers, settings, instance, logger, dispatch, budget, freshness, mitmCa } =
      this.#options;
    if (!dispatch.shared) {
      logger.warn("No SharedArrayBuffer here: serving from the main isolate alone");
      return;
    }
    const started: Promise<void>[] = [];
    for (let index = 1; index <= workers; index++) {
      let member: Member;
      try {
        member = this.#spawn(index);
      } catch (error) {
        logger.warn("A worker isolate could not be started", { isolate: index, error });
        continue;
      }
      this.#members.push(member);
      const ready = this.#next(member, ["ready", "failed"]);
      this.#post(member, {
        type: "init",
        settings,
        mitmCa,
        instance,
        index,
        dispatch: this.#buffers(),
        budget: budget.buffer,
        freshness: freshness.buffer,
      });
      started.push(
        within(ready, START_WAIT_MS, undefined).then((message) => {
          if (message?.type === "ready") return;
          logger.warn("A worker isolate did not start: left out", {
            isolate: index,
            reason: message?.type === "failed" ? message.message : "it failed or did not answer",
          });
          this.#drop(member);
        }),
      );
    }
    await Promise.all(started);
  }

  /** Hands an applied feed to every worker (before the listeners bind, for the first). */
  share(delta: SectionsDelta): void {
    const dispatch = this.#buffers();
    for (const member of this.#members) {
      if (member.alive) this.#post(member, { type: "feed", delta, dispatch });
    }
  }

  /**
   * A quarantine one isolate's rate limiter tripped, for every worker but `except` (the one that
   * tripped it): the whole process excludes the proxy at once, not only the isolate that counted
   * the request that filled its window.
   */
  shareQuarantine(proxyId: string, untilMs: number, except?: number): void {
    for (const member of this.#members) {
      if (member.alive && member.index !== except) {
        this.#post(member, { type: "quarantine", proxyId, untilMs });
      }
    }
  }

  /** Binds every worker's listeners on these ports; resolves how many isolates bound. */
  async bind(proxyPort: number, socksPort: number | null): Promise<number> {
    const results = await Promise.all(
      this.#members.filter((m) => m.alive).map(async (member) => {
        const answer = this.#next(member, ["bound", "failed"]);
        this.#post(member, { type: "bind", proxyPort, socksPort });
        const message = await within(answer, BIND_WAIT_MS, undefined);
        if (message?.type === "bound") return true;
        this.#options.logger.warn("A worker isolate could not bind: stopped", {
          isolate: member.index,
          reason: message?.type === "failed" ? message.message : "no answer in time",
        });
        await this.#stopMember(member);
        return false;
      }),
    );
    return results.filter(Boolean).length;
  }

  /** Every live worker's counters (a worker that does not answer in time is left out). */
  async snapshots(): Promise<MetricsSnapshot[]> {
    const answers = await Promise.all(
      this.#members.filter((m) => m.alive).map((member) => {
        const id = ++this.#metricsId;
        const answer = new Promise<MetricsSnapshot | undefined>((resolve) => {
          member.metrics.set(id, resolve);
        });
        this.#post(member, { type: "metrics", id });
        return within(answer, METRICS_WAIT_MS, undefined).finally(() => member.metrics.delete(id));
      }),
    );
    return answers.filter((snapshot): snapshot is MetricsSnapshot => snapshot !== undefined);
  }

  /** Stops every worker (each closes its listeners and waits for its handlers). Safe twice. */
  stop(): Promise<void> {
    this.#stopping ??= Promise.all(this.#members.map((member) => this.#stopMember(member)))
      .then(() => {});
    return this.#stopping;
  }

  #buffers(): DispatchBuffers {
    // Shared (checked in start): the cast only narrows ArrayBufferLike.
    return this.#options.dispatch.buffers as DispatchBuffers;
  }

  #spawn(index: number): Member {
    const worker = new Worker(new URL(WORKER_ENTRY, import.meta.url), {
      type: "module",
      name: `isolate-${index}`,
    });
    const member: Member = {
      index,
      worker,
      waiters: new Map(),
      metrics: new Map(),
      alive: true,
    };
    worker.onmessage = (event: MessageEvent<FromWorker>) => this.#receive(member, event.data);
    worker.onerror = (event: ErrorEvent) => {
      // Handled here: unhandled, a worker's error would end the whole process.
      event.preventDefault();
      this.#options.logger.error("A worker isolate failed: left out", {
        isolate: index,
        error: event.message,
      });
      this.#drop(member);
    };
    return member;
  }

  #receive(member: Member, message: FromWorker): void {
    try {
      if (message.type === "log") {
        this.#options.writeLines(message.text);
        return;
      }
      if (message.type === "metrics") {
        member.metrics.get(message.id)?.(message.snapshot);
        return;
      }
      if (message.type === "quarantine") {
        this.#options.quarantined?.(message.proxyId, message.untilMs);
        this.shareQuarantine(message.proxyId, message.untilMs, member.index);
        return;
      }
      if (message.type === "failed" && message.stage === "feed") {
        // Not an answer to start or bind: the worker keeps serving its last feed.
        this.#options.logger.error("A worker isolate could not apply a feed", {
          isolate: member.index,
          reason: message.message,
        });
        return;
      }
      const waiter = member.waiters.get(message.type);
      if (waiter !== undefined) waiter(message);
    } catch (error) {
      this.#options.logger.error("A worker isolate's message failed", { error });
    }
  }

  /** The next message of one of `types` from `member` (undefined if it dies first). */
  #next(member: Member, types: FromWorker["type"][]): Promise<FromWorker | undefined> {
    return new Promise((resolve) => {
      const done = (message: FromWorker | undefined) => {
        for (const type of types) member.waiters.delete(type);
        member.waiters.delete("gone");
        resolve(message);
      };
      for (const type of types) member.waiters.set(type, done);
      member.waiters.set("gone", () => done(undefined));
    });
  }

  #post(member: Member, message: ToWorker): void {
    if (!member.alive) return;
    try {
      member.worker.postMessage(message);
    } catch (error) {
      this.#options.logger.error("A message to a worker isolate failed", {
        isolate: member.index,
        error,
      });
    }
  }

  async #stopMember(member: Member): Promise<void> {
    if (!member.alive) return;
    const stopped = this.#next(member, ["stopped"]);
    this.#post(member, { type: "stop" });
    await within(stopped, STOP_WAIT_MS, undefined);
    this.#drop(member);
  }

  /** Ends the worker at once; its waiters hear it is gone. Safe twice. */
  #drop(member: Member): void {
    if (!member.alive) return;
    member.alive = false;
    try {
      member.worker.terminate();
    } catch {
      // Ended already.
    }
    for (const resolve of member.metrics.values()) resolve(undefined);
    member.metrics.clear();
    const gone = member.waiters.get("gone");
    if (gone !== undefined) gone({ type: "stopped" });
  }
}
