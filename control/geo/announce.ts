/**
 * What a geo write owes: one change entry, recorded with the write (the outbox) and announced
 * after it (the feed's global section lists the databases and the settings, so the controller
 * compiles again), and, when the write changed how exits are judged (a new file of an enabled
 * database, a database enabled, disabled, reordered or deleted, other sources or another
 * conflict rule), a `reattribute all` run once committed, so every proxy's location is judged
 * again by what is now in force.
 */
import { ChangeKind, JobKind } from "../../shared/roles.ts";
import { INSTALL_WIDE_KEY } from "../core/job-catalogue.ts";
import type { ServiceDeps } from "../core/store.ts";
import type { ChangeEntry } from "../core/changelog.ts";

/** The change entry of a geo write: a database's id, or `settings`. */
export function geoChange(ref: string): ChangeEntry {
  return { kind: ChangeKind.geo, ref };
}

/** After the commit of a write that changed how exits are judged. Never throws (the queue logs). */
export async function askReattribution(deps: Pick<ServiceDeps, "jobs">): Promise<void> {
  await deps.jobs.request(JobKind.reattribute, [INSTALL_WIDE_KEY]);
}
