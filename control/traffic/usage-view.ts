/**
 * Traffic usage as the api shows it, beside a connector or a project: the bytes of the usage
 * window (its history, then the live windows), the percent and status against the limit, the
 * cost, whether the stored decision blocks it now (the end exclusive, as gateways judge it) and
 * whether a decision is pending. Usage moves the moment a reset or a limit edit commits; the
 * block waits for the decision that write asked for. Postgres first, Redis after and softly:
 * without Redis the history alone, no block and nothing pending, logged once per outage.
 */
import type { TrafficConfig } from "../../db/schema.ts";
import { errorText } from "../../shared/errors.ts";
import {
  ConnectorWindows,
  ProjectWindows,
  readCounts,
  TRANSFER_FIELDS,
  windowKey,
} from "../../shared/metric-windows.ts";
import { type TrafficSubject, trafficSubjectKey } from "../../shared/traffic-subjects.ts";
import type { ControlDeps } from "../core/deps.ts";
import { redisDeadline } from "../core/redis.ts";
import { blockedNow, costOf, type TrafficStatus, trafficStatus } from "./rules.ts";
import { readUsage, type SubjectRow } from "./usage.ts";

export interface TrafficUsageView {
  period: string;
  period_end: string;
  /** The window's start: the period's, or a reset inside it. */
  counting_since: string;
  /** Both directions, the window's history and the live windows. */
  bytes: number;
  limit_bytes: number | null;
  /** Of the limit, whole; null without a limit. */
  percent: number | null;
  status: TrafficStatus;
  cost: number | null;
  currency: string;
  /** The stored decision blocks it now (gateways refuse its requests). */
  blocked: boolean;
  blocked_until: string | null;
  /** A decision was asked for (a reset, a limit edit) and has not landed yet. */
  pending: boolean;
  /** False when Redis did not answer: the history alone, no block and nothing pending shown. */
  runtime_included: boolean;
}

type ViewDeps = Pick<ControlDeps, "database" | "redis" | "keys" | "logger" | "settings">;

export interface UsageSubject {
  subject: TrafficSubject;
  projectId: string;
  config: TrafficConfig | null;
  resetAt: Date | null;
}

/** Logs the first failed soft read of an outage, and again after one that worked. */
let failing = false;

/** Each subject's usage view, by subject key; a subject without a traffic config has none. */
export async function trafficUsageViews(
  deps: ViewDeps,
  subjects: readonly UsageSubject[],
  nowMs = Date.now(),
): Promise<Map<string, TrafficUsageView>> {
  const views = new Map<string, TrafficUsageView>();
  const rows: SubjectRow[] = subjects.filter((s) => s.config !== null).map((s) => ({
    subject: s.subject,
    projectId: s.projectId,
    limit: s.config,
    resetAtMs: s.resetAt === null ? null : new Date(s.resetAt).getTime(),
  }));
  if (rows.length === 0) return views;
  const usage = await readUsage(deps.database, deps.redis, deps.keys, rows, nowMs, {
    live: false,
  });
  const runtime = await readRuntime(deps, rows);
  for (const { row, window, historyBytes } of usage) {
    const key = trafficSubjectKey(row.subject);
    const limit = row.limit!;
    const bytes = historyBytes + (runtime?.live.get(key) ?? 0);
    const until = runtime ? blockedNow(runtime.blocked.get(key), nowMs) : undefined;
    views.set(key, {
      period: limit.period,
      period_end: new Date(window!.endMs).toISOString(),
      counting_since: new Date(window!.startMs).toISOString(),
      bytes,
      limit_bytes: limit.limit_bytes,
      percent: limit.limit_bytes === null ? null : Math.floor((bytes / limit.limit_bytes) * 100),
      status: trafficStatus(limit, bytes),
      cost: costOf(limit, bytes),
      currency: limit.currency ?? "USD",
      blocked: until !== undefined,
      blocked_until: until === undefined ? null : new Date(until).toISOString(),
      pending: runtime?.pending.has(key) ?? false,
      runtime_included: runtime !== undefined,
    });
  }
  return views;
}

interface Runtime {
  live: Map<string, number>;
  blocked: Map<string, string | null>;
  pending: Set<string>;
}

/** The live bytes, stored blocks and pending marks, in one pipeline; undefined without Redis. */
async function readRuntime(
  deps: ViewDeps,
  rows: readonly SubjectRow[],
): Promise<Runtime | undefined> {
  const { redis, keys } = deps;
  const subjectKeys = rows.map((row) => trafficSubjectKey(row.subject));
  try {
    const replies = await redisDeadline(deps.settings.redisRequestTimeoutMs, async () => {
      const pipeline = redis.pipeline();
      for (const row of rows) {
        const kind = row.subject.kind === "connector" ? ConnectorWindows : ProjectWindows;
        pipeline.hgetall(windowKey(keys, kind, row.subject.id));
      }
      pipeline.hmget(keys.trafficBlocked, ...subjectKeys);
      pipeline.hmget(keys.trafficPending, ...subjectKeys);
      return ((await pipeline.exec()) ?? []).map(([error, reply]) => {
        if (error) throw error;
        return reply;
      });
    });
    failing = false;
    const live = new Map<string, number>();
    rows.forEach((_, i) => {
      const counts = readCounts(TRANSFER_FIELDS, replies[i] as Record<string, string>);
      live.set(subjectKeys[i], counts.bytes_sent + counts.bytes_received);
    });
    const blockedValues = replies[rows.length] as (string | null)[];
    const pendingValues = replies[rows.length + 1] as (string | null)[];
    return {
      live,
      blocked: new Map(subjectKeys.map((key, i) => [key, blockedValues[i]])),
      pending: new Set(subjectKeys.filter((_, i) => pendingValues[i] !== null)),
    };
  } catch (error) {
    if (!failing) {
      failing = true;
      deps.logger.warn(
        { what: "traffic usage", error: errorText(error) },
        "Runtime state unavailable, shown without it",
      );
    }
    return undefined;
  }
}
