/**
 * What the rest of the gateway sees of its IP databases: the stack in force, swapped whole by
 * the database sync (sync.ts) in the background. Preflight and anything else that places an
 * address reads it here, never waiting: undefined until the first stack opened.
 */
import type { GeoStack } from "../../shared/geo/stack.ts";

export interface GeoView {
  /** The databases in force, in the feed's order; undefined before the first swap. */
  stack(): GeoStack | undefined;
}
