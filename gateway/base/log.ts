/**
 * The gateway's logger: one JSON line per entry on standard output, the control plane's shape
 * (time, level, msg, instance, role) plus the caller's fields. Lines are queued and written by
 * one drain loop, so logging never waits on the terminal or journald; the queue is bounded and
 * lines over the bound are dropped and counted rather than held. Callers never pass secrets
 * (credentials, Proxy-Authorization, URL queries): nothing here can tell one apart.
 */
import { errorChainText } from "../../shared/errors.ts";

export const LogLevel = {
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  fatal: 60,
  silent: 100,
} as const;
export type LogLevelName = keyof typeof LogLevel;

export type LogFields = Readonly<Record<string, unknown>>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  fatal(msg: string, fields?: LogFields): void;
  /** Lines dropped because the queue was full. */
  readonly droppedLines: number;
  /** Resolves once every queued line is written (or could not be). */
  flush(): Promise<void>;
}

export interface LoggerOptions {
  level: LogLevelName;
  instance: string;
  role?: string;
  /** Where lines go; standard output by default. */
  write?: (bytes: Uint8Array) => Promise<number>;
  /** Queue bound (default 4 MiB). */
  maxQueuedBytes?: number;
}

const encoder = new TextEncoder();

/**
 * Errors become their message and their causes' (the runtime's own error is the cause of
 * ours): a stack in a JSON line helps no one reading journald.
 */
function plain(value: unknown): unknown {
  return value instanceof Error ? errorChainText(value) : value;
}

class JsonLineLogger implements Logger {
  readonly #threshold: number;
  readonly #instance: string;
  readonly #role: string;
  readonly #write: (bytes: Uint8Array) => Promise<number>;
  readonly #maxQueuedBytes: number;
  #queue: string[] = [];
  #queuedBytes = 0;
  #draining: Promise<void> | undefined;
  #dropped = 0;

  constructor(options: LoggerOptions) {
    this.#threshold = LogLevel[options.level];
    this.#instance = options.instance;
    this.#role = options.role ?? "gateway";
    this.#write = options.write ?? ((bytes) => Deno.stdout.write(bytes));
    this.#maxQueuedBytes = options.maxQueuedBytes ?? 4 * 1024 * 1024;
  }

  get droppedLines(): number {
    return this.#dropped;
  }

  debug(msg: string, fields?: LogFields): void {
    this.#log("debug", msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.#log("info", msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.#log("warn", msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.#log("error", msg, fields);
  }
  fatal(msg: string, fields?: LogFields): void {
    this.#log("fatal", msg, fields);
  }

  flush(): Promise<void> {
    return this.#draining ?? Promise.resolve();
  }

  #log(level: Exclude<LogLevelName, "silent">, msg: string, fields?: LogFields): void {
    if (LogLevel[level] < this.#threshold) return;
    const entry: Record<string, unknown> = {
      time: new Date().toISOString(),
      level,
      msg,
      instance: this.#instance,
      role: this.#role,
    };
    if (fields) {
      for (const key in fields) {
        if (!(key in entry)) entry[key] = plain(fields[key]);
      }
    }
    let line: string;
    try {
      line = `${JSON.stringify(entry)}\n`;
    } catch {
      line = `${JSON.stringify({ ...entry, fields: "[unserializable]" })}\n`;
    }
    if (this.#queuedBytes + line.length > this.#maxQueuedBytes) {
      this.#dropped++;
      return;
    }
    this.#queue.push(line);
    this.#queuedBytes += line.length;
    this.#draining ??= this.#drain();
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.join("");
        this.#queue = [];
        this.#queuedBytes = 0;
        let bytes = encoder.encode(batch);
        while (bytes.length > 0) {
          const written = await this.#write(bytes);
          bytes = bytes.subarray(written);
        }
      }
    } catch {
      // Standard output is gone (a closed pipe): nothing left to tell, and no one to tell it.
      this.#queue = [];
      this.#queuedBytes = 0;
    } finally {
      this.#draining = undefined;
    }
  }
}

export function createLogger(options: LoggerOptions): Logger {
  return new JsonLineLogger(options);
}

/** A logger that writes nothing (tests of pieces that need one). */
export const silentLogger: Logger = createLogger({
  level: "silent",
  instance: "silent",
  write: (bytes) => Promise.resolve(bytes.length),
});

/**
 * A writer that runs one whole write at a time, in call order: the main isolate's own lines and
 * those its worker isolates send it share standard output without cutting into each other.
 */
export function serialWriter(
  write: (bytes: Uint8Array) => Promise<number>,
): (bytes: Uint8Array) => Promise<number> {
  let tail: Promise<unknown> = Promise.resolve();
  return (bytes) => {
    const done = tail.then(async () => {
      let rest = bytes;
      while (rest.length > 0) rest = rest.subarray(await write(rest));
      return bytes.length;
    });
    // A failed write (standard output gone) must not stop the ones after it from trying.
    tail = done.catch(() => {});
    return done;
  };
}
