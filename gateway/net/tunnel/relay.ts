/**
 * The tunnel relay: two explicit read/write loops, one per direction, each with its own
 * reusable buffer (small while the direction is quiet, a relay buffer while it moves bulk).
 * An end of stream is passed on as a half-close (a peer that finished sending may still read
 * the answer); the relay ends when both directions ended, or as soon as either
 * leg fails. The second end of stream is passed on by the close of both legs that follows it
 * rather than by a half-close first (Deno's close shuts the write side down itself: an awaited
 * runtime call fewer per tunnel, the same system calls). Then the failed leg closes at once and
 * the other once its write under way is taken, waiting at most 5 s (a peer that stopped reading
 * never takes it).
 */
import type { BufferPool } from "../io/buffers.ts";
import { CLOSE_DRAIN_MS, type Leg } from "../io/leg.ts";

export interface RelayOptions {
  /** Relay buffers (RELAY_BUFFER_BYTES), for a direction that moves bulk. */
  pool: BufferPool;
  /**
   * Small buffers (TUNNEL_START_BUFFER_BYTES) each direction reads into while it moves little
   * (all an idle tunnel holds); without it both read into relay buffers throughout.
   */
  small?: BufferPool;
  /** Bytes the client sent that are already the target's (after its CONNECT head). */
  clientLeftover?: Uint8Array;
  /** Bytes that came after the upstream's handshake reply. */
  upstreamLeftover?: Uint8Array;
  /** Called for each chunk handed on, before it is written (a chunk cut mid-write counts). */
  onBytes?: (toUpstreamBytes: number, toClientBytes: number) => void;
  /** Ends the relay at once (the gateway stopping). */
  signal?: AbortSignal;
  drainMs?: number;
}

export const RelayEnd = {
  /** Both directions ended with an end of stream. */
  done: "done",
  client: "client_failed",
  upstream: "upstream_failed",
  cancelled: "cancelled",
} as const;
export type RelayEnd = (typeof RelayEnd)[keyof typeof RelayEnd];

export interface RelayResult {
  end: RelayEnd;
  toUpstreamBytes: number;
  toClientBytes: number;
}

export async function relay(
  client: Leg,
  upstream: Leg,
  options: RelayOptions,
): Promise<RelayResult> {
  const drainMs = options.drainMs ?? CLOSE_DRAIN_MS;
  const onBytes = options.onBytes;
  let end: RelayEnd = RelayEnd.done;
  let ending = false;
  let toUpstreamBytes = 0;
  let toClientBytes = 0;
  let directionsEnded = 0;
  const closing: Promise<void>[] = [];

  const fail = (failed: Leg, reason: RelayEnd) => {
    if (ending) return;
    ending = true;
    end = reason;
    failed.close();
    const other = failed === client ? upstream : client;
    closing.push(other.closeAfterWrites(drainMs));
  };
  const cancel = () => {
    if (!ending) {
      ending = true;
      end = RelayEnd.cancelled;
    }
    client.close();
    upstream.close();
  };
  if (options.signal?.aborted) cancel();
  options.signal?.addEventListener("abort", cancel, { once: true });

  const pump = async (
    from: Leg,
    to: Leg,
    first: Uint8Array | undefined,
    toUpstream: boolean,
  ): Promise<void> => {
    const fromEnd = from === client ? RelayEnd.client : RelayEnd.upstream;
    const toEnd = to === client ? RelayEnd.client : RelayEnd.upstream;
    const pool = options.pool;
    const small = options.small;
    // A small buffer while the direction moves little; a read that fills it moves it to a
    // relay buffer, and one that returns less than a small buffer holds moves it back.
    let bulk = small === undefined;
    let buffer = bulk ? pool.take() : small!.take();
    // The buffer given up, kept until the chunk that views it is written.
    let spare: Uint8Array | undefined;
    let chunk = first;
    try {
      for (;;) {
        if (chunk === undefined || chunk.length === 0) {
          let count: number | null;
          try {
            count = await from.read(buffer);
          } catch {
            fail(from, fromEnd);
            return;
          }
          if (count === null) {
            // Each direction reads its source to the end before it ends, so neither leg holds
            // unread bytes when the second one ends, and closing both sends their end cleanly.
            if (++directionsEnded < 2) await to.closeWrite();
            return;
          }
          chunk = buffer.subarray(0, count);
          if (small !== undefined) {
            if (!bulk && count === buffer.length) {
              bulk = true;
              spare = buffer;
              buffer = pool.take();
            } else if (bulk && count < small.sizeBytes) {
              bulk = false;
              spare = buffer;
              buffer = small.take();
            }
          }
        }
        if (toUpstream) toUpstreamBytes += chunk.length;
        else toClientBytes += chunk.length;
        if (onBytes) {
          try {
            if (toUpstream) onBytes(chunk.length, 0);
            else onBytes(0, chunk.length);
          } catch {
            // A meter's fault must not end the tunnel.
          }
        }
        try {
          await to.write(chunk);
        } catch {
          fail(to, toEnd);
          return;
        }
        chunk = undefined;
        if (spare !== undefined) {
          giveBack(spare);
          spare = undefined;
        }
      }
    } finally {
      // The loop awaited its every read and write: none into these is pending any more.
      giveBack(buffer);
      if (spare !== undefined) giveBack(spare);
    }
  };
  const giveBack = (buffer: Uint8Array) => {
    if (buffer.length === options.pool.sizeBytes) options.pool.give(buffer);
    else options.small?.give(buffer);
  };

  try {
    await Promise.all([
      pump(client, upstream, options.clientLeftover, true),
      pump(upstream, client, options.upstreamLeftover, false),
    ]);
    // Nearly every tunnel ends cleanly: no drain to wait for, and no await more.
    if (closing.length > 0) await Promise.all(closing);
  } finally {
    options.signal?.removeEventListener("abort", cancel);
    client.close();
    upstream.close();
  }
  return { end, toUpstreamBytes, toClientBytes };
}
