/**
 * The Redis commands the gateway sends, as one interface with two transports: `ioredis` over TCP
 * implements it as it is (the signatures are a subset of its own), and the HTTP transport
 * (gateway/redis/http.ts, `@upstash/redis` over the Upstash REST protocol) implements it by
 * translating each call. No module above the transports knows which one it talks to.
 *
 * The control plane keeps ioredis's whole client; only what the gateway and the modules it shares
 * with the control plane (the sticky store, the instance registry) send is here, so a command
 * added to the gateway is added here and to both transports, or it does not compile.
 */
import type { ScriptClient } from "../lua/loader.ts";

/** A pipeline's or a transaction's replies, in order: each command's error or its value. */
export type BatchReplies = [error: Error | null, value: unknown][];

/**
 * Commands queued and sent together. A pipeline (`pipeline()`) runs them in one round trip, not
 * atomically; a transaction (`multi()`) runs them as MULTI/EXEC. `exec` resolves null when the
 * transaction was discarded, and rejects when the round trip failed.
 */
export interface RedisBatch {
  get(key: string): RedisBatch;
  set(key: string, value: string, unit: "PX", ttlMs: number): RedisBatch;
  del(...keys: string[]): RedisBatch;
  sadd(key: string, ...members: string[]): RedisBatch;
  srem(key: string, ...members: string[]): RedisBatch;
  hset(key: string, field: string, value: string): RedisBatch;
  hincrby(key: string, field: string, by: number): RedisBatch;
  /** The fields' values as bytes (binary-safe on both transports). */
  hmgetBuffer(key: string, ...fields: string[]): RedisBatch;
  expire(key: string, seconds: number): RedisBatch;
  pexpire(key: string, ms: number): RedisBatch;
  xadd(
    key: string,
    maxlen: "MAXLEN",
    approximate: "~",
    cap: number,
    id: "*",
    ...fieldsAndValues: string[]
  ): RedisBatch;
  exec(): Promise<BatchReplies | null>;
}

/** A stream entry as XREAD answers it: its id and its fields and values in turn. */
export type StreamEntry = [id: string, fieldsAndValues: string[]];

/** The gateway's Redis client, whichever transport carries it. */
export interface GatewayRedis extends ScriptClient {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, unit: "PX" | "EX", ttl: number): Promise<unknown>;
  mget(...keys: string[]): Promise<(string | null)[]>;
  hgetall(key: string): Promise<Record<string, string>>;
  xadd(
    key: string,
    maxlen: "MAXLEN",
    approximate: "~",
    cap: number,
    id: "*",
    ...fieldsAndValues: string[]
  ): Promise<string | null>;
  /** A read that never blocks: the entries after `id`, at most `count`; null when none. */
  xread(
    countWord: "COUNT",
    count: number,
    streamsWord: "STREAMS",
    key: string,
    id: string,
  ): Promise<[key: string, entries: StreamEntry[]][] | null>;
  pipeline(): RedisBatch;
  multi(): RedisBatch;
}

/**
 * Waits on a stream with a blocking read, on a connection of its own (the TCP transport only:
 * HTTP cannot hold a request open on a Redis connection, so the feed is polled there).
 */
export interface BlockingStreamReader {
  /** The id of the stream's last entry, `0-0` when it has none. */
  tail(key: string): Promise<string>;
  /** Waits up to `blockMs` for entries after `id`; the last one's id, or undefined on none. */
  after(key: string, id: string, blockMs: number): Promise<string | undefined>;
  /** Ends the connection, and with it a read under way. Safe twice. */
  close(): void;
}
