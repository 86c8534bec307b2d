/**
 * Where a device's redirected connection was going. The redirect rewrote the destination to the
 * transparent listener, and Deno can neither ask the socket for the original one (SO_ORIGINAL_DST)
 * nor read /proc/net/nf_conntrack (it refuses every /proc path short of --allow-all), so the
 * kernel's connection tracking table, which keeps each connection's original tuple, is listed
 * with `conntrack -L` (conntrack-tools), narrowed by the kernel to the connections from the
 * tunnel subnet that were redirected to the listener's port: one line per connection, the
 * original direction's `src= dst= sport= dport=` first.
 *
 * Two ways, one behind the other: the kernel's events of new connections (`conntrack -E`,
 * ConntrackEvents), which come at the SYN, before the listener can accept, so a lookup is
 * answered from memory; and for a connection whose event did not come, the listing (`conntrack
 * -L`, ConntrackTable), whose lookups arriving together share one listing. The entry exists
 * before the listener can accept (the kernel made it at the SYN); a lookup that finds it in
 * neither is answered undefined, and the connection is closed.
 */

/** The `conntrack` arguments listing the connections from `subnet` redirected to `port`. */
export function conntrackListing(subnet: string, port: number): string[] {
  return ["-L", "-p", "tcp", "--orig-src", subnet, "--reply-port-src", String(port)];
}

export interface OriginalDestination {
  address: string;
  port: number;
}

interface Waiting {
  key: string;
  resolve(found: OriginalDestination | undefined): void;
}

/** `read` answers the table's lines (the plane runs `conntrack`; a test passes its own). */
export class ConntrackTable {
  readonly #read: () => Promise<string>;
  #waiting: Waiting[] = [];
  #reading: Promise<void> | undefined;
  #lastError: string | undefined;

  constructor(read: () => Promise<string>) {
    this.#read = read;
  }

  /** Why the last read failed; undefined when it did not. */
  get lastError(): string | undefined {
    return this.#lastError;
  }

  /** The original destination of the TCP connection from `peerAddress:peerPort`. Never rejects. */
  lookup(peerAddress: string, peerPort: number): Promise<OriginalDestination | undefined> {
    return new Promise((resolve) => {
      this.#waiting.push({ key: `${peerAddress} ${peerPort}`, resolve });
      // A turn later: the lookups of connections accepted in this turn join the same read.
      this.#reading ??= Promise.resolve().then(() => this.#drain());
    });
  }

  async #drain(): Promise<void> {
    while (this.#waiting.length > 0) {
      const batch = this.#waiting;
      this.#waiting = [];
      let text = "";
      try {
        text = await this.#read();
        this.#lastError = undefined;
      } catch (error) {
        // Unreadable (no conntrack, no permission): every connection of the batch is closed.
        this.#lastError = error instanceof Error ? error.message : String(error);
      }
      const wanted = new Map<string, Waiting[]>();
      for (const waiting of batch) {
        const list = wanted.get(waiting.key);
        if (list === undefined) wanted.set(waiting.key, [waiting]);
        else list.push(waiting);
      }
      for (const [key, found] of findOriginals(text, wanted)) {
        for (const waiting of wanted.get(key) ?? []) waiting.resolve(found);
        wanted.delete(key);
      }
      for (const list of wanted.values()) for (const waiting of list) waiting.resolve(undefined);
    }
    this.#reading = undefined;
  }
}

/** The original destinations of the wanted `source port` keys found in the table's text. */
export function findOriginals(
  text: string,
  wanted: ReadonlyMap<string, unknown>,
): Map<string, OriginalDestination> {
  const found = new Map<string, OriginalDestination>();
  let start = 0;
  while (start < text.length && found.size < wanted.size) {
    let end = text.indexOf("\n", start);
    if (end === -1) end = text.length;
    const parsed = parseConnection(text.slice(start, end));
    start = end + 1;
    if (parsed !== undefined && wanted.has(parsed.key)) found.set(parsed.key, parsed.original);
  }
  return found;
}

/**
 * One connection's line, of the listing (`tcp 6 …`), of /proc's table (`ipv4 2 tcp 6 …`) or of
 * the event stream (`[NEW] tcp 6 …`): its `source port` key and original destination. TCP over
 * IPv4 only, which is all the tunnel carries to the listener.
 */
