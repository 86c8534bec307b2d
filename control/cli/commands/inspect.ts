/**
 * `inspect`: a project's intercepted requests (GET …/mitm/requests), a line each, oldest first
 * so the newest is last, as `tail` prints: when, method, status (and the gateway's own answer's
 * Proxy-Status), host and path, time, exit. `--follow` then reads every 2 s and prints the new
 * ones, reading back page by page to the last one printed, so a burst between two reads is not
 * skipped, until Ctrl-C (exit 0). A read the API answers 503 (Redis away) or that does not reach
 * it is said once on stderr and tried again. `--json`: one object a line, as the API answers it.
 */
import { type Command, InvalidArgumentError } from "commander";
import type { MitmCaptureItem, MitmCapturesPage } from "../../api/answers/mitm-captures.ts";
import { isNewerStreamId } from "../../model/mitm-captures.ts";
import type { Client } from "../client.ts";
import { connect, type JsonOption, leaf } from "../command.ts";
import { ApiError, UnreachableError } from "../errors.ts";
import { line, note, pc } from "../output.ts";
import { resolveProject } from "../resolve.ts";

/** How often `--follow` reads. */
export const FOLLOW_MS = 2_000;
/** The most one read asks for, and the most a project keeps (STREAM_CAPS.mitmRequests). */
const MAX_COUNT = 1_000;
/** What a follow's read asks for a page. */
const FOLLOW_PAGE = 100;

function countOf(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || value > MAX_COUNT) {
    throw new InvalidArgumentError(`must be a whole number from 0 to ${MAX_COUNT}`);
  }
  return value;
}

function statusText(item: MitmCaptureItem): string {
  const code = item.status === 0 ? "---" : String(item.status);
  const painted = item.status >= 500
    ? pc.red(code)
    : item.status >= 400
    ? pc.yellow(code)
    : item.status >= 300
    ? pc.cyan(code)
    : item.status >= 200
    ? pc.green(code)
    : code;
  return item.proxy_status ? `${painted} ${pc.dim(item.proxy_status)}` : painted;
}

function exitText(item: MitmCaptureItem): string {
  const parts = [
    item.connector_name ?? item.connector_id,
    item.proxy_address ?? item.proxy_id,
  ].filter((part): part is string => part !== null);
  return parts.length === 0 ? "–" : parts.join(" · ");
}

/** One capture as a line: when, method, status, host and path, time, exit. */
export function captureLine(item: MitmCaptureItem): string {
  return [
    pc.dim(item.at),
    item.method.padEnd(7),
    statusText(item),
    `${item.host}${item.path}`,
    `${item.total_ms} ms`,
    exitText(item),
  ].join("  ");
}

/**
 * The captures newer than `newest` (every one when undefined), newest first: pages are read
 * back until one that is not newer, the end, or as many as a project keeps.
 */
async function newerThan(
  client: Client,
  path: string,
  newest: string | undefined,
  signal: AbortSignal,
): Promise<MitmCaptureItem[]> {
  const fresh: MitmCaptureItem[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page: MitmCapturesPage = await client.request<MitmCapturesPage>("GET", path, {
      query: { count: FOLLOW_PAGE, cursor },
      signal,
    });
    for (const item of page.items) {
      if (newest !== undefined && !isNewerStreamId(item.id, newest)) return fresh;
      fresh.push(item);
    }
    cursor = page.next_cursor;
    if (cursor === null || fresh.length >= MAX_COUNT) return fresh;
  }
}

/** Waits `ms`, or less when the signal ends it. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/** Whether a failed read is worth trying again: the API's stores or the API itself away. */
function passing(error: unknown): boolean {
  return (error instanceof ApiError && error.status === 503) || error instanceof UnreachableError;
}

export function registerInspect(program: Command): void {
  leaf(
    program,
    "inspect <project>",
    "Show a project's intercepted requests (the Inspector), oldest first; --follow for new ones",
    [
      "octoprox inspect shop",
      "octoprox inspect shop --follow",
      "octoprox inspect shop --count 0 --follow --json | jq -c 'select(.status >= 400)'",
    ],
  )
    .option(
      "-n, --count <n>",
      `the latest captures to print first (0 to ${MAX_COUNT})`,
      countOf,
      50,
    )
    .option("-f, --follow", "keep printing new captures until interrupted (Ctrl-C)")
    .addHelpText(
      "after",
      "A line: when (UTC), method, status (and the gateway's own answer), host and path, " +
        "milliseconds to the answer's end, exit (connector · proxy); with --json, each capture " +
        "as the API answers it, one JSON object a line.\n" +
        "Only projects with TLS interception on are captured (docs/tls-interception.md).\n",
    )
    .action(async (
      projectRef: string,
      options: JsonOption & { count: number; follow?: boolean },
    ) => {
      const client = await connect();
      const project = await resolveProject(client, projectRef);
      const path = `/projects/${project.id}/mitm/requests`;
      const print = (item: MitmCaptureItem) =>
        options.json ? line(JSON.stringify(item)) : line(captureLine(item));

      // The latest `count` (at least one read, to know where a follow starts).
      const first = await client.request<MitmCapturesPage>("GET", path, {
        query: { count: Math.max(1, options.count) },
      });
      const latest = first.items.slice(0, options.count);
      for (const item of [...latest].reverse()) print(item);
      if (!options.follow) {
        if (latest.length === 0 && !options.json) line(pc.dim("Nothing captured."));
        return;
      }

      const stop = new AbortController();
      const interrupted = () => stop.abort();
      process.once("SIGINT", interrupted);
      process.once("SIGTERM", interrupted);
      let newest = first.items[0]?.id;
      let failing = false;
      if (!options.json) note(pc.dim(`Following ${project.name}; Ctrl-C to stop.`));
      try {
        while (!stop.signal.aborted) {
          await pause(FOLLOW_MS, stop.signal);
          if (stop.signal.aborted) break;
          let fresh: MitmCaptureItem[];
          try {
            fresh = await newerThan(client, path, newest, stop.signal);
          } catch (error) {
            if (stop.signal.aborted) break;
            if (!passing(error)) throw error;
            if (!failing) note(`${(error as Error).message.split("\n")[0]}; trying again`);
            failing = true;
            continue;
          }
          if (failing) note("Reading again");
          failing = false;
          for (const item of [...fresh].reverse()) print(item);
          newest = fresh[0]?.id ?? newest;
        }
      } finally {
        process.off("SIGINT", interrupted);
        process.off("SIGTERM", interrupted);
      }
    });
}
