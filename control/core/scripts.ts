/**
 * Lua scripts, as BullMQ keeps them: each its own file in shared/lua with a header naming its
 * KEYS, ARGV and reply, read by the shared loader (shared/lua/loader.ts), so the key count a call
 * passes can never drift from the script. Calls go through EVALSHA with a fallback to EVAL (ioredis's defineCommand),
 * so a Redis that restarted empty is served without a manual step.
 */
import { readdirSync, readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import { parseScript, type ScriptSource } from "../../shared/lua/loader.ts";

const LUA_DIR = new URL("../../shared/lua/", import.meta.url);

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
  | "feed_publish"
  | "metrics_take"
  | "metrics_restore"
  | "traffic_set_block"
  | "pool_add"
  | "pool_checked"
  | "pool_evidence"
  | "pool_maintain"
  | "pool_purge"
  | "pool_lead_take"
  | "pool_lead_renew"
  | "pool_fetch_reserve"
  | "pool_fetch_settle"
  | "pool_fetch_stats"
  | "extract"
  | "extract_release"
  | "extract_renew"
  | "batch_append"
  | "observation_hand_outs"
  | "scale_hold";

const defined = new WeakSet<Redis>();

function define(redis: Redis): void {
  if (defined.has(redis)) return;
  for (const script of scriptSources().values()) {
    // Without numberOfKeys ioredis takes the key count as the call's first argument.
    redis.defineCommand(
      script.name,
      script.numberOfKeys === undefined
        ? { lua: script.lua }
        : { numberOfKeys: script.numberOfKeys, lua: script.lua },
    );
  }
  defined.add(redis);
}

type ScriptArg = string | number | Buffer;

/** The call's arguments as ioredis's defined command takes them (a key count first if open). */
function callArgs(
  name: ScriptName,
  keys: readonly string[],
  args: readonly ScriptArg[],
): ScriptArg[] {
  const source = scriptSources().get(name);
  if (!source) throw new Error(`No Lua script named ${name}`);
  if (source.numberOfKeys === undefined) {
    if (keys.length < source.minKeys) {
      throw new Error(`${name} takes at least ${source.minKeys} keys, was given ${keys.length}`);
    }
    return [keys.length, ...keys, ...args];
  }
  if (keys.length !== source.numberOfKeys) {
    throw new Error(`${name} takes ${source.numberOfKeys} keys, was given ${keys.length}`);
  }
  return [...keys, ...args];
}

/** Runs a script by name with its keys and arguments (Buffers pass as binary-safe bytes). */
export async function runScript(
  redis: Redis,
  name: ScriptName,
  keys: readonly string[],
  args: readonly ScriptArg[],
): Promise<unknown> {
  define(redis);
  const command = (redis as unknown as Record<string, (...a: ScriptArg[]) => Promise<unknown>>)[
    name
  ];
  return await command.call(redis, ...callArgs(name, keys, args));
}

/** One call of a script: its keys and arguments. */
export interface ScriptCall {
  keys: readonly string[];
  args: readonly ScriptArg[];
}

/**
 * Runs one script once per call, the calls in one pipeline (one round trip). Answers the
 * replies in order; the first call Redis refused is thrown.
 */
export async function runScripts(
  redis: Redis,
  name: ScriptName,
  calls: readonly ScriptCall[],
): Promise<unknown[]> {
  if (calls.length === 0) return [];
  define(redis);
  const pipeline = redis.pipeline();
  const queue = pipeline as unknown as Record<string, (...a: ScriptArg[]) => unknown>;
  for (const call of calls) queue[name].call(pipeline, ...callArgs(name, call.keys, call.args));
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([error, reply]) => {
    if (error) throw error;
    return reply;
  });
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

function counts(name: string, reply: unknown, size: number): number[] {
  if (!Array.isArray(reply) || reply.length !== size) {
    throw new Error(`Unexpected ${name} reply ${JSON.stringify(reply)}`);
  }
  return reply.map(Number);
}

export interface MetricsTakeResult {
  staged: number;
  skipped: number;
  unlisted: number;
}

export function metricsTakeResult(reply: unknown): MetricsTakeResult {
  const [staged, skipped, unlisted] = counts("metrics_take", reply, 3);
  return { staged, skipped, unlisted };
}

export interface MetricsRestoreResult {
  restored: number;
  unknown: number;
  refused: number;
}

export function metricsRestoreResult(reply: unknown): MetricsRestoreResult {
  const [restored, unknown, refused] = counts("metrics_restore", reply, 3);
  return { restored, unknown, refused };
}

export interface TrafficSetBlockResult {
  /** The blocks hash changed, and a runtime entry was appended. */
  changed: boolean;
  /** The pending mark the decision read was deleted. */
  cleared: boolean;
}

export function trafficSetBlockResult(reply: unknown): TrafficSetBlockResult {
  const [changed, cleared] = counts("traffic_set_block", reply, 2);
  return { changed: changed === 1, cleared: cleared === 1 };
}
