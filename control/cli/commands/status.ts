/**
 * `status`: what the dashboard's System page shows, from the same GET /system/stats: the live
 * processes, the controller leading, the routing feed's head against each gateway, and the work
 * streams' backlog.
 */
import type { Command } from "commander";
import type { ListedProcess, SystemStats } from "../../api/answers/system.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { formatAge } from "../../core/format-age.ts";
import { emit, line, pc, printTable } from "../output.ts";

/** The lease holder is `<instance>:<token>`: the process is the part before the colon. */
export function leaderInstance(stats: SystemStats): string | null {
  const holder = stats.leader.data?.instance;
  if (!holder) return null;
  const all = Object.values(stats.processes.data?.by_role ?? {}).flat();
  return all.find((p) => holder === p.instance || holder.startsWith(`${p.instance}:`))
    ?.instance ?? holder;
}

function readyOf(process: ListedProcess): string {
  const snapshot = process.snapshot;
  if (!snapshot || typeof snapshot.ready !== "boolean") return "–";
  if (snapshot.ready) return pc.green("ready");
  const reasons = Array.isArray(snapshot.reasons) ? snapshot.reasons.join(", ") : "";
  return pc.yellow(`not ready${reasons ? `: ${reasons}` : ""}`);
}

function storesOf(process: ListedProcess): string {
  const stores = process.snapshot?.stores as Record<string, { ok: boolean }> | undefined;
  if (!stores) return "–";
  return Object.entries(stores)
    .map(([name, store]) => store.ok ? `${name} ok` : pc.red(`${name} down`))
    .join(", ");
}

function sectionError(error: string | null): void {
  if (error) line(pc.red(`Redis did not answer: ${error}`));
}

export function registerStatus(program: Command): void {
  leaf(
    program,
    "status",
    "Show the system: processes, the controller leading, the feed and the work streams (admin)",
    ["octoprox status", "octoprox status --json | jq .leader"],
  ).action(async (options: JsonOption) => {
    const client = await connect();
    const stats = await client.request<SystemStats>("GET", "/system/stats");
    emit(outputOf(options), stats, () => printStatus(stats, client.baseUrl));
  });
}

function printStatus(stats: SystemStats, url: string): void {
  const leader = leaderInstance(stats);
  line(`${pc.bold("Octoprox")} at ${url}, read ${stats.read_at}`);
  line();
  line(pc.bold("Controller leading"));
  sectionError(stats.leader.error);
  if (!stats.leader.error) {
    line(
      leader
        ? `  ${leader} (lease renews within ${formatAge(stats.leader.data?.lease_ttl_ms)})`
        : pc.yellow("  No controller holds the lease: nothing compiles the feed or produces jobs."),
    );
  }
  line();
  const processes = stats.processes.data;
  line(`${pc.bold("Processes")} (${processes?.total ?? 0} live)`);
  sectionError(stats.processes.error);
  const roles = Object.entries(processes?.by_role ?? {}).sort((a, b) => a[0].localeCompare(b[0]));
  printTable(
    ["Instance", "Role", "Version", "Heartbeat", "Ready", "Stores"],
    roles.flatMap(([role, list]) =>
      list.map((process) => [
        process.instance === leader
          ? `${process.instance} ${pc.green("(leader)")}`
          : process.instance,
        role,
        process.version,
        `${formatAge(process.heartbeat_age_ms)} ago`,
        readyOf(process),
        storesOf(process),
      ])
    ),
    "No process is running.",
  );
  line();
  line(pc.bold("Routing feed"));
  sectionError(stats.feed.error);
  const feed = stats.feed.data;
  if (feed) {
    const head = feed.head;
    line(
      `  ${
        head
          ? `Head ${head.digest.slice(0, 12)}, compiled ${head.compiled_at}. `
          : "No feed head in Redis yet. "
      }${
        feed.behind === 0
          ? pc.green("Every gateway has applied it.")
          : pc.yellow(`${feed.behind} behind.`)
      }`,
    );
    printTable(
      ["Gateway", "Feed", "Applied", "Applied ago", "Heartbeat"],
      feed.gateways.map((gateway) => [
        gateway.instance,
        gateway.current ? pc.green("current") : pc.yellow("behind"),
        gateway.applied_digest?.slice(0, 12) ?? "none yet",
        formatAge(gateway.apply_age_ms),
        `${formatAge(gateway.heartbeat_age_ms)} ago`,
      ]),
      "No gateway is running.",
    );
  }
  line();
  line(pc.bold("Work streams"));
  sectionError(stats.work_streams.error);
  printTable(
    ["Stream", "Backlog", "Being handled", "Length", "Consumers", "Oldest entry"],
    Object.entries(stats.work_streams.data ?? {}).map(([name, stream]) => [
      stream.groupMissing ? `${name} ${pc.dim("(not used yet)")}` : name,
      stream.backlog,
      stream.pending,
      stream.length,
      stream.consumers,
      stream.oldestAgeMs === null ? null : formatAge(stream.oldestAgeMs),
    ]),
  );
}
