/**
 * `npm run bench`: runs the benchmark suites and prints one table (figure, value, budget,
 * pass/fail). Every figure with a budget is a median of several runs. Benchmarks send traffic
 * to loopback only, and need the test bed's Postgres and Redis (and tinyproxy and Squid).
 *
 *   npm run bench                         every suite
 *   npm run bench -- throughput           one suite (or several: gateway-core feed memory)
 *   npm run bench -- --runs 5 health      runs per figure (at least 3 by default)
 *   npm run bench -- --list               the suites
 *   npm run bench -- --no-record memory   leave the record as it is (an experiment)
 *
 * After each suite its figures go to the bench's record, docs/measured/bench-latest.json, as
 * that suite's entry (with the day, the machine and this command), the other suites' entries
 * kept: `npm run capacity` sizes a cluster from it (scripts/measured/record.ts).
 *
 * A later issue adds a suite by writing a module that exports a `Suite` (suite.ts) and listing
 * it in SUITES below. The exit status is 1 when a figure misses its budget or a suite fails.
 */
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { extractSuite } from "./extract.ts";
import { feedSuite } from "./feed.ts";
import { gatewayCoreSuite } from "./gateway-core.ts";
import { healthSuite } from "./health.ts";
import { memorySuite } from "./memory.ts";
import { churnSuite } from "./churn.ts";
import { geoSuite } from "./geo.ts";
import { preflightSuite } from "./preflight.ts";
import { attributionSuite } from "./attribution.ts";
import { metricsSuite } from "./metrics.ts";
import { producersSuite } from "./producers.ts";
import { scaleSuite } from "./scale.ts";
import { scaleOutSuite } from "./scale-out.ts";
import { providersSuite } from "./providers.ts";
import { scalingSuite } from "./scaling.ts";
import { singleInstanceSuite } from "./single-instance.ts";
import { startSuite } from "./start.ts";
import { telemetrySuite } from "./telemetry.ts";
import { throughputSuite } from "./throughput.ts";
import { tlsCaSuite } from "./tls-ca.ts";
import { tlsInterceptSuite } from "./tls-intercept.ts";
import { trafficSuite } from "./traffic.ts";
import { tunnelOpsSuite } from "./tunnel-ops.ts";
import { tunnelDnsSuite } from "./tunnel-dns.ts";
import { tunnelConnectSuite } from "./tunnel-connect.ts";
import { webSuite } from "./web.ts";
import { writesSuite } from "./writes.ts";
import { passes, type Row, type Suite } from "./suite.ts";
import { type Line, table } from "./table.ts";
import { describeMachine } from "../measured/machine.ts";
import { RECORD_FILE } from "../measured/record.ts";
import {
  benchCommand,
  benchSettings,
  headCommit,
  type Invocation,
  recordSuite,
  suiteEntry,
} from "./record-run.ts";

/** Every suite, in the order a full run takes them. */
export const SUITES: readonly Suite[] = [
  gatewayCoreSuite,
  feedSuite,
  throughputSuite,
  tunnelOpsSuite,
  singleInstanceSuite,
  memorySuite,
  churnSuite,
  geoSuite,
  attributionSuite,
  tlsCaSuite,
  tlsInterceptSuite,
  preflightSuite,
  scalingSuite,
  producersSuite,
  scaleSuite,
  scaleOutSuite,
  healthSuite,
  metricsSuite,
  telemetrySuite,
  trafficSuite,
  writesSuite,
  providersSuite,
  extractSuite,
  webSuite,
  startSuite,
  tunnelDnsSuite,
  tunnelConnectSuite,
];

function firstLine(error: unknown): string {
  return error instanceof Error ? error.message.split("\n")[0] : String(error);
}

function loadText(): string {
  return loadavg().map((l) => l.toFixed(2)).join(" / ");
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      runs: { type: "string", default: "3" },
      list: { type: "boolean", default: false },
      "no-record": { type: "boolean", default: false },
    },
  });
  if (values.list) {
    for (const suite of SUITES) console.log(`${suite.name.padEnd(12)} ${suite.description}`);
    return;
  }
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) throw new Error("--runs must be a positive integer");
  const unknown = positionals.filter((name) => !SUITES.some((s) => s.name === name));
  if (unknown.length > 0) {
    throw new Error(
      `Unknown suite ${unknown.join(", ")}; suites: ${SUITES.map((s) => s.name).join(", ")}`,
    );
  }
  const chosen = positionals.length === 0
    ? SUITES
    : SUITES.filter((suite) => positionals.includes(suite.name));

  const log = (message: string) => process.stderr.write(`${message}\n`);
  const settings = benchSettings(process.env);
  const invocation: Invocation | undefined = values["no-record"] ? undefined : {
    command: benchCommand(process.argv.slice(2), settings),
    settings,
    runs,
    commit: headCommit(),
    machine: describeMachine(),
  };
  const lines: Line[] = [];
  for (const suite of chosen) {
    const started = performance.now();
    const loadStart = loadavg();
    log(`== ${suite.name}: ${suite.description}`);
    let rows: Row[] | undefined;
    try {
      rows = await suite.run({ runs, log });
      lines.push(...rows.map((row) => ({ suite: suite.name, row })));
    } catch (error) {
      log(`${suite.name} failed: ${error instanceof Error ? error.stack : String(error)}`);
      if (invocation) log(`== ${suite.name}: its entry in ${RECORD_FILE} stays as it was`);
      lines.push({ suite: suite.name, error: firstLine(error) });
    }
    if (rows && invocation) {
      const entry = suiteEntry(invocation, {
        endedAt: new Date(),
        seconds: (performance.now() - started) / 1000,
        loadStart,
        loadEnd: loadavg(),
        rows,
      });
      try {
        await recordSuite(suite.name, entry);
        log(`== ${suite.name}: recorded in ${RECORD_FILE}`);
      } catch (error) {
        // The figures are in the table all the same; the run fails so the gap is seen.
        log(`${suite.name}: not recorded: ${firstLine(error)}`);
        lines.push({ suite: `${suite.name} (record)`, error: firstLine(error) });
      }
    }
    log(
      `== ${suite.name} took ${((performance.now() - started) / 1000).toFixed(0)} s ` +
        `(load average ${loadText()})`,
    );
  }
  console.log(table(lines));
  // Shared machines skew CPU figures: say how busy this one was.
  console.log(`${availableParallelism()} cores; load average at the end ${loadText()}`);
  const failed = lines.some((line) => line.error !== undefined || passes(line.row!) === false);
  process.exitCode = failed ? 1 : 0;
}

try {
  await main();
} catch (error) {
  // A bad argument: one line, no stack.
  process.stderr.write(`bench: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 2;
}
// Clients a suite left open must not keep the process alive once the table is out.
process.exit(process.exitCode ?? 0);
