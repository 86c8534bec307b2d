/**
 * `npm run capacity`: sizes a cluster for docs/capacity.md's peak from the bench's record
 * (docs/measured/bench-latest.json, written by `npm run bench`) and prints it, each input with
 * the day, machine and command that measured it.
 *
 *   npm run capacity               print it
 *   npm run capacity -- --write    also put it in docs/capacity.md, between its markers
 *
 * It prints what it can; when an input is missing it names the suite and the bench command
 * that measures it, and exits 1.
 */
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { readRecord } from "../measured/record.ts";
import { CAPACITY_PAGE, withBlock } from "./doc.ts";
import { benchCommandFor, capacityReport, INPUT_SUITES } from "./report.ts";

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { write: { type: "boolean", default: false } } });
  const report = capacityReport(await readRecord());
  console.log(report.text);
  if (values.write) {
    await writeFile(CAPACITY_PAGE, withBlock(await readFile(CAPACITY_PAGE, "utf8"), report.text));
    process.stderr.write(`capacity: wrote the block of ${CAPACITY_PAGE}\n`);
  }
  if (report.missing.length > 0) {
    const suites = INPUT_SUITES.filter((suite) => report.missing.some((m) => m.suite === suite));
    process.stderr.write(
      `capacity: incomplete, the record lacks suite ${suites.join(" and ")}; ` +
        `run \`${benchCommandFor(suites)}\`\n`,
    );
    process.exitCode = 1;
  }
}

try {
  await main();
} catch (error) {
  // A broken record or page: one line, no stack.
  process.stderr.write(`capacity: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 2;
}
