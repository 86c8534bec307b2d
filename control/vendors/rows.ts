/**
 * A vendor connector's pool as its configuration and the vendor say it should be, and the writes
 * that take the stored rows there. Pure: the sync and provision jobs read, call this, and write.
 *
 * Rows are matched by their slot (`metadata.slot`): a session pool's slot keeps its vendor
 * session id across syncs, so an unchanged configuration rewrites nothing. Groups: a session
 * pool that declares countries has one group of `slots` rows per country; one that declares none
 * ("All countries") has a generic group, plus the country groups provisioned on demand, which
 * stay once made.
 */
import type { DescriptorProvider, ProviderRow } from "../../shared/vendors/provider.ts";
import type { ProxyScheme } from "../../shared/roles.ts";

type Config = Readonly<Record<string, unknown>>;

export interface StoredRow {
  id: string;
  scheme: string;
  host: string;
  port: number;
  username: string | null;
  password: string | null;
  country: string | null;
  metadata: Config;
}

export interface RowEdit {
  id: string;
  /** Only the columns that changed. */
  set: Partial<Pick<StoredRow, "scheme" | "host" | "port" | "username" | "password" | "country">>;
  /** Only the metadata keys that changed (merged into the stored metadata). */
  metadata: Record<string, unknown>;
}

export interface PoolPlan {
  edits: RowEdit[];
  deletions: string[];
  additions: ProviderRow[];
}

const slotOf = (row: StoredRow) => typeof row.metadata.slot === "string" ? row.metadata.slot : "";

/** The session groups a session pool has: its declared countries, else generic plus on-demand. */
export function sessionGroups(
  declared: readonly string[],
  stored: readonly StoredRow[],
  extra: readonly string[] = [],
): (string | null)[] {
  if (declared.length > 0) return [...declared];
  const groups = new Set<string>();
  for (const row of stored) {
    const group = row.metadata.group;
    if (typeof group === "string" && /^[A-Z]{2}$/.test(group)) groups.add(group);
  }
  for (const code of extra) groups.add(code);
  return [null, ...[...groups].sort()];
}

/**
 * The rows the pool should hold. `items` are the vendor's list (list mode, or a port pool whose
 * exits a call lists); `extraGroups` are country groups a provision run adds.
 */
export function desiredRows(
  provider: DescriptorProvider,
  declared: readonly string[],
  stored: readonly StoredRow[],
  items: readonly Config[] | undefined,
  extraGroups: readonly string[] = [],
): ProviderRow[] {
  if (provider.dynamic) return [provider.gatewayRow()];
  const type = provider.type;
  if (type.call !== undefined) {
    const rows: ProviderRow[] = [];
    const seen = new Set<string>();
    (items ?? []).forEach((item, index) => {
      const row = provider.itemRow(item, index);
      // The first of two entries for one address wins; an entry with no usable address is skipped.
      if (row === undefined || seen.has(row.slot)) return;
      if (declared.length > 0 && (row.country === null || !declared.includes(row.country))) return;
      seen.add(row.slot);
      rows.push(row);
    });
    return rows;
  }
  if (type.mode === "port") {
    return Array.from({ length: provider.slots }, (_, i) => provider.portSlotRow(i));
  }
  // A session pool: each slot keeps the session id it was given.
  const sessions = new Map<string, string>();
  for (const row of stored) {
    const id = row.metadata.session_id;
    if (typeof id === "string") sessions.set(slotOf(row), id);
  }
  const rows: ProviderRow[] = [];
  for (const group of sessionGroups(declared, stored, extraGroups)) {
    for (let index = 0; index < provider.slots; index++) {
      const slot = group === null ? `session:${index}` : `group:${group}:${index}`;
      rows.push(provider.sessionSlotRow(index, group, sessions.get(slot)));
    }
  }
  return rows;
}

/** The writes from the stored rows to the desired ones: edits, deletions, additions. */
export function planPool(desired: readonly ProviderRow[], stored: readonly StoredRow[]): PoolPlan {
  const bySlot = new Map<string, StoredRow>();
  const deletions: string[] = [];
  for (const row of stored) {
    const slot = slotOf(row);
    // Rows no slot names (or a second row for one slot) are not the pool's: they leave.
    if (slot === "" || bySlot.has(slot)) deletions.push(row.id);
    else bySlot.set(slot, row);
  }
  const edits: RowEdit[] = [];
  const additions: ProviderRow[] = [];
  const kept = new Set<string>();
  for (const row of desired) {
    const current = bySlot.get(row.slot);
    if (current === undefined) {
      additions.push(row);
      continue;
    }
    kept.add(row.slot);
    const set: RowEdit["set"] = {};
    if (current.scheme !== row.scheme) set.scheme = row.scheme as ProxyScheme;
    if (current.host !== row.host) set.host = row.host;
    if (current.port !== row.port) set.port = row.port;
    if (current.username !== row.username) set.username = row.username;
    if (current.password !== row.password) set.password = row.password;
    if (current.country !== row.country) set.country = row.country;
    const metadata: Record<string, unknown> = {};
    for (const [key, value] of Object.entries({ ...row.metadata, slot: row.slot })) {
      if (JSON.stringify(current.metadata[key]) !== JSON.stringify(value)) metadata[key] = value;
    }
    if (Object.keys(set).length > 0 || Object.keys(metadata).length > 0) {
      edits.push({ id: current.id, set, metadata });
    }
  }
  for (const [slot, row] of bySlot) if (!kept.has(slot)) deletions.push(row.id);
  return { edits, deletions, additions };
}
