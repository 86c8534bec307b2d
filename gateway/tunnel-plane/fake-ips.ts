/**
 * The fake-IP mapping of the tunnel plane: which name each address of the block stands for.
 *
 * The mapping is shared through Redis (shared/lua/fake_ip_assign.lua), so a connection that
 * reaches another gateway than the one that answered its DNS query still finds its name. Each
 * gateway keeps what it answered and looked up in a local copy of the same shape (least recently
 * used first out, bounded by the block), and a connection's lookup reads that copy first, so a
 * connection to a name this gateway answered costs no round trip.
 *
 * With Redis away the gateway answers from its own copy: a name it knows keeps its address, a
 * new one takes a free offset of the copy. Only the cross-gateway property is lost, and after a
 * failed call Redis is left alone for `retryAfterMs`, so a DNS answer never waits for a Redis
 * that is not there.
 */
import { withDeadline } from "../../shared/async/deadline.ts";
import { type LuaScript, runScript, type ScriptClient } from "../../shared/lua/loader.ts";
import { fakeIpAt, fakeIpOffset, type FakeIpRange } from "../../shared/net/fake-ip-range.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import { counterSample, gaugeSample, type MetricSample } from "../base/metrics.ts";

/** The shared mapping's keys live this long without a query for any of its names. */
export const MAPPING_TTL_MS = 24 * 3600_000;
/** How long a failed Redis call leaves the mapping to the local copy alone. */
export const RETRY_AFTER_MS = 1_000;

export interface FakeIpsLogger {
  info(message: string, fields?: Readonly<Record<string, unknown>>): void;
  warn(message: string, fields?: Readonly<Record<string, unknown>>): void;
}

export interface FakeIpsOptions {
  range: FakeIpRange;
  redis: ScriptClient;
  keys: RedisKeys;
  /** shared/lua/fake_ip_assign.lua and fake_ip_lookup.lua, registered. */
  assignScript: LuaScript;
  lookupScript: LuaScript;
  /** Each Redis call's deadline (OCTOPROX_REDIS_REQUEST_TIMEOUT). */
  requestTimeoutMs: number;
  retryAfterMs?: number;
  mappingTtlMs?: number;
  nowMs?: () => number;
  logger?: FakeIpsLogger;
}

/** Names and offsets both ways, the least recently used first: a Map keeps insertion order. */
export class LocalFakeIps {
  readonly #range: FakeIpRange;
  readonly #byName = new Map<string, number>();
  readonly #byOffset = new Map<number, string>();
  #cursor: number;

  constructor(range: FakeIpRange) {
    this.#range = range;
    this.#cursor = range.firstOffset;
  }

  get size(): number {
    return this.#byName.size;
  }

  /** The name's offset, marked used now. */
  offsetOf(name: string): number | undefined {
    const offset = this.#byName.get(name);
    if (offset !== undefined) this.#touch(name, offset);
    return offset;
  }

  /** The name at `offset`, marked used now. */
  nameAt(offset: number): string | undefined {
    const name = this.#byOffset.get(offset);
    if (name !== undefined) this.#touch(name, offset);
    return name;
  }

  /** Records what the shared mapping said: `name` holds `offset`, and nothing else does. */
  put(name: string, offset: number): void {
    const previousName = this.#byOffset.get(offset);
    if (previousName !== undefined && previousName !== name) this.#byName.delete(previousName);
    const previousOffset = this.#byName.get(name);
    if (previousOffset !== undefined && previousOffset !== offset) {
      this.#byOffset.delete(previousOffset);
    }
    this.#touch(name, offset);
  }

  /** The name's offset, taking a free one (or the least recently used name's) when it has none. */
  allocate(name: string): number {
    const held = this.offsetOf(name);
    if (held !== undefined) return held;
    let offset: number;
    if (this.#byName.size < this.#range.capacity) {
      while (this.#byOffset.has(this.#cursor)) this.#advance();
      offset = this.#cursor;
      this.#advance();
    } else {
      const [oldest, oldestOffset] = this.#byName.entries().next().value as [string, number];
      this.#byName.delete(oldest);
      offset = oldestOffset;
    }
    this.#touch(name, offset);
    return offset;
  }

  #advance(): void {
    this.#cursor = this.#cursor >= this.#range.lastOffset
      ? this.#range.firstOffset
      : this.#cursor + 1;
  }

  #touch(name: string, offset: number): void {
    this.#byName.delete(name);
    this.#byName.set(name, offset);
    this.#byOffset.set(offset, name);
  }
}

export interface FakeIpStats {
  /** Names given an address by the shared mapping, and by the local copy with Redis away. */
  assignedShared: number;
  assignedLocal: number;
  /** Connections' lookups answered by the local copy, by Redis, and by neither. */
  lookupsLocal: number;
  lookupsShared: number;
  lookupsUnknown: number;
  redisFailures: number;
}

