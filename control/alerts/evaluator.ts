/**
 * The alert evaluator: a loop in every api process that judges every rule each
 * OCTOPROX_ALERT_EVALUATION_INTERVAL, fires what newly fires and resolves what no longer does
 * (events.ts: once, however many processes judge the same condition). A rule whose condition
 * cannot be read this cycle (a store away) is left as it was; the others go on. Its snapshot
 * carries the open events by severity for /metrics.
 */
import type { Logger } from "../core/logging.ts";
import { errorText } from "../../shared/errors.ts";
import { type CycleResult, type LoopSnapshot, PeriodicLoop } from "../../shared/async/loop.ts";
import type { AlertSeverity } from "../model/alerts.ts";
import type { ConditionDeps } from "./condition.ts";
import { conditionOf } from "./conditions.ts";
import { databaseNow, fire, firingBySeverity, resolveOthers } from "./events.ts";
import { listRules } from "./rules.ts";

export interface AlertEvaluatorSnapshot extends LoopSnapshot {
  /** Open events, every process's, by severity, at the last cycle. */
  alerts_firing: Record<AlertSeverity, number>;
}

export interface EvaluatorOptions {
  deps: ConditionDeps;
  intervalMs: number;
  /** Told when a cycle owed deliveries, so the delivery loop goes at once. */
  onOwed?: () => void;
}

export interface EvaluationOutcome {
  fired: number;
  resolved: number;
  /** Rules whose condition could not be read. */
  skipped: number;
}

export class AlertEvaluator extends PeriodicLoop<Logger> {
  readonly #o: EvaluatorOptions;
  #firing: Record<AlertSeverity, number> = { info: 0, warning: 0, critical: 0 };
  /** The last error each rule's condition raised, logged once until it changes. */
  readonly #failing = new Map<string, string>();

  constructor(options: EvaluatorOptions) {
    super({ name: "alert_evaluator", logger: options.deps.logger, intervalMs: options.intervalMs });
    this.#o = options;
  }

  protected override async cycle(): Promise<CycleResult> {
    const outcome = await this.evaluate();
    return outcome.fired + outcome.resolved > 0;
  }

  /** One pass over every rule. Raises only when the rules themselves cannot be read. */
  async evaluate(): Promise<EvaluationOutcome> {
    const { deps } = this.#o;
    const outcome: EvaluationOutcome = { fired: 0, resolved: 0, skipped: 0 };
    const rules = await listRules(deps);
    for (const rule of rules) {
      const condition = conditionOf(rule.kind);
      if (condition === undefined) continue;
      try {
        const readSince = await databaseNow(deps.database);
        const firing = await condition(deps, rule, Date.now());
        for (const one of firing) {
          if (await fire(deps.database, rule, one, readSince) !== undefined) {
            outcome.fired += 1;
            this.logger.warn(
              { rule: rule.name, kind: rule.kind, subject: one.subject, severity: rule.severity },
              `Alert fired: ${one.message}`,
            );
          }
        }
        const resolved = await resolveOthers(
          deps.database,
          rule,
          firing.map((one) => one.subject),
          readSince,
        );
        outcome.resolved += resolved.length;
        if (resolved.length > 0) {
          this.logger.info({ rule: rule.name, events: resolved }, "Alert resolved");
        }
        this.#failing.delete(rule.id);
      } catch (error) {
        outcome.skipped += 1;
        const text = errorText(error);
        if (this.#failing.get(rule.id) !== text) {
          this.#failing.set(rule.id, text);
          this.logger.warn(
            { rule: rule.name, kind: rule.kind, error: text },
            "Alert rule not evaluated this cycle: its condition could not be read",
          );
        }
      }
    }
    this.#firing = await firingBySeverity(deps.database);
    if (outcome.fired + outcome.resolved > 0) this.#o.onOwed?.();
    return outcome;
  }

  /** Said once per streak: nothing is lost, the next pass reads Postgres again. */
  protected override cycleFailed(error: unknown, consecutiveFailures: number): void {
    if (consecutiveFailures !== 1) return;
    this.logger.warn(
      { error: errorText(error) },
      "Alert evaluation failed: rules are judged again next cycle",
    );
  }

  override snapshot(): AlertEvaluatorSnapshot {
    return { ...super.snapshot(), alerts_firing: { ...this.#firing } };
  }
}
