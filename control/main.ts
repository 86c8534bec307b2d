/**
 * The one entry of the control plane: `OCTOPROX_ROLE` (api, controller, worker or all) decides
 * what this process runs. Settings are checked first: a bad or missing one prints one line
 * naming the variable and exits 2. SIGTERM or SIGINT stops the node and exits 0; a second
 * signal exits at once.
 */
import { errorText } from "../shared/errors.ts";
import { type ControlSettings, parseControlSettings, SettingsError } from "../shared/settings.ts";
import { Node } from "./node/node.ts";

function fail(message: string, code: number): never {
  process.stderr.write(`octoprox: ${message}\n`);
  process.exit(code);
}

let settings: ControlSettings;
try {
  settings = parseControlSettings(process.env);
} catch (error) {
  if (error instanceof SettingsError) fail(error.message, 2);
  throw error;
}

const node = new Node({ settings });
const { logger } = node;
let stopping = false;

/** Flushes the asynchronous log destination, then exits. */
function exit(code: number): void {
  logger.flush(() => process.exit(code));
  // A flush that never calls back must not keep a stopped process alive.
  setTimeout(() => process.exit(code), 2000).unref();
}

async function stop(signal: NodeJS.Signals): Promise<void> {
  if (stopping) {
    process.stderr.write(`octoprox: ${signal} again; exiting without finishing the stop\n`);
    process.exit(1);
  }
  stopping = true;
  logger.info({ signal }, "Stop requested");
  await node.stop();
  exit(0);
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => void stop(signal));
}

process.on("uncaughtException", (error) => {
  logger.fatal({ error: errorText(error), stack: error.stack }, "Uncaught exception");
  void node.stop().finally(() => exit(1));
});
process.on("unhandledRejection", (reason) => {
  logger.fatal({ error: errorText(reason) }, "Unhandled rejection");
  void node.stop().finally(() => exit(1));
});

try {
  await node.start();
  logger.info({ address: node.url }, "Process ready");
  if (process.stdout.isTTY) {
    process.stdout.write(`Octoprox (role ${settings.role}) listening on ${node.url}\n`);
  }
} catch (error) {
  // A stop requested during the start ends the start; that is no failure.
  if (!stopping) {
    process.stderr.write(`octoprox: start failed: ${errorText(error)}\n`);
    exit(1);
  }
}
