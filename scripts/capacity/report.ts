/**
 * What `npm run capacity` prints: docs/capacity.md's sizing worked out from the bench's record
 * (scripts/measured/record.ts), each input with the day, machine and command that measured it.
 * A pure function of the record, so the page's copy can be held to it (tests/docs/capacity.test.ts).
 * What it cannot work out for want of an input it says, naming the bench command that measures it.
 */
import { settingDocs } from "../../shared/settings.ts";
import {
  type BenchRecord,
  type Machine,
  RECORD_FILE,
  rowOf,
  type SuiteEntry,
} from "../measured/record.ts";
import { carrying, mixedRate, overZones, PLAN } from "./sizing.ts";

/** The suites capacity reads. */
export const INPUT_SUITES = ["throughput", "memory"] as const;
type InputSuite = (typeof INPUT_SUITES)[number];

/** The bench command that measures `suites`, three runs a figure as the budgets are held. */
export function benchCommandFor(suites: readonly string[]): string {
  return `npm run bench -- --runs 3 ${suites.join(" ")}`;
}

/** An input the record lacks: the suite that measures it, and what is missing. */
export interface Missing {
  suite: InputSuite;
  what: string;
}

export interface CapacityReport {
  text: string;
  missing: Missing[];
}

/** One proxy's rate for a kind of work at saturation, from a throughput row. */
interface Rate {
  perSecond: number;
  cpuUs: number;
  /** Cores the proxy kept busy meanwhile. */
  cores?: number;
}

/** Every input, undefined where the record lacks it. */
interface Inputs {
  throughput?: SuiteEntry;
  memory?: SuiteEntry;
  http?: Rate;
  tunnel?: Rate;
  /** tinyproxy's tunnel rate in the same runs: the what-if's alone, so never missing. */
  tinyproxy?: Rate;
  snapshotMb?: number;
  perThousandTunnelsMb?: number;
  /** The tunnels the memory suite held open. */
  tunnelsOpen?: number;
}

