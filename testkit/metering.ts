/**
 * Metering test support: the metering script read the Node way, transfers driven through the
 * hooks as the socket layer drives them, a tally of what those transfers carried (the exact
 * counts Redis must end up with), and a reader of every window and demand hash under a prefix.
 */
import { readFileSync } from "node:fs";
import type { Redis } from "ioredis";
import { expect } from "vitest";
import type { Client, Outcome, Refusal } from "../shared/routing/contract.ts";
import type { MeteringPart } from "../gateway/metering/apply.ts";
import { type LuaScript, registerScript, type ScriptClient } from "../shared/lua/loader.ts";
import type { RequestMetering } from "../gateway/metering/metering.ts";
import type { FailedAttempt, FailureNote } from "../gateway/base/transfer-hooks.ts";
import {
  DEMAND_FIELDS,
  demandMinute,
  fieldNames,
  type FieldTypes,
  METERED_WINDOW_KINDS,
  OTHER_HOST,
  readCounts,
} from "../shared/metric-windows.ts";
import type { RedisKeys } from "../shared/redis-keys.ts";

/** The Node side of "each runtime reads the file": node:fs here, a text import under Deno. */
export function loadScriptNode(
  name:
    | "metering_apply"
    | "rate_window"
    | "escalation_report"
    | "fake_ip_assign"
    | "fake_ip_lookup",
): Promise<LuaScript> {
  const url = new URL(`../shared/lua/${name}.lua`, import.meta.url);
  return registerScript(name, readFileSync(url, "utf8"));
}

export const loadMeteringScriptNode = () => loadScriptNode("metering_apply");

/** Counts keyed by a hash's full Redis key, fields by name. */
export type HashCounts = Map<string, Record<string, number>>;

function add(into: HashCounts, key: string, field: string, amount: number): void {
  if (amount === 0) return;
  const row = into.get(key) ?? {};
  row[field] = (row[field] ?? 0) + amount;
  into.set(key, row);
}

export interface TransferPlan {
  projectId: string;
  proxyId: string;
  connectorId: string;
  host: string;
  latencyMs: number;
  ok: boolean;
  /** The tunnel device the client is; absent for a client that logged in by username. */
  deviceId?: string;
}

/** The client a plan's transfers are for, as admission hands it to metering. */
function clientOf(plan: TransferPlan): Client {
  const client: Client = { projectId: plan.projectId, options: { user: "u" } };
  if (plan.deviceId !== undefined) client.deviceId = plan.deviceId;
  return client;
}

/** What the simulated clients sent and received, as Redis should count it. */
export class Tally {
  readonly counts: HashCounts = new Map();
  readonly #keys: RedisKeys;
  readonly #now: () => number;
  /** Hosts the tally folds into (other), when a test caps hosts. */
  readonly #hostOf: (plan: TransferPlan) => string;

  constructor(
    keys: RedisKeys,
    options: { now?: () => number; hostOf?: (p: TransferPlan) => string } = {},
  ) {
    this.#keys = keys;
    this.#now = options.now ?? Date.now;
    this.#hostOf = options.hostOf ?? ((plan) => plan.host);
  }

