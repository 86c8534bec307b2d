/**
 * A cloud connector's creating hash (`scale:creating:<connector>`): one entry per instance a
 * run is creating, `<creation name>` → `{"purpose", "at"}`, purpose `scale` or
 * `rotate:<proxy id>`. A creator writes its entry before the create (with the HOLD script,
 * shared/lua/scale_hold.lua) and saves its row before it clears the entry, so a listing read
 * before the hash never shows an instance that is neither in the hash nor in the rows unless its
 * creator died. Entries older than ENTRY_FRESH_MS are stale: a later listing settles them.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import { runScript } from "../../core/scripts.ts";

/** An entry is fresh this long: past it, its creator is taken for dead. */
export const ENTRY_FRESH_MS = 600_000;

export const SCALE_PURPOSE = "scale";
export const ROTATE_PREFIX = "rotate:";
export const rotatePurpose = (proxyId: string) => `${ROTATE_PREFIX}${proxyId}`;

export interface CreatingEntry {
  name: string;
  purpose: string;
  atMs: number;
}

export function isFresh(entry: CreatingEntry, nowMs: number): boolean {
  return nowMs - entry.atMs < ENTRY_FRESH_MS;
}

export async function readEntries(
  redis: Redis,
  keys: RedisKeys,
  connectorId: string,
): Promise<CreatingEntry[]> {
  const hash = await redis.hgetall(keys.scaleCreating(connectorId));
  const entries: CreatingEntry[] = [];
  for (const [name, value] of Object.entries(hash)) {
    let parsed: { purpose?: unknown; at?: unknown };
    try {
      parsed = JSON.parse(value);
    } catch {
      // Unreadable: taken as a stale scale entry, so a listing settles it.
      parsed = {};
    }
    entries.push({
      name,
      purpose: typeof parsed.purpose === "string" ? parsed.purpose : SCALE_PURPOSE,
      atMs: typeof parsed.at === "number" ? parsed.at : 0,
    });
  }
  return entries;
}

export async function hasEntries(
  redis: Redis,
  keys: RedisKeys,
  connectorId: string,
): Promise<boolean> {
  return (await redis.hlen(keys.scaleCreating(connectorId))) > 0;
}

/**
 * Writes entries under `names` for `purpose` (the HOLD script): false when the hash holds a
 * fresh entry of the same purpose under another name, and nothing was written.
 */
export async function holdEntries(
  redis: Redis,
  keys: RedisKeys,
  connectorId: string,
  purpose: string,
  names: readonly string[],
  nowMs: number,
): Promise<boolean> {
  const reply = await runScript(
    redis,
    "scale_hold",
    [keys.scaleCreating(connectorId)],
    [nowMs, ENTRY_FRESH_MS, purpose, ...names],
  );
  return Number(reply) === 1;
}

export async function entryExists(
  redis: Redis,
  keys: RedisKeys,
  connectorId: string,
  name: string,
): Promise<boolean> {
  return (await redis.hexists(keys.scaleCreating(connectorId), name)) === 1;
}

export async function clearEntries(
  redis: Redis,
  keys: RedisKeys,
  connectorId: string,
  names: readonly string[],
): Promise<void> {
  if (names.length > 0) await redis.hdel(keys.scaleCreating(connectorId), ...names);
}
