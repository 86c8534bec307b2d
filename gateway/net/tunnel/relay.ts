/**
 * The tunnel relay: two directions, each reading into its own reusable buffer (small while the
 * direction is quiet, a relay buffer while it moves bulk) and writing what it read before it
 * reads again.
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

/**
 * Relays both ways until the tunnel ends, then calls `onEnd` once (after both legs closed).
 * Driven by callbacks rather than async loops or a promise of its own: an idle tunnel then holds
 * its two pending reads and little else, not a suspended frame per direction and per caller
 * (docs/performance.md, "Second round: what a tunnel allocates and keeps"). A throw from `onEnd`
 * is the caller's bug and is not caught here.
 */
export function relay(
  client: Leg,
  upstream: Leg,
  options: RelayOptions,
  onEnd: (result: RelayResult) => void,
): void {
  new Relay(client, upstream, options, onEnd).start();
}

/** One tunnel's relay: its two directions, how it ends, what it moved. */
class Relay {
  readonly client: Leg;
  readonly upstream: Leg;
  readonly options: RelayOptions;
  end: RelayEnd = RelayEnd.done;
  ending = false;
  toUpstreamBytes = 0;
  toClientBytes = 0;
  /** Directions that read their source to its end. */
  directionsEnded = 0;
  #directionsDone = 0;
  #closing: Promise<void>[] | undefined;
  readonly #onEnd: (result: RelayResult) => void;
  /** Made only with a signal to listen to (tunnels have none: their session closes the legs). */
  #onAbort: (() => void) | undefined;

  constructor(
    client: Leg,
    upstream: Leg,
    options: RelayOptions,
    onEnd: (result: RelayResult) => void,
  ) {
    this.client = client;
    this.upstream = upstream;
    this.options = options;
    this.#onEnd = onEnd;
  }

  start(): void {
    const signal = this.options.signal;
    if (signal !== undefined) {
      if (signal.aborted) this.#cancel();
      this.#onAbort = () => this.#cancel();
      signal.addEventListener("abort", this.#onAbort, { once: true });
    }
    new Direction(this, this.client, this.upstream, true).start(this.options.clientLeftover);
    new Direction(this, this.upstream, this.client, false).start(this.options.upstreamLeftover);
  }

  #cancel(): void {
    if (!this.ending) {
      this.ending = true;
      this.end = RelayEnd.cancelled;
    }
    this.client.close();
    this.upstream.close();
  }

  /** A leg failed: it closes at once, the other once its write under way is taken. */
  fail(failed: Leg, reason: RelayEnd): void {
    if (this.ending) return;
    this.ending = true;
    this.end = reason;
    failed.close();
    const other = failed === this.client ? this.upstream : this.client;
    (this.#closing ??= []).push(other.closeAfterWrites(this.options.drainMs ?? CLOSE_DRAIN_MS));
  }

  giveBack(buffer: Uint8Array): void {
    if (buffer.length === this.options.pool.sizeBytes) this.options.pool.give(buffer);
    else this.options.small?.give(buffer);
  }

  /** One direction finished (its buffers went back); the relay ends with the second. */
  directionDone(): void {
    if (++this.#directionsDone < 2) return;
    // Nearly every tunnel ends cleanly: no drain to wait for.
    const closing = this.#closing;
    if (closing === undefined) this.#finish();
    else Promise.all(closing).then(() => this.#finish(), () => this.#finish());
  }

  #finish(): void {
    if (this.#onAbort) this.options.signal?.removeEventListener("abort", this.#onAbort);
    this.client.close();
    this.upstream.close();
    this.#onEnd({
      end: this.end,
      toUpstreamBytes: this.toUpstreamBytes,
      toClientBytes: this.toClientBytes,
    });
  }
}

/** What a direction waits for. */
const Step = { read: 0, write: 1, closeWrite: 2 } as const;
type Step = (typeof Step)[keyof typeof Step];

/**
 * One direction: read from `from` into its buffer, hand the chunk on to `to`, again, until an
 * end of stream (passed on as a half-close while the other direction still runs) or a failure.
 * A small buffer while the direction moves little; a read that fills it moves it to a relay
 * buffer, and one that returns less than a small buffer holds moves it back.
 */
class Direction {
  readonly #relay: Relay;
  readonly #from: Leg;
  readonly #to: Leg;
  readonly #toUpstream: boolean;
  #bulk: boolean;
  #buffer: Uint8Array;
  /** The buffer given up, kept until the chunk that views it is written. */
  #spare: Uint8Array | undefined;
  #step: Step = Step.read;
  // Made once per direction and passed to every read and write (the only closures it holds).
  readonly #settled = (value: number | null | void): void => this.#onSettled(value);
  readonly #failed = (): void => this.#onFailed();