  #windows(plan: TransferPlan): string[] {
    const k = this.#keys;
    const windows = [
      k.metricWindow("proxy", plan.proxyId),
      k.metricWindow("project", plan.projectId),
      k.metricWindow("connector", plan.connectorId),
      k.metricWindow("host", `${plan.projectId}:${plan.connectorId}:${this.#hostOf(plan)}`),
    ];
    if (plan.deviceId !== undefined) windows.push(k.metricWindow("device", plan.deviceId));
    return windows;
  }

  begun(plan: TransferPlan, minute = demandMinute(this.#now())): void {
    add(this.counts, this.#keys.demand(plan.projectId, minute), "requests", 1);
  }

  bytes(plan: TransferPlan, sent: number, received: number): void {
    for (const key of this.#windows(plan)) {
      add(this.counts, key, "bytes_sent", sent);
      add(this.counts, key, "bytes_received", received);
    }
  }

  finished(plan: TransferPlan): void {
    for (const key of this.#windows(plan)) {
      add(this.counts, key, "requests", 1);
      add(this.counts, key, plan.ok ? "successes" : "failures", 1);
      add(this.counts, key, "latency_sum_ms", plan.latencyMs);
    }
    // A transfer that ended failed is one failure under its key too (SimTransfer's note).
    if (!plan.ok) this.failed(plan, FAILED_TRANSFER.kind, FAILED_TRANSFER.vendorStatus);
  }

  /** One under a failure key of the plan's project and connector. */
  failed(plan: TransferPlan, kind: string, vendorStatus: number | null): void {
    add(
      this.counts,
      this.#keys.metricWindow(
        "failure",
        `${plan.projectId}:${plan.connectorId}:${kind}:${vendorStatus ?? "-"}`,
      ),
      "count",
      1,
    );
  }

  /** An attempt that failed before its transfer began: a request, a failure, and its key. */
  attemptFailed(plan: TransferPlan, kind: string, vendorStatus: number | null): void {
    for (const key of this.#windows(plan)) {
      add(this.counts, key, "requests", 1);
      add(this.counts, key, "failures", 1);
      add(this.counts, key, "latency_sum_ms", plan.latencyMs);
    }
    this.failed(plan, kind, vendorStatus);
  }

  /** A device's connection closed as encrypted DNS: one in its window, no request. */
  encryptedDnsClosed(deviceId: string): void {
    add(this.counts, this.#keys.metricWindow("device", deviceId), "encrypted_dns_closed", 1);
  }

  rejected(projectId: string, reason: string, minute = demandMinute(this.#now())): void {
    add(this.counts, this.#keys.demand(projectId, minute), "rejections", 1);
    add(
      this.counts,
      this.#keys.metricWindow("failure", `${projectId}:-:${reason}:-`),
      "count",
      1,
    );
  }
}

/** The counts a set of confirmed parts carried, as Redis applied them. */
export function partCounts(parts: readonly MeteringPart[]): HashCounts {
  const fieldsOf: Record<string, FieldTypes> = { demand: DEMAND_FIELDS };
  for (const kind of METERED_WINDOW_KINDS) fieldsOf[kind.name] = kind.fields;
  const counts: HashCounts = new Map();
  for (const part of parts) {
    for (const row of part.rows) {
      const names = fieldNames(fieldsOf[row.kind]);
      row.values.forEach((value, index) => add(counts, row.key, names[index], value));
    }
  }
  return counts;
}

/** Subtracts `b` from `a`, leaving out zeros. */
export function minus(a: HashCounts, b: HashCounts): HashCounts {
  const out: HashCounts = new Map();
  for (const [key, row] of a) {
    for (const [field, value] of Object.entries(row)) add(out, key, field, value);
  }
  for (const [key, row] of b) {
    for (const [field, value] of Object.entries(row)) add(out, key, field, -value);
  }
  for (const [key, row] of out) {
    for (const [field, value] of Object.entries(row)) if (value === 0) delete row[field];
    if (Object.keys(row).length === 0) out.delete(key);
  }
  return out;
}

/** Every window listed in the metered kinds' indexes and every demand hash under the prefix. */
export async function readRedis(redis: Redis, keys: RedisKeys): Promise<HashCounts> {
  const counts: HashCounts = new Map();
  const store = (key: string, hash: Record<string, string>, fields: FieldTypes) => {
    const numbers = readCounts(fields, hash);
    for (const [field, value] of Object.entries(numbers)) add(counts, key, field, value);
    for (const field of Object.keys(hash)) {
      if (!(field in fields)) throw new Error(`Unexpected field ${field} in ${key}`);
    }
  };
  for (const kind of METERED_WINDOW_KINDS) {
    for (const key of await redis.smembers(keys.metricIndex(kind.name))) {
      store(key, await redis.hgetall(key), kind.fields);
    }
  }
  let cursor = "0";
  do {
    const [next, found] = await redis.scan(
      cursor,
      "MATCH",
      `${keys.prefix}demand:*`,
      "COUNT",
      1000,
    );
    cursor = next;
    for (const key of found) store(key, await redis.hgetall(key), DEMAND_FIELDS);
  } while (cursor !== "0");
  return counts;
}

/** Sorted, for readable diffs. */
export function asObject(counts: HashCounts): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const key of [...counts.keys()].sort()) {
    const row = counts.get(key)!;
    out[key] = Object.fromEntries(Object.keys(row).sort().map((field) => [field, row[field]]));
  }
  return out;
}

export function expectSameCounts(actual: HashCounts, expected: HashCounts): void {
  expect(asObject(actual)).toEqual(asObject(expected));
}

// ---------------------------------------------------------------------------------------------
// Driving the hooks as the socket layer does.

export function plan(overrides: Partial<TransferPlan> = {}): TransferPlan {
  return {
    projectId: "p1",
    proxyId: "x1",
    connectorId: "c1",
    host: "example.com",
    latencyMs: 10,
    ok: true,
    ...overrides,
  };
}

/** A transfer in progress: bytes are metered and tallied together. */
export class SimTransfer {
  readonly plan: TransferPlan;
  readonly #meter: ReturnType<RequestMetering["begin"]>;
  readonly #tally: Tally;

  /** `client`: as admission made it (a device's, say); else the plan's. */
  constructor(metering: RequestMetering, tally: Tally, plan: TransferPlan, client?: Client) {
    this.plan = plan;
    this.#tally = tally;
    this.#meter = metering.begin({
      kind: "connect",
      client: client ?? clientOf(plan),
      target: { host: plan.host, port: 443 },
      upstream: {
        proxyId: plan.proxyId,
        connectorId: plan.connectorId,
        scheme: "http",
        host: "127.0.0.1",
        port: 1,
        username: null,
        password: null,
      },
      latencyMs: plan.latencyMs,
    });
    if (!this.#meter) throw new Error("begin gave no meter");
    tally.begun(plan);
  }

  bytes(sent: number, received: number): void {
    this.#meter!.bytes(sent, received);
    this.#tally.bytes(this.plan, sent, received);
  }

  finish(): void {
    const outcome: Outcome = this.plan.ok
      ? { ok: true, latencyMs: this.plan.latencyMs }
      : { ok: false, phase: "idle", latencyMs: this.plan.latencyMs };
    this.#meter!.finish(outcome, this.plan.ok ? undefined : FAILED_TRANSFER);
    this.#tally.finished(this.plan);
  }

  /** A second finish, as a buggy path might call it: counts nothing. */
  finishAgain(): void {
    this.#meter!.finish({ ok: true, latencyMs: 999 });
  }
}

