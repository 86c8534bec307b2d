/**
 * What a committed geo write owes: one change entry (the feed's global section lists the
 * databases and the settings, so the controller compiles again), and, when the write changed
 * how exits are judged (a new file of an enabled database, a database enabled, disabled,
 * reordered or deleted, other sources or another conflict rule), a `reattribute all` run, so
 * every proxy's location is judged again by what is now in force.
 */
import { ChangeKind, JobKind } from "../../shared/roles.ts";
import { INSTALL_WIDE_KEY } from "../core/job-catalogue.ts";
import type { ServiceDeps } from "../core/store.ts";

export interface GeoAnnouncement {
  /** What changed: a database's id, or `settings`. */
  ref: string;
  /** The write changed how exits are judged. */
  judged: boolean;
}

/** Never throws: the change log keeps what Redis refuses, the job queue logs it. */
export async function announceGeo(
  deps: Pick<ServiceDeps, "changes" | "jobs">,
  announcement: GeoAnnouncement,
): Promise<void> {
  await deps.changes.append({ kind: ChangeKind.geo, ref: announcement.ref });
  if (announcement.judged) await deps.jobs.request(JobKind.reattribute, [INSTALL_WIDE_KEY]);
}
