/** A usage series (the API's history answer) as four charts: rate, success, bytes, latency. */
import { useMemo } from "preact/hooks";
import type { Series } from "../../../api/answers/metrics.ts";
import { Chart } from "./chart.tsx";
import { formatBytes, formatCount, formatMs } from "./format.ts";

export function UsageCharts({ series }: { series: Series | undefined }) {
  const charts = useMemo(() => {
    if (!series) return undefined;
    const points = series.points;
    return {
      times: points.map((p) => Date.parse(p.t) / 1000),
      rate: [{
        label: "requests/s",
        stroke: "#3b82f6",
        values: points.map((p) => p.requests / series.bucket_seconds),
      }],
      success: [{
        label: "success",
        stroke: "#16a34a",
        values: points.map((p) => (p.success_rate === null ? null : p.success_rate * 100)),
      }],
      bytes: [
        { label: "sent", stroke: "#f59e0b", values: points.map((p) => p.bytes_sent) },
        { label: "received", stroke: "#8b5cf6", values: points.map((p) => p.bytes_received) },
      ],
      latency: [{
        label: "latency",
        stroke: "#ef4444",
        values: points.map((p) => p.avg_latency_ms),
      }],
    };
  }, [series]);
  if (!charts) return <p class="muted">Loading the history…</p>;
  return (
    <div class="charts">
      <Chart
        title="Requests a second"
        times={charts.times}
        series={charts.rate}
        format={(v) => formatCount(v, 2)}
      />
      <Chart
        title="Success rate (%)"
        times={charts.times}
        series={charts.success}
        range={[0, 100]}
        format={(v) => `${v.toFixed(0)} %`}
      />
      <Chart title="Bytes" times={charts.times} series={charts.bytes} format={formatBytes} />
      <Chart title="Latency" times={charts.times} series={charts.latency} format={formatMs} />
    </div>
  );
}
