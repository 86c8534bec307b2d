/**
 * Suite `start`: the CPU a control process and a CLI command spend loading their code, from the
 * control plane's build (scripts/build-control.ts) against the sources through tsx, side by side
 * in each run. A control process is timed up to its settings check (every module is loaded by
 * then; without OCTOPROX_REDIS_URL it exits 2 there), a CLI command is `--version`. Each child
 * reports its own CPU (every thread, tsx's loader thread included) as it exits. No budget: the
 * figures say what the build saves each start, which a test suite starting hundreds of processes,
 * and an operator's scripts running the CLI, pay.
 */
import { ensureControlBuild, probedStart } from "../build-control.ts";
import { median, type Row, type Suite, type SuiteContext } from "./suite.ts";

/** Loaded before anything else: writes the process's CPU so far (µs) to stderr at exit. */
const CPU_PROBE = "data:text/javascript," +
  encodeURIComponent(
    'process.on("exit", () => process.stderr.write(`cpu-us ${(({ user, system }) => user + system)(process.cpuUsage())}\\n`));',
  );

/** Runs `node ...args` to its exit, with no OCTOPROX_* setting; answers its CPU in ms. */
async function cpuOfRun(args: readonly string[]): Promise<number> {
  const stderr = await probedStart(CPU_PROBE, args);
  const match = /cpu-us (\d+)/.exec(stderr);
  if (!match) throw new Error(`node ${args.join(" ")} reported no CPU: ${stderr}`);
  return Number(match[1]) / 1000;
}

const SIDES = {
  "control process": {
    sources: ["--import", "tsx", "control/main.ts"],
    build: ["--enable-source-maps", "dist/control/main.mjs"],
  },
  "CLI command": {
    sources: ["--import", "tsx", "control/cli/main.ts", "--version"],
    build: ["control/cli/octoprox.js", "--version"],
  },
} as const;

async function run(context: SuiteContext): Promise<Row[]> {
  await Promise.all([ensureControlBuild("main"), ensureControlBuild("cli")]);
  const rows: Row[] = [];
  for (const [what, side] of Object.entries(SIDES)) {
    const sources: number[] = [];
    const build: number[] = [];
    // A first run of each fills tsx's transform cache and the disk cache; it is not counted.
    await cpuOfRun(side.sources);
    await cpuOfRun(side.build);
    for (let i = 0; i < Math.max(context.runs, 5); i++) {
      sources.push(await cpuOfRun(side.sources));
      build.push(await cpuOfRun(side.build));
    }
    context.log(
      `start: ${what}: sources ${sources.map(Math.round)} ms, build ${build.map(Math.round)} ms`,
    );
    const pairs = build.map((b, i) => b / sources[i]);
    rows.push(
      { figure: `${what} load, sources through tsx`, value: median(sources), unit: "ms CPU" },
      { figure: `${what} load, built`, value: median(build), unit: "ms CPU", runs: build },
      {
        figure: `${what} load, built ÷ sources`,
        value: median(pairs),
        unit: "×",
        digits: 2,
        runs: pairs,
      },
    );
  }
  return rows;
}

export const startSuite: Suite = {
  name: "start",
  description: "CPU to load a control process and a CLI command, built against through tsx",
  run,
};
