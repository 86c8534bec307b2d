/**
 * A window of deltas cut into numbered parts, and one part sent as one call of
 * shared/lua/metering_apply.lua. A part's number is its batch identity: the script applies a
 * part only when its number is above the one Redis recorded for the writer, so a part sent again
 * after a lost reply is applied once.
 */
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import {
  DEMAND_FIELDS,
  DEMAND_TTL_SECONDS,
  FieldType,
  type FieldTypes,
  METERED_WINDOW_KINDS,
  WINDOW_SAFETY_TTL_SECONDS,
} from "../../shared/metric-windows.ts";
import { DELTA_KINDS, type DeltaKindName, type MeteringWindow } from "./deltas.ts";
import { type LuaScript, runScript, type ScriptClient } from "../../shared/lua/loader.ts";

export interface PartRow {
  readonly kind: DeltaKindName;
  /** The hash's full Redis key. */
  readonly key: string;
  /** Field deltas in the kind's declaration order. */
  readonly values: readonly number[];
}

/** A numbered piece of a cut window: sent alone, applied once. */
export interface MeteringPart {
  readonly number: number;
  readonly rows: readonly PartRow[];
  /** Traffic decisions the window asks for (its first part carries them all). */
  readonly asks: readonly string[];
}

/**
 * Cuts a window into parts of at most `maxRowsPerPart` hashes (one part, one round trip, for any
 * window under that), numbered in order. Rows with nothing to add are left out.
 */
export function cutParts(
  window: MeteringWindow,
  maxRowsPerPart: number,
  nextNumber: () => number,
): MeteringPart[] {
  const parts: MeteringPart[] = [];
  let rows: PartRow[] = [];
  // Asked with the first part: a part is applied once, so each ask goes once.
  const asks = () => (parts.length === 0 ? [...window.asks] : []);
  for (const kind of DELTA_KINDS) {
    for (const [key, values] of window.kinds[kind].entries()) {
      if (values.every((value) => value === 0)) continue;
      rows.push({ kind, key, values });
      if (rows.length >= maxRowsPerPart) {
        parts.push({ number: nextNumber(), rows, asks: asks() });
        rows = [];
      }
    }
  }
  if (rows.length > 0) parts.push({ number: nextNumber(), rows, asks: asks() });
  return parts;
}

export interface ApplyLives {
  appliedSeconds: number;
  windowSeconds: number;
  demandSeconds: number;
}

export const DEFAULT_LIVES: ApplyLives = {
  appliedSeconds: 86_400,
  windowSeconds: WINDOW_SAFETY_TTL_SECONDS,
  demandSeconds: DEMAND_TTL_SECONDS,
};

interface KindDeclaration {
  name: DeltaKindName;
  listed: boolean;
  fields: FieldTypes;
}

const DECLARATIONS: readonly KindDeclaration[] = [
  ...METERED_WINDOW_KINDS.map((kind) => ({ name: kind.name, listed: true, fields: kind.fields })),
  { name: "demand", listed: false, fields: DEMAND_FIELDS },
];

const KIND_NUMBER = new Map<DeltaKindName, number>(
  DECLARATIONS.map((declaration, index) => [declaration.name, index + 1]),
);

/** Integers as digits; floats as JavaScript prints them, which HINCRBYFLOAT reads. */
function formatValue(value: number): string {
  return value === 0 ? "0" : String(value);
}

/** The script's KEYS and ARGV for one part (see the script's header). */
export function encodePart(
  part: MeteringPart,
  keys: RedisKeys,
  appliedKey: string,
  lives: ApplyLives,
): { keys: string[]; args: string[] } {
  const scriptKeys = [appliedKey, keys.jobStream(JobKind.traffic)];
  const args = [
    String(part.number),
    String(lives.appliedSeconds),
    String(lives.windowSeconds),
    String(lives.demandSeconds),
    String(STREAM_CAPS.work),
    String(part.asks.length),
    ...part.asks,
    String(DECLARATIONS.length),
  ];
  for (const declaration of DECLARATIONS) {
    const names = Object.keys(declaration.fields);
    args.push(declaration.listed ? "w" : "d", String(names.length));
    for (const name of names) {
      args.push(name, declaration.fields[name] === FieldType.float ? "f" : "i");
    }
    if (declaration.listed) scriptKeys.push(keys.metricIndex(declaration.name));
  }
  for (const row of part.rows) {
    scriptKeys.push(row.key);
    args.push(String(KIND_NUMBER.get(row.kind)));
    for (const value of row.values) args.push(formatValue(value));
  }
  return { keys: scriptKeys, args };
}

export type ApplyOutcome = "applied" | "applied_before";

export interface ApplyResult {
  outcome: ApplyOutcome;
  /** Increments Redis refused (a key of another type, a field holding no number): lost. */
  refused: number;
}

/** Sends one part; resolves once Redis has it (now or from an earlier send). */
export async function applyPart(
  client: ScriptClient,
  script: LuaScript,
  keys: RedisKeys,
  appliedKey: string,
  part: MeteringPart,
  lives: ApplyLives = DEFAULT_LIVES,
): Promise<ApplyResult> {
  const encoded = encodePart(part, keys, appliedKey, lives);
  const reply = await runScript(client, script, encoded.keys, encoded.args);
  if (Array.isArray(reply) && reply.length === 2) {
    const [applied, refused] = reply.map(Number);
    if (applied === 1) return { outcome: "applied", refused };
    if (applied === 0) return { outcome: "applied_before", refused: 0 };
  }
  throw new Error(`Unexpected metering_apply reply ${JSON.stringify(reply)}`);
}
