/**
 * Prometheus's own checks of a /metrics text (`promtool check metrics`, from Debian's
 * `prometheus` package), and a small reader of the text exposition for assertions.
 */
import { spawn, spawnSync } from "node:child_process";

const PROMTOOL = process.env.PROMTOOL ?? "promtool";

/** Fails with what to install when promtool is not on PATH. */
export function requirePromtool(): void {
  const probe = spawnSync(PROMTOOL, ["--version"], { stdio: "ignore" });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(
      `${PROMTOOL} not found: the /metrics tests need promtool (Debian: apt-get install ` +
        `prometheus; or set PROMTOOL to its path)`,
    );
  }
}

export interface PromtoolResult {
  code: number | null;
  /** Everything promtool said: parse errors and lint problems, one a line. */
  output: string;
}

/** Pipes the text to `promtool check metrics`, which exits 0 and says nothing when clean. */
export function promtoolCheck(text: string): Promise<PromtoolResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(PROMTOOL, ["check", "metrics"], { stdio: ["pipe", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, output: output.trim() }));
    child.stdin.end(text);
  });
}

export interface ParsedSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Every sample line of a text exposition (comments skipped). */
export function parseSamples(text: string): ParsedSample[] {
  const samples: ParsedSample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`Not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? "").matchAll(LABEL)) {
      labels[key] = value.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The families a text declares (its `# TYPE` lines), by name. */
export function declaredTypes(text: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (match) types.set(match[1], match[2]);
  }
  return types;
}

/** The samples of one family whose labels include `labels`. */
export function samplesOf(
  samples: readonly ParsedSample[],
  name: string,
  labels: Record<string, string> = {},
): ParsedSample[] {
  return samples.filter((sample) =>
    sample.name === name &&
    Object.entries(labels).every(([key, value]) => sample.labels[key] === value)
  );
}

/**
 * One series' value in a text exposition, the series written as Prometheus shows it
 * (`name` or `name{a="b",c="d"}`): the sample of that name whose labels are exactly those, the
 * process's `role` label aside. Undefined when there is none.
 */
export function seriesValue(text: string, series: string): number | undefined {
  const [wanted] = parseSamples(`${series} 0`);
  const keys = Object.keys(wanted.labels);
  const found = parseSamples(text).find((sample) => {
    if (sample.name !== wanted.name) return false;
    const own = Object.keys(sample.labels).filter((key) => key !== "role");
    return own.length === keys.length &&
      keys.every((key) => sample.labels[key] === wanted.labels[key]);
  });
  return found?.value;
}