function number(value: number, digits = 0): string {
  return value.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

function rateOf(entry: SuiteEntry | undefined, key: string): Rate | undefined {
  const row = rowOf(entry, key);
  const perSecond = row?.facts?.perSecond;
  if (row?.value == null || perSecond == null) return undefined;
  const cores = row.facts?.proxyCores;
  return { perSecond, cpuUs: row.value, ...(cores == null ? {} : { cores }) };
}

function gather(record: BenchRecord): { inputs: Inputs; missing: Missing[] } {
  const missing: Missing[] = [];
  const need = <T>(suite: InputSuite, what: string, value: T | undefined): T | undefined => {
    if (value === undefined) missing.push({ suite, what });
    return value;
  };
  const { throughput, memory } = record.suites;
  const tunnels = rowOf(memory, "rss-per-1000-idle-tunnels");
  const inputs: Inputs = {
    throughput,
    memory,
    http: need(
      "throughput",
      "keep-alive HTTP via the gateway",
      rateOf(throughput, "http/gateway/cpu-per-request"),
    ),
    tunnel: need(
      "throughput",
      "new CONNECT tunnels via the gateway",
      rateOf(throughput, "connect/gateway/cpu-per-request"),
    ),
    tinyproxy: rateOf(throughput, "connect/tinyproxy/cpu-per-request"),
    snapshotMb: need(
      "memory",
      "resident memory with a 100,000-proxy snapshot",
      rowOf(memory, "rss-snapshot")?.value ?? undefined,
    ),
    perThousandTunnelsMb: need(
      "memory",
      "resident memory per 1,000 idle tunnels",
      tunnels?.value ?? undefined,
    ),
    tunnelsOpen: tunnels?.facts?.tunnels ?? undefined,
  };
  return { inputs, missing };
}

function when(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

/** Where a suite's entry came from: day, runs, load, command and machine. */
function entryLines(name: string, entry: SuiteEntry): string[] {
  const [startLoad] = entry.loadAverage.start;
  const [endLoad] = entry.loadAverage.end;
  const load = startLoad === undefined || endLoad === undefined
    ? ""
    : `, load average ${number(startLoad, 2)} to ${number(endLoad, 2)}`;
  const runs = `${entry.runs} run${entry.runs === 1 ? "" : "s"} a figure`;
  const head = entry.commit ? ` (HEAD ${entry.commit.slice(0, 10)})` : "";
  const { machine } = entry;
  return [
    `  ${name}: ${when(entry.date)}, ${runs}${load}`,
    `    \`${entry.command}\`${head}`,
    `    machine: ${machine.cpu}, ${machine.cores} cores, ` +
    `${number(machine.memoryBytes / 2 ** 30, 1)} GiB`,
    `             ${machine.os}, ${machine.kernel}, Node ${machine.node}, Deno ${machine.deno}`,
  ];
}

/** A label and its value in two columns. */
function pair(label: string, value: string): string {
  return `    ${label.padEnd(30)} ${value}`;
}

function sameMachine(a: Machine, b: Machine): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function inputLines(inputs: Inputs): string[] {
  const out = ["Inputs (one gateway: gateway/main.ts under Deno, shipped defaults, one isolate)"];
  const absent = (suite: InputSuite) =>
    `  ${suite}: not in the record; \`${benchCommandFor([suite])}\` measures it`;
  const rate = (label: string, found: Rate | undefined, what = "of gateway CPU each") =>
    pair(
      label,
      found
        ? `${number(found.perSecond)} /s, ${number(found.cpuUs)} µs ${what}` +
          (found.cores === undefined ? "" : `, ${number(found.cores, 2)} cores busy`)
        : "not in this entry",
    );
  if (inputs.throughput) {
    out.push(
      ...entryLines("throughput", inputs.throughput),
      rate("keep-alive HTTP requests", inputs.http),
      rate("new CONNECT tunnels", inputs.tunnel),
      pair(
        "new CONNECT tunnels, tinyproxy",
        inputs.tinyproxy
          ? `${number(inputs.tinyproxy.perSecond)} /s (the same runs)`
          : "not in this entry",
      ),
    );
  } else {
    out.push(absent("throughput"));
  }
  if (inputs.memory) {
    const open = inputs.tunnelsOpen === undefined ? "" : ` (${number(inputs.tunnelsOpen)} open)`;
    out.push(
      ...entryLines("memory", inputs.memory),
      pair(
        "RSS, 100,000-proxy snapshot",
        inputs.snapshotMb === undefined ? "not in this entry" : `${number(inputs.snapshotMb)} MB`,
      ),
      pair(
        "RSS per 1,000 idle tunnels",
        inputs.perThousandTunnelsMb === undefined
          ? "not in this entry"
          : `${number(inputs.perThousandTunnelsMb, 1)} MB${open}`,
      ),
    );
  } else {
    out.push(absent("memory"));
  }
  if (inputs.throughput && inputs.memory) {
    if (!sameMachine(inputs.throughput.machine, inputs.memory.machine)) {
      out.push("  The inputs come from different machines: figures of one machine compare best.");
    }
  }
  return out;
}

/** The line standing in for a section that lacks `suites`' figures. */
function needs(suites: readonly InputSuite[]): string {
  return `  needs ${suites.join(" and ")}: \`${benchCommandFor(suites)}\``;
}

/** A fleet sized for one kind of work at `rate` a gateway, and the count that carries the peak. */
function fleet(rate: number, unit: string): { lines: string[]; carry: number } {
  const perGateway = rate * PLAN.targetUtilization;
  const carry = carrying(PLAN.peakPerSecond, rate, PLAN.targetUtilization);
  const zones = overZones(carry, PLAN.zones);
  return {
    carry,
    lines: [
      `  ${number(rate)} × ${PLAN.targetUtilization} = ${number(perGateway)} ${unit} per gateway`,
      `  ${number(PLAN.peakPerSecond)} / ${number(perGateway)} = ` +
      `${number(PLAN.peakPerSecond / perGateway, 2)} -> ${carry} gateways carry the peak`,
      `  one host as the failure domain: ${carry} + 1 = ${carry + 1} gateways`,
      `  ${PLAN.zones} zones, a zone the failure domain: smallest N = ${carry} + ceil(N / ` +
      `${PLAN.zones}) -> ${zones.total} gateways (${zones.perZone} a zone)`,
    ],
  };
}

function mixLines(http: Rate, tunnel: Rate): string[] {
  const share = PLAN.mixKeepAliveShare;
  const rate = mixedRate(http.perSecond, tunnel.perSecond, share);
  const carry = carrying(PLAN.peakPerSecond, rate, PLAN.targetUtilization);
  return [
    `  1 / (${share} / ${number(http.perSecond)} + ${number(1 - share, 1)} / ` +
    `${number(tunnel.perSecond)}) = ${number(rate)} requests/s per gateway`,
    `  ${number(PLAN.peakPerSecond)} / (${number(rate)} × ${PLAN.targetUtilization}) = ` +
    `${number(PLAN.peakPerSecond / (rate * PLAN.targetUtilization), 2)} -> ${carry} gateways;` +
    ` one host: ${carry + 1}; ${PLAN.zones} zones: ${overZones(carry, PLAN.zones).total}`,
  ];
}

function whatIfLine(tinyproxy: Rate, tunnelCarry: number): string {
  const at = carrying(PLAN.peakPerSecond, tinyproxy.perSecond, PLAN.targetUtilization);
  const change = at - tunnelCarry;
  const verdict = change === 0
    ? "no change"
    : `${Math.abs(change)} ${change < 0 ? "fewer" : "more"} ` +
      `(${number((Math.abs(change) / tunnelCarry) * 100)}% of the tunnel fleet)`;
  return `  ceil(${number(PLAN.peakPerSecond)} / (${number(tinyproxy.perSecond)} × ` +
    `${PLAN.targetUtilization})) = ${at} gateways against ${tunnelCarry}: ${verdict}`;
}

function cpuLines(http: Rate, tunnel: Rate, cores: number): string[] {
  const work = (PLAN.peakPerSecond * http.cpuUs) / 1e6;
  const out = [
    `  keep-alive HTTP at the peak: ${number(PLAN.peakPerSecond)} × ${number(http.cpuUs)} µs` +
    ` = ${number(work, 1)} cores of gateway work, ${number(work / PLAN.targetUtilization, 1)}` +
    ` at ${PLAN.targetUtilization}`,
    `  one isolate's ceiling, 1 s / CPU each: ${number(1e6 / http.cpuUs)} keep-alive ` +
    `requests/s, ${number(1e6 / tunnel.cpuUs)} tunnels/s`,
  ];
  if (http.cores !== undefined && tunnel.cores !== undefined) {
    out.push(
      `  measured, the gateway had ${number(http.cores, 2)} (keep-alive) and ` +
        `${number(tunnel.cores, 2)} (tunnels) of the machine's ${cores} cores`,
    );
  }
  return out;
}

/** Memory per gateway: each line it has the inputs for, the total when it has them all. */
function memoryLines(inputs: Inputs, carry: number | undefined, lacking: InputSuite[]): string[] {
  const { snapshotMb, perThousandTunnelsMb: perThousand } = inputs;
  const out: string[] = [];
  if (snapshotMb !== undefined) {
    out.push(`  the snapshot, 100,000 proxies: ${number(snapshotMb)} MB (one per isolate)`);
  }
  if (carry !== undefined) {
    const inFlight = PLAN.peakPerSecond * PLAN.upstreamLatencySeconds;
    // The default, from the settings table, so a change of it shows here.
    const limit = settingDocs().find((s) => s.name === "OCTOPROX_MAX_CLIENT_CONNECTIONS")
      ?.defaultValue;
    out.push(
      `  in flight at ${PLAN.upstreamLatencySeconds * 1000} ms a request: ` +
        `${number(inFlight)}, ${number(inFlight / carry)} a gateway over ${carry}` +
        (limit === undefined ? "" : ` (limit ${number(Number(limit))} a gateway)`),
    );
  }
  if (perThousand !== undefined) {
    const share = carry === undefined
      ? ""
      : `, ${number(PLAN.openTunnels / carry)} a gateway over ${carry}`;
    out.push(
      `  ${number(PLAN.openTunnels)} idle tunnels open: ` +
        `${number((PLAN.openTunnels / 1000) * perThousand)} MB over the cluster${share}`,
    );
  }
  if (snapshotMb !== undefined && perThousand !== undefined && carry !== undefined) {
    const thousands = PLAN.openTunnels / carry / 1000;
    out.push(
      `  a gateway: ${number(snapshotMb)} MB + ${number(thousands, 1)} × ` +
        `${number(perThousand, 1)} MB = ${number(snapshotMb + thousands * perThousand)} MB`,
    );
  } else {
    out.push(needs(lacking));
  }
  return out;
}

export function capacityReport(record: BenchRecord): CapacityReport {
  const { inputs, missing } = gather(record);
  const lacking = INPUT_SUITES.filter((suite) => missing.some((m) => m.suite === suite));
  const { http, tunnel, tinyproxy } = inputs;
  const httpFleet = http && fleet(http.perSecond, "requests/s");
  const tunnelFleet = tunnel && fleet(tunnel.perSecond, "tunnels/s");
  const share = PLAN.mixKeepAliveShare;
  const sections: [string, string[]][] = [
    ["Keep-alive HTTP", httpFleet?.lines ?? [needs(["throughput"])]],
    [
      "New CONNECT tunnels only (every request opens a tunnel)",
      tunnelFleet?.lines ?? [needs(["throughput"])],
    ],
    [
      `A mix: ${Math.round(share * 100)}% keep-alive HTTP requests, ` +
      `${Math.round((1 - share) * 100)}% new tunnels`,
      http && tunnel ? mixLines(http, tunnel) : [needs(["throughput"])],
    ],
    [
      "What-if: the gateway's tunnel rate at tinyproxy's (not a measurement)",
      [
        !tunnelFleet
          ? needs(["throughput"])
          : tinyproxy
          ? whatIfLine(tinyproxy, tunnelFleet.carry)
          : "  tinyproxy is not in the recorded throughput run",
      ],
    ],
    [
      "A cross-check by CPU (not for sizing)",
      http && tunnel && inputs.throughput
        ? cpuLines(http, tunnel, inputs.throughput.machine.cores)
        : [needs(["throughput"])],
    ],
    ["Memory per gateway", memoryLines(inputs, httpFleet?.carry, lacking)],
  ];
  const out = [
    `Capacity for a peak of ${number(PLAN.peakPerSecond)} requests a second, no gateway past ` +
    `${PLAN.targetUtilization * 100}% of its tested rate.`,
    `Printed by \`npm run capacity\` from ${RECORD_FILE}.`,
    "",
    ...inputLines(inputs),
  ];
  for (const [title, lines] of sections) out.push("", title, ...lines);
  if (missing.length > 0) {
    out.push(
      "",
      "Incomplete: the record lacks",
      ...missing.map((m) => `  ${m.what} (suite ${m.suite})`),
      `Measure ${missing.length === 1 ? "it" : "them"}, then run \`npm run capacity\` again:`,
      `  ${benchCommandFor(lacking)}`,
    );
  }
  return { text: out.join("\n"), missing };
}
