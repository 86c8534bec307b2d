/**
 * Suite `geo`: IP database lookups as the gateway (Deno) makes them. Budget: at most 2 µs an
 * address through the stack of databases a gateway opens (a 100,000-line geofeed before the
 * shipped country database), beside each database alone. Each run is a fresh process
 * (geo-lookup.ts): 100,000 random public addresses (a quarter IPv6), warmed twice, then timed.
 * BENCH_GEO_RUNTIME=node runs the same under Node.
 */
import { entryRuntime, runEntry } from "./runtime.ts";
import { formatNumber, median, type Row, type Suite, type SuiteContext } from "./suite.ts";
import type { GeoLookupResult } from "./geo-lookup.ts";

const LOOKUP_BUDGET_NS = 2000;

async function run(context: SuiteContext): Promise<Row[]> {
  const runtime = entryRuntime("BENCH_GEO_RUNTIME");
  const results: GeoLookupResult[] = [];
  for (let i = 0; i < context.runs; i++) {
    const result = await runEntry<GeoLookupResult>(runtime, "geo-lookup.ts", [], ["--allow-read"]);
    results.push(result);
    context.log(
      `geo: run ${i + 1}: stack ${result.stackNs.toFixed(0)} ns, mmdb ${
        result.mmdbNs.toFixed(0)
      } ns, geofeed ${result.geofeedNs.toFixed(0)} ns`,
    );
  }
  const m = (pick: (r: GeoLookupResult) => number) => median(results.map(pick));
  const runs = (pick: (r: GeoLookupResult) => number) => results.map(pick);
  const who = `${results[0].runtime}, ${formatNumber(results[0].addresses, 0)} addresses`;
  return [
    {
      figure:
        `IP database lookup through the stack (geofeed, then the shipped country file; ${who})`,
      key: "geo-lookup-stack",
      value: m((r) => r.stackNs) / 1000,
      runs: runs((r) => r.stackNs / 1000),
      unit: "µs",
      digits: 2,
      budget: { op: "<=", limit: LOOKUP_BUDGET_NS / 1000 },
      detail: `the shipped file placed ${
        formatNumber((100 * results[0].placed) / results[0].addresses, 0)
      }% of the addresses in a country`,
    },
    {
      figure: "IP database lookup, the shipped country file alone (MaxMind DB)",
      value: m((r) => r.mmdbNs) / 1000,
      runs: runs((r) => r.mmdbNs / 1000),
      unit: "µs",
      digits: 2,
      detail: `opened in ${formatNumber(m((r) => r.mmdbOpenMs), 0)} ms`,
    },
    {
      figure: "Resident memory the shipped country database adds to a gateway (opened, warm)",
      key: "geo-shipped-rss",
      value: m((r) => r.shippedRssMb),
      runs: runs((r) => r.shippedRssMb),
      unit: "MiB",
      digits: 1,
      detail: "read, opened and 300,000 lookups (its decoded records cached); the file is 7.5 MB",
    },
    {
      figure: "IP database lookup, a 100,000-line geofeed alone",
      value: m((r) => r.geofeedNs) / 1000,
      runs: runs((r) => r.geofeedNs / 1000),
      unit: "µs",
      digits: 2,
      detail: `opened (parsed and indexed) in ${formatNumber(m((r) => r.geofeedOpenMs), 0)} ms`,
    },
  ];
}

export const geoSuite: Suite = {
  name: "geo",
  description: "IP database lookups (geofeed, the shipped country file, both stacked), under Deno",
  run,
};