export function parseConnection(
  raw: string,
): { key: string; original: OriginalDestination } | undefined {
  let line = raw.trimStart();
  if (line.startsWith("[")) line = line.slice(line.indexOf("]") + 1).trimStart();
  if (!(line.startsWith("tcp ") || line.startsWith("ipv4 ") && line.includes(" tcp "))) {
    return undefined;
  }
  const src = field(line, "src=", 0);
  const sport = field(line, "sport=", 0);
  if (src === undefined || sport === undefined) return undefined;
  const dst = field(line, "dst=", src.end);
  const port = Number(field(line, "dport=", sport.end)?.value);
  if (dst === undefined || !Number.isInteger(port)) return undefined;
  return { key: `${src.value} ${sport.value}`, original: { address: dst.value, port } };
}

/** How long a redirected connection's event is kept for its accept (a SYN never completed). */
const EVENT_KEPT_MS = 30_000;
/** Events kept at most: the oldest go first. */
const MAX_EVENTS = 65_536;

/**
 * The original destinations the kernel announced as connections were made (`conntrack -E`, fed
 * line by line by conntrack-events.ts): a connection's event comes at its SYN, before the
 * listener can accept it, so a lookup is answered from memory, without a listing. A lookup whose
 * event has not come waits `waitMs` for it, then asks `fallback` (the listing): an event lost
 * (a full socket buffer) or a stream down costs one listing, never a wrong answer.
 */
export class ConntrackEvents {
  readonly #fallback: (address: string, port: number) => Promise<OriginalDestination | undefined>;
  readonly #waitMs: number;
  readonly #nowMs: () => number;
  /** By key, oldest first. */
  #known = new Map<string, { original: OriginalDestination; atMs: number }>();
  readonly #waiting = new Map<string, (found: OriginalDestination) => void>();
  #fromEvents = 0;
  #fromFallback = 0;

  constructor(options: {
    fallback(address: string, port: number): Promise<OriginalDestination | undefined>;
    waitMs?: number;
    nowMs?: () => number;
  }) {
    this.#fallback = options.fallback;
    this.#waitMs = options.waitMs ?? 50;
    this.#nowMs = options.nowMs ?? Date.now;
  }

  /** Lookups answered by an event, and by the fallback. */
  get counts(): { events: number; fallback: number } {
    return { events: this.#fromEvents, fallback: this.#fromFallback };
  }

  /** One line of the event stream. */
  feed(line: string): void {
    const parsed = parseConnection(line);
    if (parsed === undefined) return;
    const waiting = this.#waiting.get(parsed.key);
    if (waiting !== undefined) {
      this.#waiting.delete(parsed.key);
      waiting(parsed.original);
      return;
    }
    const nowMs = this.#nowMs();
    this.#known.delete(parsed.key);
    this.#known.set(parsed.key, { original: parsed.original, atMs: nowMs });
    for (const [key, kept] of this.#known) {
      if (this.#known.size <= MAX_EVENTS && nowMs - kept.atMs < EVENT_KEPT_MS) break;
      this.#known.delete(key);
    }
  }

  /** The original destination of the connection from `address:port`; never rejects. */
  lookup(address: string, port: number): Promise<OriginalDestination | undefined> {
    const key = `${address} ${port}`;
    const kept = this.#known.get(key);
    if (kept !== undefined) {
      this.#known.delete(key);
      this.#fromEvents++;
      return Promise.resolve(kept.original);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(key);
        this.#fromFallback++;
        this.#fallback(address, port).then(resolve, () => resolve(undefined));
      }, this.#waitMs);
      this.#waiting.set(key, (found) => {
        clearTimeout(timer);
        this.#fromEvents++;
        resolve(found);
      });
    });
  }
}

/** The value after the first `name` at or past `from`, up to the next space. */
function field(
  line: string,
  name: string,
  from: number,
): { value: string; end: number } | undefined {
  const at = line.indexOf(` ${name}`, from);
  if (at === -1) return undefined;
  const begin = at + 1 + name.length;
  let end = line.indexOf(" ", begin);
  if (end === -1) end = line.length;
  return { value: line.slice(begin, end), end };
}
