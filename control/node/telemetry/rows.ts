/**
 * Which loop rows of the snapshot carry what. Every row has the base job stats; a loop class
 * adds its own fields (Loop.snapshot is overridden down the class tree), and the snapshot JSON
 * keeps them flat, so a row is told by the fields only its class writes.
 */
import type { LeaseSnapshot } from "../../core/lease.ts";
import type { FeedBuilderSnapshot } from "../../feed/builder.ts";
import type { JobProducerSnapshot } from "../../jobs/producers.ts";
import type { FollowerSnapshot } from "../../core/consumers.ts";
import type { LoopSnapshot } from "../../../shared/async/loop.ts";
import type { JobRunnerSnapshot } from "../../jobs/runner.ts";
import type { ControllerSnapshot } from "../../roles/controller.ts";
import type { ProcessSnapshot } from "../heartbeat.ts";

export function isJobRunner<T extends LoopSnapshot>(loop: T): loop is T & JobRunnerSnapshot {
  return "job_kind" in loop && "running_batches" in loop;
}

export function isJobProducer<T extends LoopSnapshot>(loop: T): loop is T & JobProducerSnapshot {
  return "job_kind" in loop && "period_seconds" in loop;
}

export function isFollower<T extends LoopSnapshot>(loop: T): loop is T & FollowerSnapshot {
  return "streams" in loop && "full_reads" in loop;
}

export function isFeedBuilder<T extends LoopSnapshot>(loop: T): loop is T & FeedBuilderSnapshot {
  return isFollower(loop) && "publishes" in loop;
}

/** The controller's lease, in a process that runs a controller. */
export function leaseOf(snapshot: ProcessSnapshot): LeaseSnapshot | undefined {
  // The controller's section is what ControllerRuntime.snapshot wrote.
  return (snapshot.runtimes.controller as ControllerSnapshot | undefined)?.lease;
}

/** Whether this process leads: the leader-only families come from it alone. */
export function leads(snapshot: ProcessSnapshot): boolean {
  return leaseOf(snapshot)?.state === "leading";
}
