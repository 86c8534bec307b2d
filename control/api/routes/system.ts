/** The System page's data: answered from the stores, the same whichever api answers. */
import { UserRole } from "../../../shared/roles.ts";
import { readSystemStats } from "../../metrics/system-stats.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import { SystemStatsAnswer } from "../answers/system.ts";

export function systemRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: "/api/v1/system/stats",
      tag: "system",
      summary:
        "Every live process, the controller leading, the routing feed with each gateway against " +
        "it, and each work stream's depth",
      description: "Read from Redis only: each process's last heartbeat (its loops and stores; " +
        "a gateway's feed digest and apply age, connections, tunnels, isolates, loop lag and " +
        "publishers), the lease holder, the feed head and whether each gateway has applied it, " +
        "per work stream its length, pending entries, backlog (length less pending) and " +
        "oldest entry's age on Redis's clock, and the provider-API pools whose runs go on with " +
        "their connectors' last-known settings because Postgres is away from their workers " +
        "(from the workers' heartbeats). A section Redis cannot answer carries its own error.",
      access: UserRole.admin,
      responses: {
        200: answer("The processes, the leader and the work streams", SystemStatsAnswer),
      },
      async handler({ c }) {
        return c.json(await readSystemStats(deps.redis, deps.keys));
      },
    }),
  ];
}
