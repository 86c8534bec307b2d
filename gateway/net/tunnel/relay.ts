/**
 * The tunnel relay: two explicit read/write loops, one per direction, each with its own
 * reusable buffer. An end of stream is passed on as a half-close (a peer that finished sending
 * may still read the answer); the relay ends when both directions ended, or as soon as either
 * leg fails. The second end of stream is passed on by the close of both legs that follows it
 * rather than by a half-close first (Deno's close shuts the write side down itself: an awaited
 * runtime call fewer per tunnel, the same system calls). Then the failed leg closes at once and
 * the other once its write under way is taken, waiting at most 5 s (a peer that stopped reading
 * never takes it).
 */
import { type BufferPool, RELAY_BUFFER_BYTES } from "../io/buffers.ts";
import { CLOSE_DRAIN_MS, type Leg } from "../io/leg.ts";

export interface RelayOptions {
  /** Relay buffers (RELAY_BUFFER_BYTES), for a direction that moves bulk. */
  pool: BufferPool;
  /**
   * Small buffers each direction starts with (an idle tunnel holds only these); without it
   * both start with relay buffers.
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
    // A small buffer until a read fills it: then this direction moves bulk, and reads whole
    // relay buffers from there on.
    let small = options.small !== undefined;
    let buffer = small ? options.small!.take() : options.pool.take();
    taken.push(buffer);
    let chunk = first;
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
        if (small && count === buffer.length) {
          small = false;
          // Read into next; `chunk` still views the small one until it is written.
          buffer = options.pool.take();
          taken.push(buffer);
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
    }
  };

  // Every buffer a pump took, given back once both loops are over.
  const taken: Uint8Array[] = [];
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
    // Both loops are over: no read into these buffers is pending any more.
    for (const buffer of taken) {
      if (buffer.length === RELAY_BUFFER_BYTES) options.pool.give(buffer);
      else options.small?.give(buffer);
    }
  }
  return { end, toUpstreamBytes, toClientBytes };
}
