/**
 * Where request metering (the next issue) plugs into the socket layer. A transfer begins when
 * the upstream answered or the tunnel came up, reports its bytes as they are handed on, and
 * is finished exactly once on every path; refusals are announced on their own. Receivers touch
 * only memory and never throw or wait: the socket layer calls them on the byte path.
 */
import type { Client, Outcome, Refusal, Target, UpstreamChoice } from "../core/contract.ts";

export interface TransferStart {
  kind: "http" | "connect";
  client: Client;
  target: Target;
  upstream: UpstreamChoice;
  /** Connect to first byte (or to the tunnel's 200). */
  latencyMs: number;
  /**
   * Ends the transfer now: its connector was blocked with the `interrupt` traffic action. The
   * client sees its tunnel closed, or its answer cut short and its connection closed.
   */
  interrupt?: () => void;
}

export interface TransferMeter {
  /** Bytes handed on since the last call, per direction. */
  bytes(toUpstreamBytes: number, toClientBytes: number): void;
  /** The transfer ended; `outcome` is what the router was told. */
  finish(outcome: Outcome): void;
}

export interface TransferHooks {
  begin(start: TransferStart): TransferMeter | undefined;
  /** A request refused before any transfer (the refusal's `rejection` names why). */
  rejected?(refusal: Refusal, client: Client | undefined, target: Target | undefined): void;
}

/** Calls a hook and swallows what it throws: metering must never break a transfer. */
export function safely<T>(call: () => T): T | undefined {
  try {
    return call();
  } catch {
    return undefined;
  }
}
