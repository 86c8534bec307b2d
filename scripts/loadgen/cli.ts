/**
 * `npm run loadgen -- --proxy http://user:pass@127.0.0.1:8080 --url http://127.0.0.1:9000/ ...`:
 * proxy-loadgen on the command line (options: `--help`, or scripts/loadgen/options.ts). Prints
 * a short report, or with `--json` the report as one JSON object (what the benchmarks read).
 * Exit status: 0 when every counted request was answered, 1 when some failed, 2 on bad usage.
 */
import { parseCommandLine, USAGE, UsageError } from "./options.ts";
import { formatReport, runLoad } from "./run.ts";

try {
  const command = parseCommandLine(process.argv.slice(2));
  if (command.help) {
    process.stdout.write(USAGE);
  } else {
    // With --json, the window's start and end go out as they happen (the benchmarks read the
    // other processes' CPU then), and the report is the last line.
    const report = await runLoad(
      command.options,
      command.json
        ? { onWindow: (phase) => process.stdout.write(`${JSON.stringify({ window: phase })}\n`) }
        : {},
    );
    process.stdout.write(
      command.json ? `${JSON.stringify(report)}\n` : `${formatReport(report)}\n`,
    );
    process.exitCode = report.ok === report.requests && report.requests > 0 ? 0 : 1;
  }
} catch (error) {
  if (error instanceof UsageError) {
    process.stderr.write(`proxy-loadgen: ${error.message}\n\n${USAGE}`);
    process.exitCode = 2;
  } else {
    throw error;
  }
}
