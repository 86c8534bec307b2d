/**
 * For those who alert from Prometheus: infra/prometheus's alerting rules pass `promtool check
 * rules` and their own `promtool test rules` file, and infra/grafana's dashboard queries parse as
 * PromQL (promtool checks them as recording rules); every family either names is one a process
 * exports (the gateway's HELP table, the control plane's registry with every runtime).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { Telemetry } from "../../control/node/telemetry/telemetry.ts";
import { METRIC_HELP } from "../../gateway/base/metric-help.ts";
import { ROOT } from "../../testkit/processes.ts";

const PROMETHEUS = join(ROOT, "infra", "prometheus");
const DASHBOARD = join(ROOT, "infra", "grafana", "octoprox.json");

function promtool(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile("promtool", args, { cwd, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({
        code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
        output: `${stdout}${stderr}`,
      });
    });
  });
}

/** The families a query names (a histogram's series named by their family). */
function familiesIn(expr: string): string[] {
  return [...expr.matchAll(/\boctoprox_[a-z0-9_]+/g)].map((m) =>
    m[0].replace(/_(bucket|sum|count)$/, "")
  );
}

function exported(): Set<string> {
  const control = new Telemetry({
    role: "all",
    runtimes: ["api", "controller", "worker", "echo"],
    snapshot: () => {
      throw new Error("not scraped");
    },
    processMetrics: false,
  });
  return new Set([...Object.keys(METRIC_HELP), ...control.families()]);
}

interface Rules {
  groups: { name: string; rules: { alert?: string; record?: string; expr: string }[] }[];
}

describe("the Prometheus rules", () => {
  it("pass promtool's check and their tests", async () => {
    const check = await promtool(["check", "rules", "octoprox.rules.yml"], PROMETHEUS);
    expect(check.code, check.output).toBe(0);
    const tested = await promtool(["test", "rules", "octoprox.rules.test.yml"], PROMETHEUS);
    expect(tested.code, tested.output).toBe(0);
  });

  it("name only families the processes export", async () => {
    const rules = parse(await readFile(join(PROMETHEUS, "octoprox.rules.yml"), "utf8")) as Rules;
    const known = exported();
    const named = rules.groups.flatMap((group) => group.rules.flatMap((r) => familiesIn(r.expr)));
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((family) => !known.has(family))).toEqual([]);
  });
});

describe("the Grafana dashboard", () => {
  it("queries families the processes export, in PromQL promtool reads", async () => {
    const dashboard = JSON.parse(await readFile(DASHBOARD, "utf8")) as {
      uid: string;
      panels: { title: string; targets: { expr: string }[] }[];
    };
    expect(dashboard.uid).toBe("octoprox");
    const exprs = dashboard.panels.flatMap((panel) => panel.targets.map((t) => t.expr));
    const known = exported();
    expect(exprs.flatMap(familiesIn).filter((family) => !known.has(family))).toEqual([]);
    // Each query as a recording rule: promtool parses every one.
    const dir = await mkdtemp(join(tmpdir(), "ox-grafana-"));
    try {
      const rules: Rules = {
        groups: [{
          name: "dashboard",
          rules: exprs.map((expr, index) => ({ record: `dashboard:query_${index}`, expr })),
        }],
      };
      await writeFile(join(dir, "dashboard.rules.yml"), stringify(rules));
      const check = await promtool(["check", "rules", "dashboard.rules.yml"], dir);
      expect(check.code, check.output).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
