/**
 * proxy-loadgen (seed 001 §3.4) as a library: `runLoad` in this process, `runLoadInChild` in a
 * process of its own, the options and their command line, the histogram.
 */
export { bucketOf, bucketUpperBound, Histogram } from "./histogram.ts";
export {
  DEFAULTS,
  type LoadOptions,
  parseCommandLine,
  parseDuration,
  parseProxy,
  type ProxyAddress,
  Scenario,
  toCommandLine,
  UsageError,
} from "./options.ts";
export { ProtocolError, ResponseReader } from "./response.ts";
export {
  errorClass,
  formatReport,
  type LatencySummary,
  type LoadHooks,
  type LoadReport,
  runLoad,
} from "./run.ts";
export { runLoadInChild } from "./child.ts";
