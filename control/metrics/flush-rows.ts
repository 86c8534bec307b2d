/**
 * What one metrics flush writes, gathered from its staged windows into one set of columns per
 * history table (the shape of a multi-row insert through unnest: one array a column). Each
 * table's counts are its window kind's fields (shared/metric-windows.ts), a column each in the
 * kind's declaration order, so a kind with fields of its own (a tunnel device's) brings them
 * along. A window whose key this release cannot read, or whose ids are no uuids, is counted and
 * dropped: one foreign key in Redis must never fail every flush after it.
 */
import {
  ConnectorWindows,
  DeviceWindows,
  type EntityWindows,
  FailureWindows,
  fieldNames,
  type FieldTypes,
  HostWindows,
  ProjectWindows,
  ProxyWindows,
} from "../../shared/metric-windows.ts";
import { isUuid } from "../core/store.ts";
import type { StagedWindow } from "./staging.ts";

/** One array per field of a kind, in its declaration order: `counts[field][row]`. */
export type CountColumns = number[][];

function countColumns(fields: FieldTypes): CountColumns {
  return fieldNames(fields).map(() => []);
}

/** A window's values (in its kind's field order) appended to the columns, a field each. */
function pushCounts(columns: CountColumns, values: readonly number[]): void {
  columns.forEach((column, field) => column.push(values[field] ?? 0));
}

export interface EntityRows {
  /** The window kind the rows are of: their fields are its own. */
  kind: EntityWindows<string, FieldTypes>;
  ids: string[];
  counts: CountColumns;
}

export interface HostRows {
  projectIds: string[];
  connectorIds: string[];
  hosts: string[];
  /** HostWindows' fields: the transfer counts. */
  counts: CountColumns;
}

export interface FailureRows {
  projectIds: string[];
  /** Null: a refusal before a connector was chosen. */
  connectorIds: (string | null)[];
  kinds: string[];
  vendorStatuses: (number | null)[];
  counts: number[];
}

function entityRows(kind: EntityWindows<string, FieldTypes>): EntityRows {
  return { kind, ids: [], counts: countColumns(kind.fields) };
}

export class FlushRows {
  readonly proxies = entityRows(ProxyWindows);
  readonly projects = entityRows(ProjectWindows);
  readonly connectors = entityRows(ConnectorWindows);
  readonly devices = entityRows(DeviceWindows);
  readonly hosts: HostRows = {
    projectIds: [],
    connectorIds: [],
    hosts: [],
    counts: countColumns(HostWindows.fields),
  };
  readonly failures: FailureRows = {
    projectIds: [],
    connectorIds: [],
    kinds: [],
    vendorStatuses: [],
    counts: [],
  };
  /** Windows whose key could not be read: counted, dropped. */
  unreadable = 0;

  get windows(): number {
    return this.proxies.ids.length + this.projects.ids.length + this.connectors.ids.length +
      this.devices.ids.length + this.hosts.hosts.length + this.failures.kinds.length;
  }

  add(window: StagedWindow): void {
    const { kind, keyText, values } = window;
    switch (kind.name) {
      case ProxyWindows.name:
        return this.#entity(this.proxies, keyText, values);
      case ProjectWindows.name:
        return this.#entity(this.projects, keyText, values);
      case ConnectorWindows.name:
        return this.#entity(this.connectors, keyText, values);
      case DeviceWindows.name:
        return this.#entity(this.devices, keyText, values);
      case HostWindows.name: {
        const key = HostWindows.parseKey(keyText);
        if (!key || !isUuid(key.projectId) || !isUuid(key.connectorId)) {
          this.unreadable += 1;
          return;
        }
        this.hosts.projectIds.push(key.projectId);
        this.hosts.connectorIds.push(key.connectorId);
        this.hosts.hosts.push(key.host);
        pushCounts(this.hosts.counts, values);
        return;
      }
      case FailureWindows.name: {
        const key = FailureWindows.parseKey(keyText);
        if (
          !key || !isUuid(key.projectId) || (key.connectorId !== null && !isUuid(key.connectorId))
        ) {
          this.unreadable += 1;
          return;
        }
        this.failures.projectIds.push(key.projectId);
        this.failures.connectorIds.push(key.connectorId);
        this.failures.kinds.push(key.kind);
        this.failures.vendorStatuses.push(key.vendorStatus);
        this.failures.counts.push(values[0] ?? 0);
        return;
      }
    }
  }

  #entity(rows: EntityRows, keyText: string, values: readonly number[]): void {
    const id = rows.kind.parseKey(keyText);
    if (id === undefined || !isUuid(id)) {
      this.unreadable += 1;
      return;
    }
    rows.ids.push(id.toLowerCase());
    pushCounts(rows.counts, values);
  }
}
