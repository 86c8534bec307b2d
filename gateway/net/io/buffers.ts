/**
 * Reusable read buffers. Relays read into a buffer of their own and write the filled part
 * before reading again, so one buffer per direction serves a whole transfer; giving it back
 * afterwards spares the allocator (and the GC) a 32 KiB array per tunnel.
 */

export const RELAY_BUFFER_BYTES = 32 * 1024;
/**
 * What an idle client connection holds while it waits for a head. Small, since idle
 * connections are many; pooled, since a new typed array costs the runtime more than a whole
 * head's parse.
 */
export const SMALL_BUFFER_BYTES = 4096;
/**
 * What each direction of a tunnel reads into while it moves little: all an idle tunnel holds
 * (two of them; its session's head buffer went back). A read that fills it moves the direction
 * to a relay buffer; one that returns less than this moves it back, so a tunnel that went
 * quiet does not keep 64 KiB. A first flight bigger than this costs one read more.
 */
export const TUNNEL_START_BUFFER_BYTES = 1024;

export class BufferPool {
  readonly sizeBytes: number;
  readonly maxKept: number;
  readonly #free: Uint8Array[] = [];

  constructor(sizeBytes: number = RELAY_BUFFER_BYTES, maxKept = 1024) {
    this.sizeBytes = sizeBytes;
    this.maxKept = maxKept;
  }

  take(): Uint8Array {
    return this.#free.pop() ?? new Uint8Array(this.sizeBytes);
  }

  /**
   * Takes a buffer back. Only once no read into it is pending: a read that is still running
   * would write into the next owner's bytes.
   */
  give(buffer: Uint8Array): void {
    if (buffer.byteLength === this.sizeBytes && this.#free.length < this.maxKept) {
      this.#free.push(buffer);
    }
  }

  get kept(): number {
    return this.#free.length;
  }
}
