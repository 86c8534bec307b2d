/**
 * The database sync's lines of the gateway's /metrics: the databases in force (one series each,
 * by name and format, valued its entries), whether the feed lists files not in force yet, and
 * the files fetched and refused.
 */
import { helpLine } from "../base/metric-help.ts";
import type { GeoSyncStats } from "./sync.ts";

/** A label value as Prometheus reads it: backslash, quote and newline escaped. */
function labelValue(text: string): string {
  return text.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

/** The families as Prometheus text, newline-terminated. */
export function geoMetrics(stats: GeoSyncStats): string {
  const lines: string[] = [];
  const family = (name: string, type: string) => {
    const help = helpLine(name);
    if (help !== undefined) lines.push(help);
    lines.push(`# TYPE ${name} ${type}`);
  };
  family("octoprox_gateway_geo_databases_loaded", "gauge");
  lines.push(`octoprox_gateway_geo_databases_loaded ${stats.loaded}`);
  if (stats.databases.length > 0) {
    family("octoprox_gateway_geo_database_entries", "gauge");
    for (const database of stats.databases) {
      lines.push(
        `octoprox_gateway_geo_database_entries{database="${labelValue(database.name)}",format="${
          labelValue(database.format)
        }"} ${database.entries}`,
      );
    }
  }
  family("octoprox_gateway_geo_pending", "gauge");
  lines.push(`octoprox_gateway_geo_pending ${stats.pending ? 1 : 0}`);
  family("octoprox_gateway_geo_files_total", "counter");
  lines.push(`octoprox_gateway_geo_files_total{result="fetched"} ${stats.fetched}`);
  lines.push(`octoprox_gateway_geo_files_total{result="refused"} ${stats.refused}`);
  return `${lines.join("\n")}\n`;
}
