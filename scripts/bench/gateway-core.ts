/**
 * Suite `gateway-core`: the routing core's budgets (DESIGN.md) with 100,000 proxies over 20
 * connectors: snapshot build (<= 1 s), one-connector update of 5,000 rows (<= 10 ms), runtime
 * section of 2,000 quarantines (<= 0.3 ms), dispatch p99 (<= 20 µs) under every strategy.
 *
 * Each run is a fresh process running core-entry.ts under Deno, the gateway's runtime (what
 * core-measure.ts measures, and the warm-up it leaves out, is described there); the table shows
 * the median of the runs. BENCH_CORE_RUNTIME=node runs the same under Node instead;
 * BENCH_CORE_PROXIES / BENCH_CORE_ITERATIONS change the size.
 */
import { CORE_DEFAULTS, type CoreParameters, type CoreResult } from "./core-measure.ts";
import { entryRuntime, runEntry } from "./runtime.ts";
import {
  envPositive,
  formatNumber,
  median,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

async function run(context: SuiteContext): Promise<Row[]> {
  const runtime = entryRuntime("BENCH_CORE_RUNTIME");
  const parameters: CoreParameters = {
    ...CORE_DEFAULTS,
    proxies: envPositive("BENCH_CORE_PROXIES", true) ?? CORE_DEFAULTS.proxies,
    iterations: envPositive("BENCH_CORE_ITERATIONS", true) ?? CORE_DEFAULTS.iterations,
  };
  const results: CoreResult[] = [];
  for (let i = 0; i < context.runs; i++) {
    const result = await runEntry<CoreResult>(runtime, "core-entry.ts", [
      JSON.stringify(parameters),
    ]);
    context.log(
      `gateway-core run ${i + 1} (${result.runtime}): build ${result.buildMs.toFixed(1)} ms, ` +
        `update ${result.updateMs.toFixed(2)} ms, runtime ${
          result.runtimeSectionMs.toFixed(3)
        } ms, ` +
        `dispatch p99 ${(result.dispatch.p99 * 1000).toFixed(2)} µs`,
    );
    results.push(result);
  }
  const on = results[0].runtime;
  const proxies = formatNumber(parameters.proxies, 0);
  const rows = results[0].rowsPerConnector;
  /** A figure in ms over the runs. */
  const ms = (pick: (r: CoreResult) => number) => {
    const runs = results.map(pick);
    return { value: median(runs), runs };
  };
  /** A figure in µs (measured in ms) over the runs. */
  const us = (pick: (r: CoreResult) => number) => {
    const runs = results.map((r) => pick(r) * 1000);
    return { value: median(runs), runs, digits: 2 };
  };
  const microText = (value: number) => `${formatNumber(value, 2)} µs`;
  const out: Row[] = [
    {
      figure: `snapshot build, ${proxies} proxies (${on})`,
      unit: "ms",
      budget: { op: "<=", limit: 1000 },
      ...ms((r) => r.buildMs),
      digits: 1,
      detail: "median of 5 builds per run",
    },
    {
      figure: `one-connector update, ${formatNumber(rows, 0)} rows (${on})`,
      unit: "ms",
      budget: { op: "<=", limit: 10 },
      ...ms((r) => r.updateMs),
      digits: 2,
      detail: `median of 20 after 11 warm-up applies; first (cold) ${
        formatNumber(median(results.map((r) => r.updateFirstMs)), 2)
      } ms`,
    },
    {
      figure: `runtime section, ${formatNumber(parameters.quarantines, 0)} quarantines (${on})`,
      unit: "ms",
      budget: { op: "<=", limit: 0.3 },
      ...ms((r) => r.runtimeSectionMs),
      digits: 3,
      detail: `median of 50 after 51 warm-up applies; first (cold) ${
        formatNumber(median(results.map((r) => r.runtimeSectionFirstMs)), 3)
      } ms`,
    },
    {
      figure: `dispatch p50, acquire+commit+release, ${proxies} proxies (${on})`,
      unit: "µs",
      ...us((r) => r.dispatch.p50),
      detail: `${formatNumber(parameters.iterations, 0)} timed after 100,000 warm-up; ${
        formatNumber(median(results.map((r) => r.dispatch.perSecond)), 0)
      } a second on one core`,
    },
    {
      figure: `dispatch p99, round_robin (${on})`,
      unit: "µs",
      budget: { op: "<=", limit: 20 },
      ...us((r) => r.dispatch.p99),
      detail: `p99.9 ${microText(median(results.map((r) => r.dispatch.p999 * 1000)))}, max ${
        microText(median(results.map((r) => r.dispatch.max * 1000)))
      } (GC pauses, preemption); awaited acquire p99 ${
        microText(median(results.map((r) => r.asyncDispatch.p99 * 1000)))
      }`,
    },
  ];
  for (const strategy of ["least_used", "health_based", "sticky"]) {
    out.push({
      figure: `dispatch p99, ${strategy}${
        strategy === "sticky" ? " (10,000 sessions, no Redis)" : ""
      } (${on})`,
      unit: "µs",
      budget: { op: "<=", limit: 20 },
      ...us((r) => r.strategies[strategy].p99),
      detail: `p50 ${microText(median(results.map((r) => r.strategies[strategy].p50 * 1000)))}`,
    });
  }
  out.push({
    figure: `dispatch p99, least_used with every proxy busy (${on})`,
    unit: "µs",
    ...us((r) => r.leastUsedAllBusy.p99),
    detail: `half busy: p99 ${
      microText(median(results.map((r) => r.leastUsedHalfBusy.p99 * 1000)))
    }; ranked by 32 probes`,
  });
  return out;
}

export const gatewayCoreSuite: Suite = {
  name: "gateway-core",
  description: "routing core under Deno: snapshot build/update, runtime section, dispatch p99",
  run,
};
