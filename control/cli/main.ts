/**
 * `octoprox`: the command-line tool over the admin API. Every failure ends here, as one
 * message on stderr and an exit status: 1 when the command failed (an API error, the API
 * unreachable), 2 when it was used wrong (commander's errors, a missing option).
 */
import { CommanderError } from "commander";
import { errorText } from "../../shared/errors.ts";
import { CliError, EXIT_FAILED, EXIT_USAGE } from "./errors.ts";
import { pc } from "./output.ts";
import { buildProgram } from "./program.ts";
import { closePrompts } from "./prompt.ts";

/** Commander's exits that are not mistakes: help asked for, the version. */
const CLEAN_EXITS = new Set(["commander.helpDisplayed", "commander.version"]);

export async function run(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv], { from: "user" });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander printed its message already.
      return CLEAN_EXITS.has(error.code) ? 0 : EXIT_USAGE;
    }
    if (error instanceof CliError) {
      process.stderr.write(`${pc.red("error:")} ${error.message}\n`);
      return error.exitCode;
    }
    process.stderr.write(`${pc.red("error:")} ${errorText(error)}\n`);
    if (process.env.OCTOPROX_DEBUG) console.error(error);
    return EXIT_FAILED;
  } finally {
    closePrompts();
  }
}

process.exitCode = await run(process.argv.slice(2));
