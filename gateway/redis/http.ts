/**
 * The HTTP transport: the gateway's Redis interface (shared/redis/contract.ts) over the Upstash
 * REST protocol, with `@upstash/redis` building the commands, pipelines (`/pipeline`) and
 * transactions (`/multi-exec`), and our requester (rest-requester.ts) carrying them.
 *
 * Each call is translated to the package's typed form and its answer back to what ioredis answers
 * (strings, numbers, arrays, null; bytes where the interface asks for bytes), so a module cannot
 * tell the transports apart. What differs, and costs:
 * - No blocking reads: the feed is polled (gateway/feed/follower.ts), `xread` never blocks.
 * - Every command or batch is one HTTP request: the writers' batches stay one round trip each,
 *   and the request path's single reads (a sticky binding, a preflight verdict) cost one request
 *   each, as they cost one round trip over TCP.
 * - Scripts run by EVALSHA, and by EVAL once when the endpoint's Redis lacks the script, as on
 *   TCP (shared/lua/loader.ts).
 */
import { Redis as UpstashRedis, type Requester } from "@upstash/redis";
import type {
  BatchReplies,
  GatewayRedis,
  RedisBatch,
  StreamEntry,
} from "../../shared/redis/contract.ts";
import type { RestValue } from "./rest-requester.ts";

/** The package's client, keeping answers as the requester decoded them (bytes). */
class RawUpstash extends UpstashRedis {
  constructor(requester: Requester) {
    super(requester);
    // No JSON parsing of answers: the adapter below gives them their types.
    this.opts = { automaticDeserialization: false };
  }
}

type Pipeline = ReturnType<UpstashRedis["pipeline"]>;

const decoder = new TextDecoder();

/** A string answer as text ("OK" comes unencoded). */
function text(value: unknown): string {
  if (value instanceof Uint8Array) return decoder.decode(value);
  if (typeof value === "string" || typeof value === "number") return String(value);
  throw new TypeError(`Redis answered ${describe(value)} where a string was expected`);
}

function textOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : text(value);
}

/** A script's or a command's answer in ioredis's terms: strings for bytes, at any depth. */
function plain(value: unknown): unknown {
  if (value instanceof Uint8Array) return decoder.decode(value);
  if (Array.isArray(value)) return value.map(plain);
  return value;
}

function describe(value: unknown): string {
  return Array.isArray(value) ? "a list" : value === null ? "nothing" : typeof value;
}

/**
 * Fields and values in turn, as the package's stream and hash commands take them (an object).
 * An object cannot hold a field twice, and orders integer-like names first, so such fields are
 * refused rather than sent altered; the gateway's field names are words.
 */
function record(fieldsAndValues: readonly string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (let i = 0; i < fieldsAndValues.length; i += 2) {
    const name = fieldsAndValues[i];
    if (Object.hasOwn(fields, name) || /^\d+$/.test(name)) {
      throw new TypeError(`Field ${JSON.stringify(name)} cannot be sent over HTTP in order`);
    }
    fields[name] = fieldsAndValues[i + 1];
  }
  return fields;
}

function trim(cap: number) {
  return { trim: { type: "MAXLEN" as const, comparison: "~" as const, threshold: cap } };
}

function splitKeys(numberOfKeys: number, keysAndArgs: readonly string[]): [string[], string[]] {
  return [keysAndArgs.slice(0, numberOfKeys), keysAndArgs.slice(numberOfKeys)];
}

export class HttpRedis implements GatewayRedis {
  readonly #client: RawUpstash;

  constructor(requester: Requester) {
    this.#client = new RawUpstash(requester);
  }

