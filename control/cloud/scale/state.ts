/**
 * A cloud connector's autoscaler hash (`autoscaler:<connector>`): rotation times, the last demand
 * level, when demand was first watched, each draining instance's baseline and quiet checks, the
 * last scaling action, the last successful listing, and what the last run decided (its target
 * and what held it), for the pages. It is last-writer-wins: each run reads it, changes its copy,
 * and writes it back whole. Losing it is safe: rotation times are drawn again, drains take a
 * new baseline, the next run lists, and nothing is scaled in until demand has been watched for
 * a whole window.
 */
import type { Redis } from "ioredis";
import type { RedisKeys } from "../../../shared/redis-keys.ts";
import { DEMAND_LEVELS, DemandLevel } from "./demand.ts";
import { ScaleHold } from "../../model/cloud.ts";

/** A draining instance's last reading of its counters, and how many checks in a row it held. */
export interface DrainWatch {
  reading: string;
  quietChecks: number;
}

export { ScaleHold };

export interface AutoscalerState {
  listedAtMs: number | undefined;
  level: DemandLevel;
  watchedSinceMs: number | undefined;
  scaledAtMs: number | undefined;
  /** Rotation time per proxy id (epoch ms). */
  rotateAtMs: Map<string, number>;
  drains: Map<string, DrainWatch>;
  /** What the last run decided, for the pages. */
  target: number | undefined;
  hold: ScaleHold | undefined;
  demandPerMinute: number | undefined;
  ranAtMs: number | undefined;
}

const num = (text: string | undefined) => {
  const value = text === undefined ? NaN : Number(text);
  return Number.isFinite(value) ? value : undefined;
};

export function parseState(hash: Readonly<Record<string, string>>): AutoscalerState {
  const state: AutoscalerState = {
    listedAtMs: num(hash.listed_at),
    level: (DEMAND_LEVELS as readonly string[]).includes(hash.level)
      ? hash.level as DemandLevel
      : DemandLevel.low,
    watchedSinceMs: num(hash.watched_since),
    scaledAtMs: num(hash.scaled_at),
    rotateAtMs: new Map(),
    drains: new Map(),
    target: num(hash.target),
    hold: hash.hold === undefined || hash.hold === "" ? undefined : hash.hold as ScaleHold,
    demandPerMinute: num(hash.demand),
    ranAtMs: num(hash.ran_at),
  };
  for (const [field, value] of Object.entries(hash)) {
    if (field.startsWith("rotate:")) {
      const at = num(value);
      if (at !== undefined) state.rotateAtMs.set(field.slice("rotate:".length), at);
    } else if (field.startsWith("drain:")) {
      const cut = value.lastIndexOf("|");
      const quiet = num(value.slice(cut + 1));
      if (cut > 0 && quiet !== undefined) {
        state.drains.set(field.slice("drain:".length), {
          reading: value.slice(0, cut),
          quietChecks: quiet,
        });
      }
    }
  }
  return state;
}

function fields(state: AutoscalerState): Record<string, string> {
  const out: Record<string, string> = { level: state.level };
  const put = (name: string, value: number | string | undefined) => {
    if (value !== undefined) out[name] = String(value);
  };
  put("listed_at", state.listedAtMs);
  put("watched_since", state.watchedSinceMs);
  put("scaled_at", state.scaledAtMs);
  put("target", state.target);
  put("hold", state.hold);
  put("demand", state.demandPerMinute);
  put("ran_at", state.ranAtMs);
  for (const [id, at] of state.rotateAtMs) out[`rotate:${id}`] = String(at);
  for (const [id, watch] of state.drains) {
    out[`drain:${id}`] = `${watch.reading}|${watch.quietChecks}`;
  }
  return out;
}

export async function readState(
  redis: Redis,
  keys: RedisKeys,
  connectorId: string,
): Promise<AutoscalerState> {
  return parseState(await redis.hgetall(keys.autoscaler(connectorId)));
}

/** Writes the state back whole (last writer wins), in one transaction. */
export async function writeState(
  redis: Redis,
  keys: RedisKeys,
  connectorId: string,
  state: AutoscalerState,
): Promise<void> {
  const key = keys.autoscaler(connectorId);
  const replies = await redis.multi().del(key).hset(key, fields(state)).exec();
  for (const [error] of replies ?? []) if (error) throw error;
}
