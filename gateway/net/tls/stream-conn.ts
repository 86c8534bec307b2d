/**
 * The two adapters between the runtime's connections and a TLS engine of `node:tls` (which both
 * Deno and Node run): `legDuplex` gives a connection the stream face `TLSSocket` wraps (with the
 * bytes the gateway already read put back in front), and `StreamConn` gives the decrypted side
 * the Deno.Conn face the gateway's legs use (gateway/net/io/leg.ts), so a request inside an
 * intercepted tunnel runs the same exchange as a forward one. The encrypted side goes through the
 * connection's own Leg (its whole writes, its close that is safe twice).
 *
 * Deno can start TLS as a client on a connection it holds (Deno.startTls) but not as a server,
 * and a listener's certificate is fixed at bind: a certificate per host needs `node:tls`.
 */
import { Duplex } from "node:stream";
import type { Leg } from "../io/leg.ts";

/** What one read off the connection may take (a TLS record is at most 16 KiB and a header). */
const READ_BYTES = 17 * 1024;

/**
 * Whether a connection ended from its peer's side (its end of stream, a reset), for those that
 * wait on a TLS engine over it: `node:tls` under Deno does not always pass the end of its
 * transport on (not during a handshake, not to a reader of the decrypted side), so legDuplex
 * says it here.
 */
export class PeerEnd {
  #ended = false;
  #listeners: (() => void)[] = [];

  /** Calls `listener` once the peer ended (at once when it has). */
  onEnd(listener: () => void): void {
    if (this.#ended) listener();
    else this.#listeners.push(listener);
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    const listeners = this.#listeners;
    this.#listeners = [];
    for (const listener of listeners) listener();
  }
}

/**
 * A stream over `leg`: reads only when the TLS engine asks (so nothing is read ahead of the
 * handshake), `first` delivered before the connection's own bytes; `peerEnd` is told when the
 * peer ends the connection.
 */
export function legDuplex(leg: Leg, first: Uint8Array, peerEnd?: PeerEnd): Duplex {
  let reading = false;
  // One buffer per connection, read into again only after the last read was copied out: what is
  // pushed is a copy of its size (a request is a few hundred bytes; the buffer is 17 KiB).
  const buffer = new Uint8Array(READ_BYTES);
  const duplex: Duplex = new Duplex({
    read() {
      if (reading) return;
      reading = true;
      leg.read(buffer).then(
        (count) => {
          reading = false;
          if (count === null) peerEnd?.end();
          duplex.push(count === null ? null : buffer.slice(0, count));
        },
        (error) => {
          reading = false;
          peerEnd?.end();
          duplex.destroy(error);
        },
      );
    },
    write(chunk: Uint8Array, _encoding, done) {
      leg.write(chunk).then(() => done(), done);
    },
    final(done) {
      leg.closeWrite().then(() => done());
    },
    destroy(error, done) {
      leg.close();
      done(error);
    },
  });
  if (first.length > 0) duplex.unshift(first);
  return duplex;
}

interface Waiter {
  resolve: () => void;
}

/**
 * A Deno.Conn face over a stream in paused mode (a `TLSSocket` once its handshake is done):
 * reads take what the stream holds, waiting for more; writes resolve once the stream took the
 * bytes (the caller reuses its buffer after). Only what the gateway's legs use is real; the
 * rest of Deno.Conn throws.
 */
export class StreamConn {
  readonly remoteAddr: Deno.NetAddr;
  readonly localAddr: Deno.NetAddr;
  readonly #stream: Duplex;
  /** Bytes read off the stream that did not fit the last caller's buffer. */
  #rest: Uint8Array | undefined;
  #ended = false;
  #error: unknown;
  #waiter: Waiter | undefined;
  #closed = false;

  constructor(
    stream: Duplex,
    remoteAddr: Deno.NetAddr,
    localAddr: Deno.NetAddr,
    peerEnd?: PeerEnd,
  ) {
    this.#stream = stream;
    this.remoteAddr = remoteAddr;
    this.localAddr = localAddr;
    peerEnd?.onEnd(() => this.transportEnded());
    const wake = () => {
      const waiter = this.#waiter;
      this.#waiter = undefined;
      waiter?.resolve();
    };
    stream.on("readable", wake);
    stream.on("end", () => {
      this.#ended = true;
      wake();
    });
    stream.on("error", (error) => {
      this.#error ??= error;
      wake();
    });
    stream.on("close", () => {
      this.#ended = true;
      wake();
    });
  }

  /** The transport under the stream ended: what the stream holds is still read, then the end. */
  transportEnded(): void {
    if (this.#ended) return;
    this.#ended = true;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.resolve();
  }

  /** The first failure the stream reported (a TLS alert, a reset), if any. */
  get error(): unknown {
    return this.#error;
  }

  async read(buffer: Uint8Array): Promise<number | null> {
    for (;;) {
      let chunk = this.#rest;
      this.#rest = undefined;
      if (chunk === undefined && !this.#closed) {
        const taken = this.#stream.read() as Uint8Array | null;
        if (taken !== null) chunk = taken;
      }
      if (chunk !== undefined && chunk.length > 0) {
        const count = Math.min(chunk.length, buffer.length);
        buffer.set(count === chunk.length ? chunk : chunk.subarray(0, count));
        if (count < chunk.length) this.#rest = chunk.subarray(count);
        return count;
      }
      if (this.#error !== undefined) throw this.#error;
      if (this.#ended || this.#closed) return null;
      await new Promise<void>((resolve) => this.#waiter = { resolve });
    }
  }

  write(bytes: Uint8Array): Promise<number> {
    if (this.#closed) return Promise.reject(new Deno.errors.BadResource("Connection closed"));
    // A writable calls back once the chunk was processed (encrypted and passed on), never
    // before: the caller may then reuse its buffer.
    return new Promise((resolve, reject) => {
      this.#stream.write(bytes, (error) => error ? reject(error) : resolve(bytes.length));
    });
  }

  closeWrite(): Promise<void> {
    return new Promise((resolve) => {
      if (this.#closed) return resolve();
      this.#stream.end(() => resolve());
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#stream.destroy();
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.resolve();
  }
}