export class FakeIps {
  readonly #o: FakeIpsOptions;
  readonly #local: LocalFakeIps;
  /** fake_ip_assign.lua's keys, and fake_ip_lookup.lua's. */
  readonly #keys: readonly string[];
  readonly #lookupKeys: readonly string[];
  readonly #nowMs: () => number;
  /** Until when Redis is left alone after a failed call (epoch ms). */
  #awayUntilMs = 0;
  #away = false;
  readonly #stats: FakeIpStats = {
    assignedShared: 0,
    assignedLocal: 0,
    lookupsLocal: 0,
    lookupsShared: 0,
    lookupsUnknown: 0,
    redisFailures: 0,
  };

  constructor(options: FakeIpsOptions) {
    this.#o = options;
    this.#local = new LocalFakeIps(options.range);
    const keys = options.keys.fakeIp(options.range.cidr);
    this.#keys = [keys.names, keys.offsets, keys.recency, keys.next];
    this.#lookupKeys = [keys.offsets, keys.recency];
    this.#nowMs = options.nowMs ?? Date.now;
  }

  /** The fake address of `name` (a 32-bit number); never rejects. */
  async assign(name: string): Promise<number> {
    const { range } = this.#o;
    if (this.#redisUsable()) {
      try {
        const reply = await this.#call("fake-ip assign", this.#o.assignScript, this.#keys, [
          name,
          String(this.#nowMs()),
          String(range.firstOffset),
          String(range.lastOffset),
          String(this.#o.mappingTtlMs ?? MAPPING_TTL_MS),
        ]);
        const offset = Number(reply);
        if (
          Number.isInteger(offset) && offset >= range.firstOffset && offset <= range.lastOffset
        ) {
          this.#local.put(name, offset);
          this.#stats.assignedShared++;
          return fakeIpAt(range, offset);
        }
      } catch (error) {
        this.#failed(error);
      }
    }
    this.#stats.assignedLocal++;
    return fakeIpAt(range, this.#local.allocate(name));
  }

  /** The name `address` stands for, if any holds it; never rejects. */
  async lookup(address: number): Promise<string | undefined> {
    const offset = fakeIpOffset(this.#o.range, address);
    if (offset === undefined) return undefined;
    const known = this.#local.nameAt(offset);
    if (known !== undefined) {
      this.#stats.lookupsLocal++;
      return known;
    }
    if (this.#redisUsable()) {
      try {
        const reply = await this.#call("fake-ip lookup", this.#o.lookupScript, this.#lookupKeys, [
          String(offset),
          String(this.#nowMs()),
        ]);
        if (typeof reply === "string" && reply !== "") {
          this.#local.put(reply, offset);
          this.#stats.lookupsShared++;
          return reply;
        }
      } catch (error) {
        this.#failed(error);
      }
    }
    this.#stats.lookupsUnknown++;
    return undefined;
  }

  stats(): FakeIpStats & { localNames: number } {
    return { ...this.#stats, localNames: this.#local.size };
  }

  samples(): MetricSample[] {
    const s = this.#stats;
    const assigned = "octoprox_gateway_tunnel_fake_ip_assignments_total";
    const lookups = "octoprox_gateway_tunnel_fake_ip_lookups_total";
    return [
      counterSample(assigned, s.assignedShared, 'mapping="shared"'),
      counterSample(assigned, s.assignedLocal, 'mapping="local"'),
      counterSample(lookups, s.lookupsLocal, 'result="local"'),
      counterSample(lookups, s.lookupsShared, 'result="shared"'),
      counterSample(lookups, s.lookupsUnknown, 'result="unknown"'),
      counterSample("octoprox_gateway_tunnel_fake_ip_redis_failures_total", s.redisFailures),
      gaugeSample("octoprox_gateway_tunnel_fake_ip_names", this.#local.size),
    ];
  }

  #redisUsable(): boolean {
    return this.#nowMs() >= this.#awayUntilMs;
  }

  async #call(what: string, script: LuaScript, keys: readonly string[], args: string[]) {
    const reply = await withDeadline(
      what,
      this.#o.requestTimeoutMs,
      () => runScript(this.#o.redis, script, keys, args),
    );
    if (this.#away) {
      this.#away = false;
      this.#o.logger?.info("Fake-IP mapping shared through Redis again");
    }
    return reply;
  }

  #failed(error: unknown): void {
    this.#stats.redisFailures++;
    this.#awayUntilMs = this.#nowMs() + (this.#o.retryAfterMs ?? RETRY_AFTER_MS);
    if (this.#away) return;
    this.#away = true;
    this.#o.logger?.warn(
      "Fake-IP mapping not shared: Redis did not answer; names get addresses of this gateway's own",
      {
        error: error instanceof Error ? error.message : String(error),
      },
    );
  }
}