  constructor(relay: Relay, from: Leg, to: Leg, toUpstream: boolean) {
    this.#relay = relay;
    this.#from = from;
    this.#to = to;
    this.#toUpstream = toUpstream;
    const { pool, small } = relay.options;
    this.#bulk = small === undefined;
    this.#buffer = small === undefined ? pool.take() : small.take();
  }

  start(first: Uint8Array | undefined): void {
    if (first !== undefined && first.length > 0) this.#write(first);
    else this.#read();
  }

  #read(): void {
    this.#step = Step.read;
    this.#from.read(this.#buffer).then(this.#settled, this.#failed);
  }

  #write(chunk: Uint8Array): void {
    const relay = this.#relay;
    const length = chunk.length;
    if (this.#toUpstream) relay.toUpstreamBytes += length;
    else relay.toClientBytes += length;
    const onBytes = relay.options.onBytes;
    if (onBytes) {
      try {
        if (this.#toUpstream) onBytes(length, 0);
        else onBytes(0, length);
      } catch {
        // A meter's fault must not end the tunnel.
      }
    }
    this.#step = Step.write;
    this.#to.write(chunk).then(this.#settled, this.#failed);
  }

  #onSettled(value: number | null | void): void {
    switch (this.#step) {
      case Step.read: {
        const count = value as number | null;
        if (count === null) {
          // Each direction reads its source to the end before it ends, so neither leg holds
          // unread bytes when the second one ends, and closing both sends their end cleanly.
          if (++this.#relay.directionsEnded < 2) {
            this.#step = Step.closeWrite;
            this.#to.closeWrite().then(this.#settled, this.#failed);
          } else {
            this.#done();
          }
          return;
        }
        this.#write(this.#chunkOf(count));
        return;
      }
      case Step.write:
        if (this.#spare !== undefined) {
          this.#relay.giveBack(this.#spare);
          this.#spare = undefined;
        }
        this.#read();
        return;
      case Step.closeWrite:
        this.#done();
        return;
    }
  }

  #onFailed(): void {
    const relay = this.#relay;
    if (this.#step === Step.read) relay.fail(this.#from, endOf(relay, this.#from));
    else if (this.#step === Step.write) relay.fail(this.#to, endOf(relay, this.#to));
    this.#done();
  }

  /** The bytes read, moving between a small and a relay buffer by how full the read was. */
  #chunkOf(count: number): Uint8Array {
    const buffer = this.#buffer;
    const chunk = buffer.subarray(0, count);
    const { pool, small } = this.#relay.options;
    if (small !== undefined) {
      if (!this.#bulk && count === buffer.length) {
        this.#bulk = true;
        this.#spare = buffer;
        this.#buffer = pool.take();
      } else if (this.#bulk && count < small.sizeBytes) {
        this.#bulk = false;
        this.#spare = buffer;
        this.#buffer = small.take();
      }
    }
    return chunk;
  }

  /** Every read and write into these was awaited: none is pending any more. */
  #done(): void {
    this.#relay.giveBack(this.#buffer);
    if (this.#spare !== undefined) this.#relay.giveBack(this.#spare);
    this.#spare = undefined;
    this.#relay.directionDone();
  }
}

function endOf(relay: Relay, leg: Leg): RelayEnd {
  return leg === relay.client ? RelayEnd.client : RelayEnd.upstream;
}
