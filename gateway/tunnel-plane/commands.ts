/**
 * The programs the tunnel endpoint runs (`ip`, `wg`, `nft`, `wireguard-go`), one way: the
 * command's input through stdin (keys never go on a command line, where `ps` would show them),
 * its output read whole, a non-zero exit thrown as a TunnelCommandError naming the program, its
 * arguments and what it wrote to stderr. The gateway's `--allow-run` names exactly these
 * programs (scripts/gateway-command.ts).
 */
import { TunnelCommandError } from "../../shared/errors.ts";

import type { CommandRunner } from "./command-runner.ts";

const decoder = new TextDecoder();

export const commandRunner: CommandRunner = {
  async run(program, args, stdin) {
    let output: Deno.CommandOutput;
    try {
      const child = new Deno.Command(program, {
        args: [...args],
        stdin: stdin === undefined ? "null" : "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      if (stdin !== undefined) {
        const writer = child.stdin.getWriter();
        await writer.write(new TextEncoder().encode(stdin));
        await writer.close();
      }
      output = await child.output();
    } catch (error) {
      throw new TunnelCommandError(`${program} ${args.join(" ")}: could not run`, undefined, {
        cause: error,
      });
    }
    if (!output.success) {
      const stderr = decoder.decode(output.stderr).trim().slice(0, 500);
      throw new TunnelCommandError(
        `${program} ${args.join(" ")}: exit ${output.code}${stderr === "" ? "" : `: ${stderr}`}`,
        output.code,
      );
    }
    return decoder.decode(output.stdout);
  },
};