/** How SimTransfer's failed transfers say they failed: the tunnel broke off upstream. */
export const FAILED_TRANSFER: FailureNote = {
  kind: "transfer_broken",
  protocol: "connect",
  clientStatus: 200,
  proxyStatus: "",
  vendorStatus: null,
  message: "CONNECT example.com:443: The tunnel's upstream leg failed",
};

/** An attempt through the plan's proxy that failed before its transfer began. */
export function failedAttempt(
  plan: TransferPlan,
  note: Partial<FailureNote> = {},
): FailedAttempt {
  return {
    client: clientOf(plan),
    target: { host: plan.host, port: 443 },
    upstream: {
      proxyId: plan.proxyId,
      connectorId: plan.connectorId,
      scheme: "http",
      host: "127.0.0.1",
      port: 1,
      username: null,
      password: null,
    },
    elapsedMs: plan.latencyMs,
    note: {
      kind: "upstream_unreachable",
      protocol: "connect",
      clientStatus: 502,
      proxyStatus: "connection_refused",
      vendorStatus: null,
      message: `CONNECT ${plan.host}:443: Upstream proxy refused the connection`,
      ...note,
    },
  };
}

export function refusal(reason: Refusal["rejection"]): Refusal {
  return {
    status: 502,
    proxyStatus: "destination_unavailable",
    reason: "No proxy",
    rejection: reason,
  };
}

export { OTHER_HOST };

/** A clock tests move by hand, shared by the metering and the tally, so both read one minute. */
export class Clock {
  ms = Date.UTC(2030, 0, 1, 12, 0, 0);
  readonly now = (): number => this.ms;
}

/** Sends held back on demand, and counted, so a test can stop Redis with nothing in flight. */
export class GatedClient implements ScriptClient {
  readonly #inner: ScriptClient;
  #gate: Promise<void> | undefined;
  #open: (() => void) | undefined;
  #idle: (() => void) | undefined;
  #lost: (() => void) | undefined;
  inFlight = 0;
  repliesLost = 0;
  calls = 0;

  constructor(inner: ScriptClient) {
    this.#inner = inner;
  }

