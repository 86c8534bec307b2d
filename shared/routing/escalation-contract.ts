/**
 * The two sides of cost-aware escalation (shared/blocking/escalation.ts): the router asks where a
 * site stands (`EscalationView`, kept by the gateway's escalation book from Redis), and the book
 * asks the router how the project's connectors are tiered (`EscalationTiers`), so both rank with
 * the snapshot in force.
 */
import type { EscalationLevel, EscalationPolicy } from "../blocking/escalation.ts";

export interface EscalationView {
  /** Where the project's site stands; undefined: on the cheapest tier, not probing. */
  level(projectId: string, site: string): EscalationLevel | undefined;
}

export interface EscalationTiers {
  /** The project's policy and how many tiers its connectors make; undefined: not escalated. */
  escalation(projectId: string): { policy: Readonly<EscalationPolicy>; tiers: number } | undefined;
  /** The tier of the project's connector (0 the cheapest); undefined: not one of its tiers. */
  tierOf(projectId: string, connectorId: string): number | undefined;
  /** The projects escalated now (at least two tiers), by id. */
  escalatedProjects(): string[];
}
