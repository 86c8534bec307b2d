/**
 * Where the request path tells escalation of each judged answer of a project (docs/blocking.md,
 * "Escalation"): the gateway's escalation book (gateway/blocking/escalations.ts) counts it by the
 * tier of the connector that gave it. Memory only, never throws.
 */
export interface EscalationReports {
  /** A judged answer through `connectorId`; `ok` false for a block or a rate limit. */
  judged(projectId: string, site: string, connectorId: string, ok: boolean): void;
}
