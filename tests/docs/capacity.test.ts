/**
 * docs/capacity.md shows what `npm run capacity` prints for the committed bench record, so the
 * sizing there can never drift from what was measured; the arithmetic is the page's, checked on
 * figures worked by hand; the record keeps each suite's entry when another suite runs.
 */
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { blockOf, CAPACITY_PAGE, capacityBlock } from "../../scripts/capacity/doc.ts";
import { capacityReport } from "../../scripts/capacity/report.ts";
import { overZones } from "../../scripts/capacity/sizing.ts";
import {
  type BenchRecord,
  emptyRecord,
  parseRecord,
  readRecord,
  recordText,
  type SuiteEntry,
  withSuite,
} from "../../scripts/measured/record.ts";
import { recordedRow } from "../../scripts/bench/record-run.ts";

it("docs/capacity.md holds what `npm run capacity` prints for the committed record", async () => {
  const page = await readFile(CAPACITY_PAGE, "utf8");
  const printed = capacityReport(await readRecord()).text;
  // On a difference: `npm run capacity -- --write`, then commit the page with the record.
  expect(blockOf(page)).toBe(capacityBlock(printed));
});

const machine = {
  cpu: "Test CPU",
  cores: 2,
  memoryBytes: 24 * 2 ** 30,
  os: "Debian GNU/Linux 12 (bookworm)",
  kernel: "Linux 6.18.0 x64",
  node: "20.20.2",
  deno: "2.9.6",
};

function entry(command: string, rows: SuiteEntry["rows"]): SuiteEntry {
  return {
    date: "2026-12-06T09:40:12.000Z",
    command,
    settings: {},
    runs: 3,
    seconds: 600,
    commit: null,
    machine,
    loadAverage: { start: [1, 1, 1], end: [2, 2, 2] },
    rows,
  };
}

const throughput = entry("npm run bench -- --runs 3 throughput", [
  {
    figure: "keep-alive HTTP: CPU per request, gateway",
    key: "http/gateway/cpu-per-request",
    value: 36,
    unit: "µs",
    facts: { perSecond: 17_896, proxyCores: 0.65 },
  },
  {
    figure: "new CONNECT tunnels: CPU per request, gateway",
    key: "connect/gateway/cpu-per-request",
    value: 155,
    unit: "µs",
    facts: { perSecond: 3_841, proxyCores: 0.58 },
  },
  {
    figure: "new CONNECT tunnels: CPU per request, tinyproxy",
    key: "connect/tinyproxy/cpu-per-request",
    value: 150,
    unit: "µs",
    facts: { perSecond: 4_020 },
  },
]);
const memory = entry("npm run bench -- --runs 3 memory", [
  { figure: "snapshot", key: "rss-snapshot", value: 180, unit: "MB" },
  { figure: "tunnels", key: "rss-per-1000-idle-tunnels", value: 15, unit: "MB" },
]);

describe("the sizing", () => {
  it("takes the smallest count whose survivors of a lost zone still carry the peak", () => {
    expect(overZones(10, 3)).toEqual({ total: 15, perZone: 5 });
    expect(overZones(44, 3)).toEqual({ total: 66, perZone: 22 });
    expect(overZones(20, 3)).toEqual({ total: 30, perZone: 10 });
  });

  it("works out the page's figures from a complete record", () => {
    const record = withSuite(withSuite(emptyRecord(), "throughput", throughput), "memory", memory);
    const { text, missing } = capacityReport(record);
    expect(missing).toEqual([]);
    expect(text).not.toContain("Incomplete");
    // Keep-alive HTTP: 10 carry the peak, 11 with a host lost, 15 over three zones.
    expect(text).toContain("100,000 / 10,738 = 9.31 -> 10 gateways carry the peak");
    expect(text).toContain("10 + 1 = 11 gateways");
    expect(text).toContain("-> 15 gateways (5 a zone)");
    // Tunnels only: 44, 45 and 66; the mix 20, 21 and 30; at tinyproxy's rate 42.
    expect(text).toContain("100,000 / 2,305 = 43.39 -> 44 gateways carry the peak");
    expect(text).toContain("-> 66 gateways (22 a zone)");
    expect(text).toContain("= 8,531 requests/s per gateway");
    expect(text).toContain("-> 20 gateways; one host: 21; 3 zones: 30");
    expect(text).toContain("= 42 gateways against 44: 2 fewer");
    expect(text).toContain("a gateway: 180 MB + 10.0 × 15.0 MB = 330 MB");
    // Every input says where it came from.
    expect(text).toContain("throughput: 2026-12-06 09:40 UTC, 3 runs a figure");
    expect(text).toContain("`npm run bench -- --runs 3 memory`");
    expect(text).toContain("machine: Test CPU, 2 cores, 24.0 GiB");
  });

  it("prints what it can and names the suite and the command an input needs", () => {
    const { text, missing } = capacityReport(withSuite(emptyRecord(), "memory", memory));
    expect(missing.map((m) => m.suite)).toEqual(["throughput", "throughput"]);
    expect(text).toContain("throughput: not in the record");
    expect(text).toContain("the snapshot, 100,000 proxies: 180 MB");
    expect(text).toMatch(/Incomplete: [\s\S]*npm run bench -- --runs 3 throughput$/);
  });

  it("counts a throughput run that left the gateway out as missing it", () => {
    const peersOnly = { ...throughput, rows: throughput.rows.slice(2) };
    const { missing } = capacityReport(withSuite(emptyRecord(), "throughput", peersOnly));
    expect(missing.map((m) => m.what)).toContain("keep-alive HTTP via the gateway");
  });
});

describe("the record", () => {
  it("keeps the other suites' entries when one suite runs again", () => {
    let record: BenchRecord = withSuite(emptyRecord(), "throughput", throughput);
    record = withSuite(record, "memory", memory);
    const later = { ...memory, date: "2026-12-07T10:00:00.000Z" };
    record = parseRecord(recordText(withSuite(record, "memory", later)));
    expect(Object.keys(record.suites)).toEqual(["memory", "throughput"]);
    expect(record.suites.throughput).toEqual(throughput);
    expect(record.suites.memory.date).toBe("2026-12-07T10:00:00.000Z");
  });

  it("keeps a figure that could not be measured as null, and the verdict beside a budget", () => {
    const row = recordedRow({
      figure: "f",
      value: NaN,
      unit: "ms",
      runs: [1.234567, NaN],
      budget: { op: "<=", limit: 10 },
      facts: { perSecond: 12.345678 },
    });
    expect(row).toMatchObject({ value: null, runs: [1.2346, null], result: "fail" });
    expect(row.facts).toEqual({ perSecond: 12.3457 });
  });

  it("refuses a record that is not one, naming where", () => {
    expect(() => parseRecord('{"about": "x", "suites": {"memory": {"date": 1}}}')).toThrow(
      /suites\.memory/,
    );
  });
});
