/**
 * traffic: decides whether a connector (its traffic_config) or a project (its traffic quota) is
 * blocked by its limit, 100 subjects a batch. Three producers ask: the gateways' metering script
 * for each limited subject a window carried bytes of, the api after a reset or an edit of what
 * decides the block (with a pending mark), and index hygiene each minute for every subject
 * blocked or pending.
 *
 * A decision reads, in order: the pending marks (the requests it answers), the subjects' rows,
 * the history of each window, then the live windows (control/traffic/usage.ts says why that
 * order). It writes one shared/lua/traffic_set_block.lua call per subject, pipelined: the mark it
 * read is cleared, and the blocks hash and the runtime stream change only when the decision
 * does. A decision Postgres cannot give raises before anything is written; the batch is
 * delivered again and the hash keeps its last decisions meanwhile.
 */
import type { Redis } from "ioredis";
import type { Database } from "../../db/client.ts";
import { translatePostgresError } from "../../db/errors.ts";
import { BoundedMap } from "../../shared/bounded-map.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { JobKind } from "../../shared/roles.ts";
import { trafficSubjectKey } from "../../shared/traffic-subjects.ts";
import type { Logger } from "../core/logging.ts";
import { runScripts, trafficSetBlockResult } from "../core/scripts.ts";
import { decide, type Decision, trafficStatus } from "../traffic/rules.ts";
import { readSubjects, readUsage, type SubjectUsage } from "../traffic/usage.ts";
import type { Job, WorkBatch } from "../core/job.ts";

export interface TrafficJobOptions {
  database: Database;
  redis: Redis;
  keys: RedisKeys;
  logger: Logger;
  now?: () => number;
}

export interface TrafficOutcome {
  subject: string;
  decision: Decision;
  bytes: number;
  /** The blocks hash changed (and the feed builder was told). */
  changed: boolean;
  /** The pending mark the decision read was cleared. */
  cleared: boolean;
}

/** Subjects whose warning and limit lines this process logged, per usage window. */
const MAX_LOGGED_SUBJECTS = 100_000;

export class TrafficJob implements Job {
  readonly kind = JobKind.traffic;
  readonly #o: TrafficJobOptions;
  /** subject → the window start and the lines logged in it (warning, limit). */
  readonly #logged = new BoundedMap<string, { windowStartMs: number; lines: Set<string> }>(
    MAX_LOGGED_SUBJECTS,
  );

  constructor(options: TrafficJobOptions) {
    this.#o = options;
  }

  async run(batch: WorkBatch): Promise<void> {
    await this.decide(batch.keys);
  }

  async decide(subjects: readonly string[]): Promise<TrafficOutcome[]> {
    if (subjects.length === 0) return [];
    const { redis, keys, database } = this.#o;
    const nowMs = (this.#o.now ?? Date.now)();
    // The requests this batch answers: read before anything the decision depends on.
    const marks = await redis.hmget(keys.trafficPending, ...subjects);
    let usage: SubjectUsage[];
    let rows: Awaited<ReturnType<typeof readSubjects>>;
    try {
      rows = await readSubjects(database, subjects);
      usage = await readUsage(database, redis, keys, [...rows.values()], nowMs);
    } catch (error) {
      throw translatePostgresError(error);
    }
    const bySubject = new Map(usage.map((u) => [trafficSubjectKey(u.row.subject), u]));
    const decisions = subjects.map((subject) => {
      const found = bySubject.get(subject);
      const decision = found ? decide(found.row.limit, found.window, found.bytes) : decide(
        undefined,
        undefined,
        0,
      );
      return { subject, found, decision };
    });
    const replies = await runScripts(
      redis,
      "traffic_set_block",
      decisions.map(({ subject, decision }, i) => ({
        keys: [keys.trafficPending, keys.trafficBlocked, keys.runtimeStream],
        args: [
          subject,
          marks[i] ?? "",
          decision.blocked ? JSON.stringify({ until_ms: decision.untilMs }) : "",
          String(STREAM_CAPS.runtime),
        ],
      })),
    );
    return decisions.map(({ subject, found, decision }, i) => {
      const { changed, cleared } = trafficSetBlockResult(replies[i]);
      const bytes = found?.bytes ?? 0;
      if (changed) this.#logChange(subject, decision, bytes, found);
      if (found) this.#logTransitions(subject, found);
      return { subject, decision, bytes, changed, cleared };
    });
  }

  #logChange(subject: string, decision: Decision, bytes: number, found?: SubjectUsage): void {
    const fields = {
      subject,
      kind: found?.row.subject.kind ?? "connector",
      bytes,
      limit_bytes: found?.row.limit?.limit_bytes ?? null,
    };
    if (decision.blocked) {
      this.#o.logger.warn(
        { ...fields, until: new Date(decision.untilMs).toISOString() },
        found?.row.subject.kind === "project"
          ? "Project blocked by its traffic quota"
          : "Connector blocked by its traffic limit",
      );
    } else {
      this.#o.logger.info(
        { ...fields, reason: decision.reason },
        found?.row.subject.kind === "project"
          ? "Project released from its traffic quota"
          : "Connector released from its traffic limit",
      );
    }
  }

  /** The warning line and the limit, each logged once per usage window by this process. */
  #logTransitions(subject: string, found: SubjectUsage): void {
    const { limit } = found.row;
    if (!limit || limit.limit_bytes === null || !found.window) return;
    const status = trafficStatus(limit, found.bytes);
    if (status === "ok") return;
    let logged = this.#logged.get(subject);
    if (!logged || logged.windowStartMs !== found.window.startMs) {
      logged = { windowStartMs: found.window.startMs, lines: new Set() };
      this.#logged.set(subject, logged);
    }
    const what = found.row.subject.kind === "project" ? "Project" : "Connector";
    const fields = {
      subject,
      bytes: found.bytes,
      limit_bytes: limit.limit_bytes,
      percent: Math.floor((found.bytes / limit.limit_bytes) * 100),
    };
    if (status === "warning" && !logged.lines.has("warning")) {
      logged.lines.add("warning");
      this.#o.logger.warn(fields, `${what} approaching its traffic limit`);
    }
    if (status === "limit" && !logged.lines.has("limit")) {
      logged.lines.add("warning");
      logged.lines.add("limit");
      this.#o.logger.warn({ ...fields, action: limit.action }, `${what} traffic limit reached`);
    }
  }
}
