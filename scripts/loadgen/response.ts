/**
 * An incremental HTTP/1.x response reader for the load generator: fed the socket's chunks as
 * they come, it says when one whole response has arrived (head, then a body framed by
 * Content-Length, chunked coding, or the connection's close), its status, and whether the
 * connection may carry another request. Interim 1xx answers are skipped.
 */

export class ProtocolError extends Error {
  override name = "ProtocolError";
}

const CRLFCRLF = Buffer.from("\r\n\r\n");
const MAX_HEAD_BYTES = 64 * 1024;

const State = {
  head: 0,
  length: 1,
  chunkSize: 2,
  chunkData: 3,
  chunkDataEnd: 4,
  trailer: 5,
  untilClose: 6,
  done: 7,
} as const;
type State = (typeof State)[keyof typeof State];

export class ResponseReader {
  /** The status of the response read (0 until its head is in). */
  status = 0;
  /** The connection may carry another request after this response. */
  keepAlive = true;
  #state: State = State.head;
  #head: Buffer | undefined;
  #remaining = 0;
  #line: Buffer | undefined;
  readonly #head0: boolean;
  readonly #connect: boolean;
  /** The body's pieces, when asked to keep it. */
  readonly #body: Buffer[] | undefined;

  /**
   * `head`: the request was HEAD; `connect`: a CONNECT, whose 2xx answer starts a tunnel;
   * `keepBody`: keep the body's bytes for `body` (the extraction scenario reads its answers).
   */
  constructor(options: { head?: boolean; connect?: boolean; keepBody?: boolean } = {}) {
    this.#head0 = options.head ?? false;
    this.#connect = options.connect ?? false;
    this.#body = options.keepBody ? [] : undefined;
  }

  /** The body read so far (empty unless `keepBody`). */
  get body(): Buffer {
    return this.#body === undefined ? Buffer.alloc(0) : Buffer.concat(this.#body);
  }

