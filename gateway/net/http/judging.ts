/**
 * What the two exchanges (exchange.ts, the gateway's own wire; browser-exchange.ts, the
 * browser-grade engine's) share once an answer is judged (docs/blocking.md): the counts on
 * /metrics and per site, escalation's report, the cool-down of a blocked exit, and the one rule
 * that a request whose body was not kept goes to no other exit.
 */
import type { Finding, Judgement } from "../../../shared/blocking/judge.ts";
import type { UpstreamChoice } from "../../../shared/routing/contract.ts";
import type { HttpSession } from "../session/contract.ts";
import type { ForwardPlan, Judging } from "./forward-plan.ts";
import { BodyKind } from "./parse.ts";
import { verdictProxyStatus } from "./answers.ts";

/**
 * Counts what judging found and cools the exit down on a block; the finding the exchange holds
 * its answer for (`blocked` or `rate_limited` by a rule on), else undefined (the answer goes on).
 */
export function applyJudgement(
  session: HttpSession,
  plan: ForwardPlan,
  judging: Judging,
  upstream: UpstreamChoice,
  judgement: Judgement,
): Finding | undefined {
  const { metrics, domains, cooldowns, escalations } = session.ctx;
  const projectId = plan.client.projectId;
  if (judgement.shadows !== undefined) {
    for (const finding of judgement.shadows) {
      metrics.verdict(finding.verdict, true);
      domains?.shadow(projectId, judging.site, finding.rule, finding.verdict);
    }
  }
  const acted = judgement.acted;
  if (acted !== undefined) metrics.verdict(acted.verdict, false);
  if (plan.client.blocking?.escalation !== undefined) {
    const ok = acted === undefined || acted.verdict === "ok";
    escalations?.judged(projectId, judging.site, upstream.connectorId, ok);
  }
  if (acted === undefined || acted.verdict === "ok") {
    domains?.judged(projectId, judging.site, upstream.connectorId, "ok", 0);
    return undefined;
  }
  // A body not kept (too large, or a method not retried) cannot go again: no other exit.
  if (plan.framing.kind !== BodyKind.none && judging.keptBody === undefined) {
    plan.verdictAttempts = plan.turn;
  }
  cooldowns?.coolDown(judging.site, upstream.proxyId, acted.coolDownMs, projectId);
  return acted;
}

/** A blocked answer's attempt, counted for its site: a dropped one was sent again. */
export function tallyBlocked(
  session: HttpSession,
  plan: ForwardPlan,
  upstream: UpstreamChoice,
  verdict: Finding | undefined,
  bytes: number,
  retried: boolean,
): void {
  const tally = session.ctx.domains;
  const judging = plan.judging;
  if (tally === undefined || judging === undefined || verdict === undefined) return;
  const projectId = plan.client.projectId;
  const kind = verdict.verdict === "rate_limited" ? "rate_limited" : "blocked";
  tally.judged(projectId, judging.site, upstream.connectorId, kind, bytes);
  if (retried) tally.retried(projectId, judging.site, upstream.connectorId);
}

/** A judged answer that went on to the client: the bytes its attempt carried both ways. */
export function tallyGood(
  session: HttpSession,
  plan: ForwardPlan,
  upstream: UpstreamChoice,
  bytes: number,
): void {
  const judging = plan.judging;
  if (judging === undefined || bytes <= 0) return;
  session.ctx.domains?.goodBytes(plan.client.projectId, judging.site, upstream.connectorId, bytes);
}

/**
 * The fields a judged request's answer gains: the attempts made once more than one was, and the
 * verdict of an answer a rule blocked (delivered: no other exit served). Whole lines, CRLF each.
 */
export function judgedFields(plan: ForwardPlan, verdict: Finding | undefined, status: number) {
  const turn = plan.turn ?? 1;
  if (turn === 1 && verdict === undefined) return "";
  let fields = `X-Octoprox-Attempts: ${turn}\r\n`;
  if (verdict !== undefined) {
    fields += `Proxy-Status: ${verdictProxyStatus(status, verdict.verdict, verdict.rule)}\r\n`;
  }
  return fields;
}
