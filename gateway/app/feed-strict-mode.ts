/**
 * Strict mode over the feeds the follower applies (gateway/access/strict-mode.ts says what it
 * is): a first feed with a project anyone can use without a password refuses the start; one a
 * later feed brings is logged once while it stays so (its password-less requests are refused).
 */
import type { RoutingSnapshot } from "../../shared/routing/snapshot.ts";
import { describeProjects, listensBeyondLoopback, openProjects } from "../access/strict-mode.ts";
import type { Logger } from "../base/log.ts";
import { StartRefused } from "./start-refused.ts";

/** Checks an applied snapshot: the refusal of the start, when the first feed must not be served. */
export type StrictModeCheck = (
  snapshot: RoutingSnapshot,
  first: boolean,
) => StartRefused | undefined;

/** The check for a gateway listening on `host`; none when it listens on loopback only. */
export function strictModeCheck(host: string, logger: Logger): StrictModeCheck | undefined {
  if (!listensBeyondLoopback(host)) return undefined;
  /** Open projects already warned of, so each is logged once while it stays so. */
  let warnedOpen = new Set<string>();
  return (snapshot, first) => {
    // Only a rebuild of the projects can change which are open.
    if (!snapshot.stats.projectsRebuilt) return undefined;
    const open = openProjects(snapshot);
    if (first && open.length > 0) {
      return new StartRefused(
        "Refusing to start: a project can be used without a password from any address " +
          "(strict mode: the gateway listens beyond loopback)",
        { projects: describeProjects(open), host },
      );
    }
    const newly = open.filter((entry) => !warnedOpen.has(entry.id));
    if (newly.length > 0) {
      logger.warn(
        "Strict mode: password-less access refused for projects anyone could use without a " +
          "password",
        { projects: describeProjects(newly) },
      );
    }
    warnedOpen = new Set(open.map((entry) => entry.id));
    return undefined;
  };
}
