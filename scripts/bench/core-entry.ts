/**
 * One run of the gateway core's figures (core-measure.ts), printed as one JSON line. The
 * `gateway-core` suite runs it under Deno, the gateway's runtime, one fresh process per run:
 *
 *   DENO_NO_UPDATE_CHECK=1 npx deno run scripts/bench/core-entry.ts ['{"proxies":100000}']
 *   npx tsx scripts/bench/core-entry.ts                  # the same under Node
 *
 * The optional argument overrides the parameters (CORE_DEFAULTS).
 */
import { CORE_DEFAULTS, type CoreParameters, measureCore } from "./core-measure.ts";
import { entryArguments } from "./entry-args.ts";

const [overrides] = entryArguments();
const parameters: CoreParameters = {
  ...CORE_DEFAULTS,
  ...(overrides ? JSON.parse(overrides) as Partial<CoreParameters> : {}),
};
console.log(JSON.stringify(await measureCore(parameters)));