  async get(key: string): Promise<string | null> {
    return textOrNull(await this.#client.get(key));
  }

  async set(key: string, value: string, unit: "PX" | "EX", ttl: number): Promise<unknown> {
    return plain(await this.#client.set(key, value, unit === "PX" ? { px: ttl } : { ex: ttl }));
  }

  async mget(...keys: string[]): Promise<(string | null)[]> {
    const values = await this.#client.mget(...keys) as unknown[];
    return values.map(textOrNull);
  }

  async hgetall(key: string): Promise<Record<string, string>> {
    const flat = (await this.#client.hgetall(key) ?? []) as unknown as unknown[];
    const hash: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) hash[text(flat[i])] = text(flat[i + 1]);
    return hash;
  }

  async xadd(
    key: string,
    _maxlen: "MAXLEN",
    _approximate: "~",
    cap: number,
    _id: "*",
    ...fieldsAndValues: string[]
  ): Promise<string | null> {
    return textOrNull(await this.#client.xadd(key, "*", record(fieldsAndValues), trim(cap)));
  }

  async xread(
    _countWord: "COUNT",
    count: number,
    _streamsWord: "STREAMS",
    key: string,
    id: string,
  ): Promise<[string, StreamEntry[]][] | null> {
    const answer = await this.#client.xread(key, id, { count }) as unknown;
    if (!Array.isArray(answer)) return null;
    return answer.map(([stream, entries]: [RestValue, [RestValue, RestValue[]][]]) => [
      text(stream),
      entries.map(([entryId, fields]) => [text(entryId), fields.map(text)] as StreamEntry),
    ]);
  }

  async evalsha(sha1: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown> {
    const [keys, args] = splitKeys(numberOfKeys, keysAndArgs);
    return plain(await this.#client.evalsha(sha1, keys, args));
  }

  async eval(lua: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown> {
    const [keys, args] = splitKeys(numberOfKeys, keysAndArgs);
    return plain(await this.#client.eval(lua, keys, args));
  }

  pipeline(): RedisBatch {
    return new HttpBatch(this.#client.pipeline());
  }

  multi(): RedisBatch {
    return new HttpBatch(this.#client.multi());
  }
}

/** How a batch command's answer is typed: as text (ioredis's strings), or kept as bytes. */
type Shape = typeof plain | typeof bytes;

/** Bytes kept as bytes (a value of exactly `OK` comes unencoded, as text). */
function bytes(value: unknown): unknown {
  return Array.isArray(value) ? value.map((item) => (item === "OK" ? OK_BYTES : item)) : value;
}

const OK_BYTES = new TextEncoder().encode("OK");

class HttpBatch implements RedisBatch {
  readonly #pipeline: Pipeline;
  readonly #shapes: Shape[] = [];

  constructor(pipeline: Pipeline) {
    this.#pipeline = pipeline;
  }

  #add(shape: Shape, queue: (pipeline: Pipeline) => void): RedisBatch {
    queue(this.#pipeline);
    this.#shapes.push(shape);
    return this;
  }

  get(key: string): RedisBatch {
    return this.#add(plain, (p) => p.get(key));
  }

  set(key: string, value: string, _unit: "PX", ttlMs: number): RedisBatch {
    return this.#add(plain, (p) => p.set(key, value, { px: ttlMs }));
  }

  del(...keys: string[]): RedisBatch {
    return this.#add(plain, (p) => p.del(...keys));
  }

  sadd(key: string, ...members: string[]): RedisBatch {
    const [first, ...rest] = members;
    return this.#add(plain, (p) => p.sadd(key, first, ...rest));
  }

  srem(key: string, ...members: string[]): RedisBatch {
    return this.#add(plain, (p) => p.srem(key, ...members));
  }

  hset(key: string, field: string, value: string): RedisBatch {
    return this.#add(plain, (p) => p.hset(key, { [field]: value }));
  }

  hincrby(key: string, field: string, by: number): RedisBatch {
    return this.#add(plain, (p) => p.hincrby(key, field, by));
  }

  hmgetBuffer(key: string, ...fields: string[]): RedisBatch {
    return this.#add(bytes, (p) => p.hmget(key, ...fields));
  }

  expire(key: string, seconds: number): RedisBatch {
    return this.#add(plain, (p) => p.expire(key, seconds));
  }

  pexpire(key: string, ms: number): RedisBatch {
    return this.#add(plain, (p) => p.pexpire(key, ms));
  }

  xadd(
    key: string,
    _maxlen: "MAXLEN",
    _approximate: "~",
    cap: number,
    _id: "*",
    ...fieldsAndValues: string[]
  ): RedisBatch {
    const fields = record(fieldsAndValues);
    return this.#add(plain, (p) => p.xadd(key, "*", fields, trim(cap)));
  }

  async exec(): Promise<BatchReplies | null> {
    // The REST protocol refuses an empty batch; ioredis answers it with no replies.
    if (this.#shapes.length === 0) return [];
    const replies = await this.#pipeline.exec({ keepErrors: true }) as {
      error?: string;
      result: unknown;
    }[];
    return replies.map(({ error, result }, i) =>
      error === undefined || error === null
        ? [null, this.#shapes[i](result)]
        : [new Error(error), undefined]
    );
  }
}
