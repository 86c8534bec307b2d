/**
 * The install's attribution settings: the one geo_settings row (seeded by the migration). A
 * read never fails for a missing row (a restore may have dropped it): the defaults answer, and
 * the first update writes the row again.
 */
import { eq, sql } from "drizzle-orm";
import { geoSettings } from "../../db/schema.ts";
import {
  type ConflictRule,
  DEFAULT_POLICY,
  type LocationSource,
  policyOf,
} from "../../shared/geo/attribute.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import { askReattribution, geoChange } from "./announce.ts";

export interface GeoSettings {
  locationSources: LocationSource[];
  locationConflictRule: ConflictRule;
  observationRetentionDays: number;
  /** null: exit IPs are kept forever. */
  exitIpRetentionDays: number | null;
  updatedAt: Date | null;
}

export type GeoSettingsPatch = Partial<Omit<GeoSettings, "updatedAt">>;

const DEFAULTS: GeoSettings = {
  locationSources: [...DEFAULT_POLICY.sources],
  locationConflictRule: DEFAULT_POLICY.conflictRule,
  observationRetentionDays: 30,
  exitIpRetentionDays: null,
  updatedAt: null,
};

type Row = typeof geoSettings.$inferSelect;

/** The row as settings; a name this build does not know is dropped, never served. */
function settingsOf(row: Row | undefined): GeoSettings {
  if (row === undefined) return { ...DEFAULTS, locationSources: [...DEFAULTS.locationSources] };
  const policy = policyOf(DEFAULT_POLICY, row.locationSources, row.locationConflictRule);
  return {
    locationSources: [...policy.sources],
    locationConflictRule: policy.conflictRule,
    observationRetentionDays: row.observationRetentionDays,
    exitIpRetentionDays: row.exitIpRetentionDays,
    updatedAt: row.updatedAt,
  };
}

export async function readGeoSettings(deps: Pick<ServiceDeps, "database">): Promise<GeoSettings> {
  const rows = await read(deps, (db) => db.select().from(geoSettings).where(eq(geoSettings.id, 1)));
  return settingsOf(rows[0]);
}

const sameList = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((value, i) => value === b[i]);

/**
 * Applies an admin's change (already validated by its schema). Announced when a value moved;
 * asks `reattribute all` when the sources or the conflict rule did, since they decide every
 * proxy's country.
 */
export async function updateGeoSettings(
  deps: ServiceDeps,
  patch: GeoSettingsPatch,
): Promise<GeoSettings> {
  let judged = false;
  let moved = false;
  const result = await write(deps, async (tx) => {
    const [held] = await tx.select().from(geoSettings).where(eq(geoSettings.id, 1)).for("update");
    const before = settingsOf(held);
    // Fields left out (undefined) keep their values.
    const given = Object.fromEntries(
      Object.entries(patch).filter(([, value]) => value !== undefined),
    ) as GeoSettingsPatch;
    const next: GeoSettings = { ...before, ...given };
    judged = !sameList(before.locationSources, next.locationSources) ||
      before.locationConflictRule !== next.locationConflictRule;
    moved = judged || before.observationRetentionDays !== next.observationRetentionDays ||
      before.exitIpRetentionDays !== next.exitIpRetentionDays;
    if (!moved && held !== undefined) return { result: before, change: null };
    const values = {
      locationSources: next.locationSources,
      locationConflictRule: next.locationConflictRule,
      observationRetentionDays: next.observationRetentionDays,
      exitIpRetentionDays: next.exitIpRetentionDays,
      updatedAt: sql`now()`,
    };
    const [row] = await tx.insert(geoSettings).values({ id: 1, ...values })
      .onConflictDoUpdate({ target: geoSettings.id, set: values })
      .returning();
    return { result: settingsOf(row), change: geoChange("settings") };
  });
  if (judged) await askReattribution(deps);
  return result;
}
