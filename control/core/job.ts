/**
 * A job is one class per kind: it does the work of a batch (`run`) and, optionally, something
 * with a batch given up after its last delivery (`giveUp`, nothing by default). Handlers are
 * idempotent: a key published twice runs twice, and that must be harmless.
 */
import type { JobKind } from "../../shared/roles.ts";
import type { WorkBatch } from "./consumers.ts";

export type { WorkBatch };

export interface Job {
  readonly kind: JobKind;
  run(batch: WorkBatch, signal: AbortSignal): Promise<void>;
  giveUp?(batch: WorkBatch, signal: AbortSignal): Promise<void>;
}
