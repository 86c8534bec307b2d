/**
 * Leased loops run only while this controller leads. A standby's loop waits for the lead in the
 * process and touches neither Redis nor Postgres; every wait of a leading loop is raced against
 * the end of its lead, so a lost lead stops it at once. A cycle is never cancelled: what it
 * started runs to its end, and its own fenced writes decide what it may still do.
 */
import { PeriodicLoop, type PeriodicLoopOptions } from "../../shared/async/loop.ts";
import type { ControllerLease, Lead } from "./lease.ts";
import type { Logger } from "./logging.ts";

/**
 * Waits for the lead (standing by, with the failure streak reset since a peer runs the loop
 * now), and reports whether the lead is a new term. Resolves undefined when stopped.
 */
export async function awaitLead(
  lease: ControllerLease,
  signal: AbortSignal,
  onStandby: () => void,
): Promise<Lead | undefined> {
  const current = lease.lead;
  if (current) return current;
  onStandby();
  try {
    return await lease.waitForLead(signal);
  } catch {
    return undefined;
  }
}

export interface LeasedPeriodicLoopOptions extends PeriodicLoopOptions<Logger> {
  logger: Logger;
  lease: ControllerLease;
}

/** A periodic loop that runs only under the lead; its first cycle comes at once at each lead. */
export abstract class LeasedPeriodicLoop extends PeriodicLoop<Logger> {
  protected readonly lease: ControllerLease;
  #term = 0;

  constructor(options: LeasedPeriodicLoopOptions) {
    super(options);
    this.lease = options.lease;
  }

  /** Called once per term before its first cycle: redo what a lead starts with. */
  protected onNewLead(_lead: Lead): void {}

  protected override async nextDuty(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const lead = await awaitLead(this.lease, signal, () => this.resetStreak());
      if (!lead) return;
      if (lead.term !== this.#term) {
        this.#term = lead.term;
        this.onNewLead(lead);
        return;
      }
      await super.nextDuty(AbortSignal.any([signal, lead.signal]));
      if (!lead.signal.aborted) return;
    }
  }
}
