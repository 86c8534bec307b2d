/**
 * Alert rules: a kind of condition, its scope, threshold, severity and quiet period, and the
 * channels it delivers to. Every rule saved is one the evaluator can judge: the kind's own checks
 * (control/model/alerts.ts checkRule) and the scope and channels found, each named on refusal.
 */
import { asc, eq, inArray } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import {
  alertChannels,
  alertRuleChannels,
  alertRules,
  connectors,
  projects,
} from "../../db/schema.ts";
import { type FieldIssue, NotFoundError, ValidationError } from "../../shared/errors.ts";
import { type AlertKind, type AlertSeverity, checkRule, type RuleShape } from "../model/alerts.ts";
import { isUuid, read, type ServiceDeps, write } from "../core/store.ts";

type RuleRow = typeof alertRules.$inferSelect;

/** A rule with the channels it delivers to. */
export interface AlertRule extends RuleRow {
  kind: AlertKind;
  severity: AlertSeverity;
  channelIds: string[];
}

type Deps = Pick<ServiceDeps, "database" | "changes">;

export interface RuleInput {
  name: string;
  kind: AlertKind;
  project_id?: string | null;
  connector_id?: string | null;
  threshold?: number | null;
  severity: AlertSeverity;
  quiet_period_seconds: number;
  channel_ids: string[];
}

export type RuleEdit = Partial<Omit<RuleInput, "kind">>;

/** The scope and the channels must exist; each one missing is named. */
async function checkReferences(tx: Tx, rule: RuleShape, channelIds: readonly string[]) {
  const issues: FieldIssue[] = [];
  if (rule.project_id !== null) {
    const [found] = await tx.select({ id: projects.id }).from(projects)
      .where(eq(projects.id, rule.project_id));
    if (!found) issues.push({ field: "body.project_id", message: "no project has this id" });
  }
  if (rule.connector_id !== null) {
    const [found] = await tx.select({ id: connectors.id }).from(connectors)
      .where(eq(connectors.id, rule.connector_id));
    if (!found) issues.push({ field: "body.connector_id", message: "no connector has this id" });
  }
  if (channelIds.length > 0) {
    const found = new Set(
      (await tx.select({ id: alertChannels.id }).from(alertChannels)
        .where(inArray(alertChannels.id, [...channelIds]))).map((row) => row.id),
    );
    channelIds.forEach((id, i) => {
      if (!found.has(id)) {
        issues.push({ field: `body.channel_ids.${i}`, message: "no channel has this id" });
      }
    });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

async function setChannels(tx: Tx, ruleId: string, channelIds: readonly string[]) {
  await tx.delete(alertRuleChannels).where(eq(alertRuleChannels.ruleId, ruleId));
  const unique = [...new Set(channelIds)];
  if (unique.length > 0) {
    await tx.insert(alertRuleChannels).values(unique.map((channelId) => ({ ruleId, channelId })));
  }
}

export async function createRule(deps: Deps, input: RuleInput): Promise<AlertRule> {
  const shape: RuleShape = {
    kind: input.kind,
    project_id: input.project_id ?? null,
    connector_id: input.connector_id ?? null,
    threshold: input.threshold ?? null,
  };
  checkRule(shape);
  const id = await write(deps, async (tx) => {
    await checkReferences(tx, shape, input.channel_ids);
    const [row] = await tx.insert(alertRules).values({
      name: input.name,
      kind: input.kind,
      projectId: shape.project_id,
      connectorId: shape.connector_id,
      threshold: shape.threshold,
      severity: input.severity,
      quietPeriodSeconds: input.quiet_period_seconds,
    }).returning({ id: alertRules.id });
    await setChannels(tx, row.id, input.channel_ids);
    return { result: row.id, change: null };
  });
  return await getRule(deps, id);
}

export async function updateRule(deps: Deps, id: string, edit: RuleEdit): Promise<AlertRule> {
  const before = await getRule(deps, id);
  const shape: RuleShape = {
    kind: before.kind,
    project_id: edit.project_id !== undefined ? edit.project_id : before.projectId,
    connector_id: edit.connector_id !== undefined ? edit.connector_id : before.connectorId,
    threshold: edit.threshold !== undefined ? edit.threshold : before.threshold,
  };
  checkRule(shape);
  await write(deps, async (tx) => {
    await checkReferences(tx, shape, edit.channel_ids ?? []);
    const [row] = await tx.update(alertRules).set({
      name: edit.name ?? before.name,
      projectId: shape.project_id,
      connectorId: shape.connector_id,
      threshold: shape.threshold,
      severity: edit.severity ?? before.severity,
      quietPeriodSeconds: edit.quiet_period_seconds ?? before.quietPeriodSeconds,
      updatedAt: new Date(),
    }).where(eq(alertRules.id, id)).returning({ id: alertRules.id });
    if (!row) throw new NotFoundError("Alert rule");
    if (edit.channel_ids !== undefined) await setChannels(tx, id, edit.channel_ids);
    return { result: undefined, change: null };
  });
  return await getRule(deps, id);
}

/** Deletes a rule with its events and their deliveries. */
export async function deleteRule(deps: Deps, id: string): Promise<void> {
  if (!isUuid(id)) throw new NotFoundError("Alert rule");
  await write(deps, async (tx) => {
    const gone = await tx.delete(alertRules).where(eq(alertRules.id, id))
      .returning({ id: alertRules.id });
    if (gone.length === 0) throw new NotFoundError("Alert rule");
    return { result: undefined, change: null };
  });
}

/** Every rule with its channels, oldest first (the evaluator's and the list's read). */
export async function listRules(deps: Pick<ServiceDeps, "database">): Promise<AlertRule[]> {
  return await read(deps, async (db) => {
    const rows = await db.select().from(alertRules).orderBy(asc(alertRules.createdAt));
    const links = await db.select().from(alertRuleChannels);
    const byRule = new Map<string, string[]>();
    for (const link of links) {
      byRule.set(link.ruleId, [...(byRule.get(link.ruleId) ?? []), link.channelId]);
    }
    return rows.map((row) => ({
      ...row,
      kind: row.kind as AlertKind,
      severity: row.severity as AlertSeverity,
      channelIds: (byRule.get(row.id) ?? []).sort(),
    }));
  });
}

export async function getRule(deps: Pick<ServiceDeps, "database">, id: string) {
  if (!isUuid(id)) throw new NotFoundError("Alert rule");
  const rule = (await listRules(deps)).find((row) => row.id === id);
  if (!rule) throw new NotFoundError("Alert rule");
  return rule;
}
