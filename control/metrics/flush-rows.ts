/**
 * What one metrics flush writes, gathered from its staged windows into one set of columns per
 * history table (the shape of a multi-row insert through unnest: one array a column). A window
 * whose key this release cannot read, or whose ids are no uuids, is counted and dropped: one
 * foreign key in Redis must never fail every flush after it.
 */
import { TRANSFER_FIELDS } from "../../shared/metric-windows.ts";
import {
  ConnectorWindows,
  FailureWindows,
  fieldNames,
  HostWindows,
  ProjectWindows,
  ProxyWindows,
} from "../../shared/metric-windows.ts";
import { isUuid } from "../core/store.ts";
import type { StagedWindow } from "./staging.ts";

/** The transfer counts of one table's rows, a column each, in TRANSFER_FIELDS order. */
export interface TransferColumns {
  requests: number[];
  successes: number[];
  failures: number[];
  bytesSent: number[];
  bytesReceived: number[];
  latencySumMs: number[];
}

const TRANSFER_NAMES = fieldNames(TRANSFER_FIELDS);

function transferColumns(): TransferColumns {
  return {
    requests: [],
    successes: [],
    failures: [],
    bytesSent: [],
    bytesReceived: [],
    latencySumMs: [],
  };
}

function pushTransfer(columns: TransferColumns, values: readonly number[]): void {
  const at = (name: (typeof TRANSFER_NAMES)[number]) => values[TRANSFER_NAMES.indexOf(name)] ?? 0;
  columns.requests.push(at("requests"));
  columns.successes.push(at("successes"));
  columns.failures.push(at("failures"));
  columns.bytesSent.push(at("bytes_sent"));
  columns.bytesReceived.push(at("bytes_received"));
  columns.latencySumMs.push(at("latency_sum_ms"));
}

export interface EntityRows extends TransferColumns {
  ids: string[];
}

export interface HostRows extends TransferColumns {
  projectIds: string[];
  connectorIds: string[];
  hosts: string[];
}

export interface FailureRows {
  projectIds: string[];
  /** Null: a refusal before a connector was chosen. */
  connectorIds: (string | null)[];
  kinds: string[];
  vendorStatuses: (number | null)[];
  counts: number[];
}

export class FlushRows {
  readonly proxies: EntityRows = { ids: [], ...transferColumns() };
  readonly projects: EntityRows = { ids: [], ...transferColumns() };
  readonly connectors: EntityRows = { ids: [], ...transferColumns() };
  readonly hosts: HostRows = { projectIds: [], connectorIds: [], hosts: [], ...transferColumns() };
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
      this.hosts.hosts.length + this.failures.kinds.length;
  }

  add(window: StagedWindow): void {
    const { kind, keyText, values } = window;
    switch (kind.name) {
      case ProxyWindows.name:
        return this.#entity(this.proxies, ProxyWindows.parseKey(keyText), values);
      case ProjectWindows.name:
        return this.#entity(this.projects, ProjectWindows.parseKey(keyText), values);
      case ConnectorWindows.name:
        return this.#entity(this.connectors, ConnectorWindows.parseKey(keyText), values);
      case HostWindows.name: {
        const key = HostWindows.parseKey(keyText);
        if (!key || !isUuid(key.projectId) || !isUuid(key.connectorId)) {
          this.unreadable += 1;
          return;
        }
        this.hosts.projectIds.push(key.projectId);
        this.hosts.connectorIds.push(key.connectorId);
        this.hosts.hosts.push(key.host);
        pushTransfer(this.hosts, values);
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

  #entity(rows: EntityRows, id: string | undefined, values: readonly number[]): void {
    if (id === undefined || !isUuid(id)) {
      this.unreadable += 1;
      return;
    }
    rows.ids.push(id.toLowerCase());
    pushTransfer(rows, values);
  }
}
