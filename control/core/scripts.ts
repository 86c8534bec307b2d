/**
 * Lua scripts, as BullMQ keeps them: each its own file in shared/lua with a header naming its
 * KEYS, ARGV and reply. The header is read here, so the key count a call passes can never drift
 * from the script. Calls go through EVALSHA with a fallback to EVAL (ioredis's defineCommand),
 * so a Redis that restarted empty is served without a manual step.
 */
import { readdirSync, readFileSync } from "node:fs";
import type { Redis } from "ioredis";

const LUA_DIR = new URL("../../shared/lua/", import.meta.url);

export interface ScriptSource {
  name: string;
  numberOfKeys: number;
  lua: string;
}

/** Reads a script's header: its key count is the number of `-- KEYS[n]` lines. */
export function parseScript(name: string, lua: string): ScriptSource {
  const header = lua.split("\n").filter((line) => line.startsWith("--"));
  const keys = header.filter((line) => /^--\s*KEYS\[\d+\]/.test(line)).length;
  if (!header.some((line) => /^--\s*Reply:/.test(line))) {
    throw new Error(`Lua script ${name} has no "-- Reply:" line in its header`);
  }
  return { name, numberOfKeys: keys, lua };
}

let cache: Map<string, ScriptSource> | undefined;

export function scriptSources(): Map<string, ScriptSource> {
  if (cache) return cache;
  cache = new Map();
  for (const file of readdirSync(LUA_DIR).filter((f) => f.endsWith(".lua")).sort()) {
    const name = file.slice(0, -".lua".length);
    cache.set(name, parseScript(name, readFileSync(new URL(file, LUA_DIR), "utf8")));
  }
  return cache;
}

export type ScriptName =
  | "lease_take"
  | "lease_refresh"
  | "lease_release"
  | "feed_publish";

const defined = new WeakSet<Redis>();

function define(redis: Redis): void {
  if (defined.has(redis)) return;
  for (const script of scriptSources().values()) {
    redis.defineCommand(script.name, { numberOfKeys: script.numberOfKeys, lua: script.lua });
  }
  defined.add(redis);
}

/** Runs a script by name with its keys and arguments (Buffers pass as binary-safe bytes). */
export async function runScript(
  redis: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: readonly (string | number | Buffer)[],
): Promise<unknown> {
  define(redis);
  const source = scriptSources().get(name);
  if (!source) throw new Error(`No Lua script named ${name}`);
  if (keys.length !== source.numberOfKeys) {
    throw new Error(`${name} takes ${source.numberOfKeys} keys, was given ${keys.length}`);
  }
  const command =
    (redis as unknown as Record<string, (...a: (string | number | Buffer)[]) => Promise<unknown>>)[
      name
    ];
  return await command.call(redis, ...keys, ...args);
}

// ---------------------------------------------------------------------------------------------
// Replies mapped to meaning in one place.

export const LeaseRefreshReply = { extended: 1, gone: 0, otherHolder: -1 } as const;
export type LeaseRefreshOutcome = "extended" | "gone" | "other_holder";

export function leaseRefreshOutcome(reply: unknown): LeaseRefreshOutcome {
  switch (Number(reply)) {
    case LeaseRefreshReply.extended:
      return "extended";
    case LeaseRefreshReply.gone:
      return "gone";
    case LeaseRefreshReply.otherHolder:
      return "other_holder";
    default:
      throw new Error(`Unexpected lease_refresh reply ${String(reply)}`);
  }
}

export const FeedPublishReply = { appended: 1, written: 0, notLeader: -1, stale: -2 } as const;
/**
 * `appended`: written, and the head's digest changed so a stream entry woke the gateways;
 * `written`: written with the head's digest unchanged (a repair); `not_leader`: the lease names
 * another holder or none, nothing written; `stale`: the head moved since it was read.
 */
export type FeedPublishOutcome = "appended" | "written" | "not_leader" | "stale";

export function feedPublishOutcome(reply: unknown): FeedPublishOutcome {
  switch (Number(reply)) {
    case FeedPublishReply.appended:
      return "appended";
    case FeedPublishReply.written:
      return "written";
    case FeedPublishReply.notLeader:
      return "not_leader";
    case FeedPublishReply.stale:
      return "stale";
    default:
      throw new Error(`Unexpected feed_publish reply ${String(reply)}`);
  }
}
