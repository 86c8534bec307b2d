/**
 * How the tunnel plane runs a program (commands.ts runs them for real under Deno): the contract
 * the endpoint and the rules depend on, in a file of its own so runtime-neutral code and tests
 * can take it without Deno.
 */

/** The programs, exactly those the gateway's `--allow-run` grants (scripts/gateway-command.ts). */
export const TUNNEL_PROGRAMS = ["ip", "wg", "nft", "wireguard-go", "conntrack", "openvpn"] as const;
export type TunnelProgram = (typeof TUNNEL_PROGRAMS)[number];

export interface CommandRunner {
  /** Runs `program args…` to its end; answers its stdout. Rejects with TunnelCommandError. */
  run(program: TunnelProgram, args: readonly string[], stdin?: string): Promise<string>;
}