  /** Resolves once no send is in flight; later sends wait until release(). */
  async hold(): Promise<void> {
    this.#gate ??= new Promise((resolve) => {
      this.#open = resolve;
    });
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.#idle = resolve));
  }

  release(): void {
    this.#open?.();
    this.#gate = undefined;
  }

  /**
   * The next send reaches Redis and is applied, but its reply is lost (as when the connection
   * drops right after the write). Resolves once that happened.
   */
  loseNextReply(): Promise<void> {
    return new Promise((resolve) => {
      this.#lost = resolve;
    });
  }

  async #call(send: () => Promise<unknown>): Promise<unknown> {
    if (this.#gate) await this.#gate;
    this.calls++;
    this.inFlight++;
    try {
      const reply = await send();
      const lost = this.#lost;
      if (lost) {
        this.#lost = undefined;
        this.repliesLost++;
        lost();
        throw new Error("Connection closed before the reply (simulated)");
      }
      return reply;
    } finally {
      this.inFlight--;
      if (this.inFlight === 0) this.#idle?.();
    }
  }

  evalsha(sha1: string, n: number, ...rest: string[]): Promise<unknown> {
    return this.#call(() => this.#inner.evalsha(sha1, n, ...rest));
  }

  eval(lua: string, n: number, ...rest: string[]): Promise<unknown> {
    return this.#call(() => this.#inner.eval(lua, n, ...rest));
  }
}

/**
 * Random traffic through the hooks until stopped: a steady stream of short transfers and a few
 * long ones reporting mid-transfer, with failures and rejections, everything tallied.
 */
export class TrafficGenerator {
  readonly #metering: RequestMetering;
  readonly #tally: Tally;
  readonly #open: SimTransfer[] = [];
  #stopped = false;
  #loop: Promise<void> | undefined;
  #seed = 12345;
  transfers = 0;
  rejections = 0;
  attemptsFailed = 0;

  readonly #clock: Clock | undefined;

  constructor(metering: RequestMetering, tally: Tally, clock?: Clock) {
    this.#metering = metering;
    this.#tally = tally;
    this.#clock = clock;
  }

  #random(n: number): number {
    // A small deterministic generator: failures reproduce.
    this.#seed = (this.#seed * 1103515245 + 12345) & 0x7fffffff;
    return this.#seed % n;
  }

  start(tickMs = 5): void {
    this.#loop = (async () => {
      while (!this.#stopped) {
        this.tick();
        await new Promise((resolve) => setTimeout(resolve, tickMs));
      }
    })();
  }

  tick(): void {
    const r = (n: number) => this.#random(n);
    // Demand spans minutes: each tick is a tenth of a second of the test's clock.
    if (this.#clock) this.#clock.ms += 100;
    const project = `p${r(3)}`;
    if (r(10) === 0) {
      const reason = r(2) === 0 ? "no_proxy_available" : "all_proxies_busy";
      this.#metering.rejected(
        refusal(reason),
        { projectId: project, options: { user: "u" } },
        undefined,
      );
      this.#tally.rejected(project, reason);
      this.rejections++;
      return;
    }
    if (r(12) === 0) {
      // An attempt through a proxy that failed before any transfer began.
      const attempt = plan({
        projectId: project,
        proxyId: `x${r(8)}`,
        connectorId: `c${r(2)}`,
        host: `h${r(20)}.example`,
        latencyMs: 1 + r(200),
        ok: false,
      });
      const vendorStatus = r(2) === 0 ? 407 : null;
      const kind = vendorStatus === null ? "upstream_unreachable" : "upstream_auth_failed";
      this.#metering.attemptFailed(failedAttempt(attempt, { kind, vendorStatus }));
      this.#tally.attemptFailed(attempt, kind, vendorStatus);
      this.attemptsFailed++;
      return;
    }
    const transfer = new SimTransfer(
      this.#metering,
      this.#tally,
      plan({
        projectId: project,
        proxyId: `x${r(8)}`,
        connectorId: `c${r(2)}`,
        host: `h${r(20)}.example`,
        latencyMs: 1 + r(200),
        ok: r(5) !== 0,
      }),
    );
    this.transfers++;
    transfer.bytes(r(4000), r(64_000));
    if (r(4) === 0) this.#open.push(transfer);
    else transfer.finish();
    // Long transfers move megabytes in chunks, then end.
    for (const open of [...this.#open]) {
      open.bytes(r(100_000), 200_000 + r(400_000));
      if (r(30) === 0) {
        open.finish();
        this.#open.splice(this.#open.indexOf(open), 1);
      }
    }
  }

  /** Stops and finishes every open transfer. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    for (const open of this.#open.splice(0)) open.finish();
  }
}
