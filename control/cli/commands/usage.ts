/** `usage` (a project's totals and a sparkline of its requests) and `failures` (the summary). */
import { type Command, Option } from "commander";
import type { FailureReport, ProjectMetrics, Series } from "../../api/answers/metrics.ts";
import type { Usage } from "../../api/answers/common.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import {
  type Cell,
  emit,
  formatBytes,
  formatCount,
  formatPercent,
  line,
  pc,
  printFields,
  printTable,
  sparkline,
} from "../output.ts";
import { resolveConnector, resolveProject } from "../resolve.ts";

const RANGES = ["1h", "6h", "24h", "7d", "30d", "90d"];

interface RangeOptions extends JsonOption {
  project: string;
  range: string;
}

/** `--range`: the history ranges the API reads, 24h by default. */
export function rangeOption(): Option {
  return new Option("--range <range>", "the window").choices(RANGES).default("24h");
}

export function registerUsage(program: Command): void {
  leaf(program, "usage", "Show a project's usage: all-time totals and its requests over a range", [
    "octoprox usage --project shop",
    "octoprox usage --project shop --range 7d",
    "octoprox usage --project shop --json | jq .totals.usage.requests",
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .addOption(rangeOption())
    .action(async (options: RangeOptions) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const [totals, history] = await Promise.all([
        client.request<ProjectMetrics>("GET", `/projects/${project.id}/metrics`),
        client.request<Series>("GET", `/projects/${project.id}/metrics/history`, {
          query: { range: options.range },
        }),
      ]);
      emit(outputOf(options), { project, totals, history }, () => {
        line(`${pc.bold(project.name)}: usage since the start`);
        printFields([
          ...usageFields(totals.usage),
          [
            "Proxies",
            `${formatCount(totals.pool.total)} (${
              Object.entries(totals.pool.by_status).filter(([, n]) => n > 0)
                .map(([status, n]) => `${n} ${status}`).join(
                  ", ",
                ) ||
              "none"
            }; ${formatCount(totals.pool.quarantined)} quarantined)`,
          ],
        ]);
        line();
        printHistory(history);
      });
    });

  leaf(program, "failures", "Show a project's failures by kind, connector and upstream status", [
    "octoprox failures --project shop",
    "octoprox failures --project shop --connector main --range 7d",
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .option("-c, --connector <connector>", "only this connector's (name or id)")
    .addOption(rangeOption())
    .action(async (options: RangeOptions & { connector?: string }) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const connectors = await client.request<{ id: string; name: string }[]>(
        "GET",
        `/projects/${project.id}/connectors`,
      );
      const connectorId = options.connector
        ? (await resolveConnector(client, project.id, options.connector)).id
        : undefined;
      const report = await client.request<FailureReport>(
        "GET",
        `/projects/${project.id}/failures`,
        {
          query: { range: options.range, connector_id: connectorId },
        },
      );
      emit(outputOf(options), report, () => {
        line(
          `${pc.bold(project.name)}: ${
            formatCount(report.total)
          } failures over ${report.range} (${report.from} to ${report.to})`,
        );
        if (report.total === 0) return;
        line();
        printTable(["Kind", "Count"], report.by_kind.map((row) => [row.kind, row.count]));
        line();
        const names = new Map(connectors.map((c) => [c.id, c.name]));
        printTable(
          ["Kind", "Connector", "Upstream status", "Count"],
          report.rows.map((row) => [
            row.kind,
            row.connector_id ? names.get(row.connector_id) ?? row.connector_id : null,
            row.vendor_status === null ? null : String(row.vendor_status),
            row.count,
          ]),
        );
      });
    });
}

/** A usage object as label and value lines (a project's, a device's). */
export function usageFields(usage: Usage): [string, Cell][] {
  return [
    ["Requests", usage.requests],
    ["Successes", usage.successes],
    ["Failures", usage.failures],
    ["Success rate", formatPercent(usage.success_rate)],
    ["Sent", formatBytes(usage.bytes_sent)],
    ["Received", formatBytes(usage.bytes_received)],
    [
      "Avg latency",
      usage.avg_latency_ms === null ? null : `${Math.round(usage.avg_latency_ms)} ms`,
    ],
  ];
}

/** A series' requests as a sparkline (devices' usage prints the same). */
export function printHistory(history: Series): void {
  const values = history.points.map((point) => point.requests);
  const total = values.reduce((sum, value) => sum + value, 0);
  const peak = Math.max(0, ...values);
  const width = Math.max(20, Math.min(120, (process.stdout.columns ?? 80) - 4));
  line(
    `${pc.bold("Requests")} over ${history.range} (${formatCount(total)}, peak ${
      formatCount(peak)
    } in ${history.bucket_seconds} s)`,
  );
  line(`  ${sparkline(values, width)}`);
  line(pc.dim(`  ${history.from} → ${history.to}`));
}
