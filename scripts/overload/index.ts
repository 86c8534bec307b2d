/**
 * `npm run overload -- gateway|api|worker|all [--duration 60s]`: each part loads one kind of
 * process past what it can take and prints its figures, each bound with pass or FAIL (the
 * bench's table). Not part of `npm test`: a run takes minutes and wants the machine to itself.
 * Loopback only; needs the test bed's Postgres and Redis, Deno, and tinyproxy.
 *
 *   gateway  2 x its measured capacity over more connections than it admits (gateway.ts)
 *   api      bursts of writes and of usage reads (api.ts)
 *   worker   a health backlog of 100,000 keys (worker.ts; --keys N for fewer)
 *
 * Exit status: 1 when a bound fails or a part fails, 2 on bad usage.
 */
import { availableParallelism, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { parseDuration } from "../loadgen/options.ts";
import { passes, type Row } from "../bench/suite.ts";
import { type Line, table } from "../bench/table.ts";
import type { OverloadContext } from "./context.ts";
import { overloadGateway } from "./gateway.ts";
import { overloadApi } from "./api.ts";
import { overloadWorker } from "./worker.ts";

const PARTS: Record<string, (context: OverloadContext) => Promise<Row[]>> = {
  gateway: overloadGateway,
  api: overloadApi,
  worker: overloadWorker,
};

function loadText(): string {
  return loadavg().map((l) => l.toFixed(2)).join(" / ");
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      duration: { type: "string", default: "60s" },
      keys: { type: "string", default: "100000" },
    },
  });
  const wanted = positionals.length === 0 || positionals.includes("all")
    ? Object.keys(PARTS)
    : positionals;
  const unknown = wanted.filter((name) => !(name in PARTS));
  if (unknown.length > 0) {
    process.stderr.write(
      `overload: unknown part ${unknown.join(", ")}; parts: gateway, api, worker, all\n`,
    );
    return 2;
  }
  const keys = Number(values.keys);
  if (!Number.isInteger(keys) || keys < 1) {
    process.stderr.write("overload: --keys must be a positive integer\n");
    return 2;
  }
  const context: OverloadContext = {
    durationMs: parseDuration(values.duration, "--duration"),
    healthKeys: keys,
    log: (message) => process.stderr.write(`${message}\n`),
  };
  const lines: Line[] = [];
  for (const name of wanted) {
    const started = performance.now();
    context.log(`== ${name} (load average ${loadText()})`);
    try {
      const rows = await PARTS[name](context);
      lines.push(...rows.map((row) => ({ suite: name, row })));
    } catch (error) {
      context.log(`${name} failed: ${error instanceof Error ? error.stack : String(error)}`);
      lines.push({
        suite: name,
        error: error instanceof Error ? error.message.split("\n")[0] : String(error),
      });
    }
    context.log(
      `== ${name} took ${((performance.now() - started) / 1000).toFixed(0)} s ` +
        `(load average ${loadText()})`,
    );
  }
  console.log(table(lines));
  console.log(`${availableParallelism()} cores; load average at the end ${loadText()}`);
  return lines.some((line) => line.error !== undefined || passes(line.row!) === false) ? 1 : 0;
}

try {
  process.exitCode = await main();
} catch (error) {
  process.stderr.write(`overload: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 2;
}
// Clients a part left open must not keep the process alive once the table is out.
process.exit(process.exitCode ?? 0);