  #keep(chunk: Buffer, start: number, end: number): void {
    this.#body?.push(chunk.subarray(start, end));
  }

  get done(): boolean {
    return this.#state === State.done;
  }

  /** Whether the body runs until the connection closes (then `end()` completes it). */
  get untilClose(): boolean {
    return this.#state === State.untilClose;
  }

  /** The peer closed: completes a body that runs until close, else it was cut short. */
  end(): boolean {
    if (this.#state === State.untilClose) {
      this.#state = State.done;
      return true;
    }
    return this.#state === State.done;
  }

  /**
   * Feeds bytes; answers how many it used (fewer than given once the response is complete: the
   * rest belongs to what follows, e.g. a tunnel's first bytes).
   */
  feed(chunk: Buffer): number {
    let offset = 0;
    while (offset < chunk.length && this.#state !== State.done) {
      switch (this.#state) {
        case State.head: {
          const used = this.#readHead(chunk, offset);
          offset += used;
          break;
        }
        case State.length: {
          const take = Math.min(this.#remaining, chunk.length - offset);
          this.#keep(chunk, offset, offset + take);
          this.#remaining -= take;
          offset += take;
          if (this.#remaining === 0) this.#state = State.done;
          break;
        }
        case State.untilClose:
          this.#keep(chunk, offset, chunk.length);
          return chunk.length;
        case State.chunkSize:
        case State.trailer:
        case State.chunkDataEnd: {
          const end = chunk.indexOf(10, offset); // LF
          const piece = chunk.subarray(offset, end < 0 ? chunk.length : end + 1);
          this.#line = this.#line ? Buffer.concat([this.#line, piece]) : piece;
          offset += piece.length;
          if (this.#line.length > 4096) throw new ProtocolError("chunk line too long");
          if (end < 0) break;
          const line = this.#line.toString("latin1").replace(/\r?\n$/, "");
          this.#line = undefined;
          this.#chunkLine(line);
          break;
        }
        case State.chunkData: {
          const take = Math.min(this.#remaining, chunk.length - offset);
          this.#keep(chunk, offset, offset + take);
          this.#remaining -= take;
          offset += take;
          if (this.#remaining === 0) this.#state = State.chunkDataEnd;
          break;
        }
      }
    }
    // A response whose head ended exactly at the chunk's end may need no body.
    if (this.#state === State.length && this.#remaining === 0) this.#state = State.done;
    return offset;
  }

  #chunkLine(line: string): void {
    if (this.#state === State.chunkDataEnd) {
      if (line !== "") throw new ProtocolError("chunk not followed by CRLF");
      this.#state = State.chunkSize;
      return;
    }
    if (this.#state === State.trailer) {
      if (line === "") this.#state = State.done;
      return;
    }
    const size = parseInt(line.split(";")[0].trim(), 16);
    if (!Number.isFinite(size) || size < 0) throw new ProtocolError("bad chunk size");
    if (size === 0) this.#state = State.trailer;
    else {
      this.#remaining = size;
      this.#state = State.chunkData;
    }
  }

  /** Reads head bytes from `offset`; answers how many it took. */
  #readHead(chunk: Buffer, offset: number): number {
    let end: number;
    let used: number;
    let head: Buffer;
    if (this.#head === undefined) {
      end = chunk.indexOf(CRLFCRLF, offset);
      if (end < 0) {
        this.#head = Buffer.from(chunk.subarray(offset));
        this.#checkHeadSize();
        return chunk.length - offset;
      }
      head = chunk.subarray(offset, end);
      used = end + 4 - offset;
    } else {
      // Joined with what came before; the terminator may straddle the two.
      const joined = Buffer.concat([this.#head, chunk.subarray(offset)]);
      end = joined.indexOf(CRLFCRLF, Math.max(0, this.#head.length - 3));
      if (end < 0) {
        this.#head = joined;
        this.#checkHeadSize();
        return chunk.length - offset;
      }
      used = end + 4 - this.#head.length;
      head = joined.subarray(0, end);
      this.#head = undefined;
    }
    this.#parseHead(head.toString("latin1"));
    return used;
  }

  #checkHeadSize(): void {
    if (this.#head!.length > MAX_HEAD_BYTES) throw new ProtocolError("response head too large");
  }

  #parseHead(text: string): void {
    const lineEnd = text.indexOf("\r\n");
    const statusLine = lineEnd < 0 ? text : text.slice(0, lineEnd);
    const match = /^HTTP\/1\.([01]) (\d{3})/.exec(statusLine);
    if (!match) throw new ProtocolError(`not an HTTP response: ${statusLine.slice(0, 60)}`);
    const status = Number(match[2]);
    const http10 = match[1] === "0";
    let length: number | undefined;
    let chunked = false;
    let connection = "";
    if (lineEnd >= 0) {
      for (const line of text.slice(lineEnd + 2).split("\r\n")) {
        const colon = line.indexOf(":");
        if (colon <= 0) continue;
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        if (name === "content-length") {
          length = Number(value);
          if (!Number.isInteger(length) || length < 0) {
            throw new ProtocolError("bad Content-Length");
          }
        } else if (name === "transfer-encoding") {
          chunked = value.toLowerCase().split(",").map((t) => t.trim()).includes("chunked");
        } else if (name === "connection" || name === "proxy-connection") {
          connection += `${value.toLowerCase()},`;
        }
      }
    }
    if (status >= 100 && status < 200 && status !== 101) {
      // Interim: the real response follows.
      return;
    }
    this.status = status;
    const tokens = connection.split(",").map((t) => t.trim());
    this.keepAlive = http10 ? tokens.includes("keep-alive") : !tokens.includes("close");
    if (
      this.#head0 || (this.#connect && status >= 200 && status < 300) || status === 204 ||
      status === 304 ||
      (status >= 100 && status < 200)
    ) {
      this.#state = State.done;
    } else if (chunked) {
      this.#state = State.chunkSize;
    } else if (length !== undefined) {
      this.#remaining = length;
      this.#state = length === 0 ? State.done : State.length;
    } else {
      this.#state = State.untilClose;
      this.keepAlive = false;
    }
  }
}
