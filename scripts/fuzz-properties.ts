/**
 * `npm run fuzz`: the property tests of tests/fuzz/ with many more cases than `npm test` gives
 * them, and a fresh seed each round, printed before the round starts; a failure prints the
 * command that replays it (its seed, and fast-check's path to the shrunk case).
 *
 *   npm run fuzz                          every parser family, one round, a fresh seed
 *   npm run fuzz -- socks chunked         only the files whose names hold these words
 *   npm run fuzz -- --runs 100000         cases per property (default 10,000)
 *   npm run fuzz -- --minutes 30          rounds with fresh seeds until 30 minutes have passed
 *   npm run fuzz -- --seed 123456         one round with this seed (a replay)
 *
 * The exit status is 1 when a round fails; later rounds are not started then.
 */
import { spawn } from "node:child_process";
import { randomInt } from "node:crypto";
import { parseArgs } from "node:util";

const DEFAULT_RUNS = 10_000;

const { values, positionals } = parseArgs({
  options: {
    runs: { type: "string" },
    seed: { type: "string" },
    minutes: { type: "string" },
  },
  allowPositionals: true,
});

function integer(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    console.error(`--${name} takes a whole number, not "${text}"`);
    process.exit(2);
  }
  return value;
}

const runs = integer("runs", values.runs, DEFAULT_RUNS);
const minutes = integer("minutes", values.minutes, 0);
const fixedSeed = values.seed === undefined ? undefined : integer("seed", values.seed, 0);
// Vitest takes each as a part of a file's path.
const files = positionals.length > 0 ? positionals.map((word) => `tests/fuzz/${word}`) : [
  "tests/fuzz/",
];

interface Round {
  ok: boolean;
  output: string;
}

/** One vitest run of the properties with this seed; its output goes to ours as it comes. */
function round(seed: number): Promise<Round> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      "node_modules/.bin/vitest",
      // No per-test timeout: a property with many cases takes as long as it takes.
      ["run", "--testTimeout=0", ...files],
      {
        env: {
          ...process.env,
          OCTOPROX_FUZZ_RUNS: String(runs),
          OCTOPROX_FUZZ_SEED: String(seed),
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    const tee = (into: NodeJS.WriteStream) => (chunk: Buffer) => {
      output += chunk.toString();
      into.write(chunk);
    };
    child.stdout.on("data", tee(process.stdout));
    child.stderr.on("data", tee(process.stderr));
    child.on("error", reject);
    child.on("close", (code) => resolve({ ok: code === 0, output }));
  });
}

/** The replay command of each failed property (fast-check prints `{ seed: S, path: "P" }`). */
function replays(output: string): string[] {
  // deno-lint-ignore no-control-regex
  const plain = output.replace(/\u001b\[[0-9;]*m/g, "");
  const found = new Set<string>();
  for (const match of plain.matchAll(/\{ seed: (-?\d+), path: "([0-9:]+)"/g)) {
    found.add(
      `OCTOPROX_FUZZ_SEED=${match[1]} OCTOPROX_FUZZ_PATH=${match[2]} OCTOPROX_FUZZ_RUNS=${runs} ` +
        `npx vitest run ${files.join(" ")}`,
    );
  }
  return [...found];
}

async function main(): Promise<void> {
  const started = Date.now();
  const deadline = started + minutes * 60_000;
  let rounds = 0;
  for (;;) {
    const seed = fixedSeed ?? randomInt(1, 2 ** 31 - 1);
    rounds++;
    console.log(
      `\nfuzz round ${rounds}: seed ${seed}, ${runs} cases per property (${files.join(" ")})`,
    );
    const result = await round(seed);
    if (!result.ok) {
      console.error(`\nfuzz round ${rounds} FAILED with seed ${seed}. Replay:`);
      const commands = replays(result.output);
      for (const command of commands) console.error(`  ${command}`);
      if (commands.length === 0) {
        console.error(
          `  OCTOPROX_FUZZ_SEED=${seed} OCTOPROX_FUZZ_RUNS=${runs} npx vitest run ${
            files.join(" ")
          }`,
        );
      }
      process.exitCode = 1;
      return;
    }
    if (fixedSeed !== undefined || Date.now() >= deadline) break;
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  console.log(`\nfuzz: ${rounds} round(s) passed in ${seconds} s, ${runs} cases per property each`);
}

await main();
