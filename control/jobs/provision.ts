/**
 * provision: one country group for an "All countries" session pool, asked by a gateway whose
 * client named a country the pool has no rows for (`<connector>:<country>`). A run adds the
 * group's slots (the connector's `slots`, each a vendor session of its own) unless a group is
 * there; runs take turns on the connector's row lock, so two gateways asking at once make one.
 * A key that is not a connector and a two-letter code is logged and skipped. A Postgres failure
 * fails the run, which is delivered again.
 */
import { normaliseCountry } from "../../shared/countries.ts";
import { JobKind } from "../../shared/roles.ts";
import { addPoolGroup } from "../services/proxies.ts";
import { isUuid } from "../core/store.ts";
import type { WorkBatch } from "../core/job.ts";
import { SyncJob } from "./sync.ts";

/** What a provision key names, or undefined when it names nothing usable. */
export function parseProvisionKey(
  key: string,
): { connectorId: string; country: string } | undefined {
  const at = key.lastIndexOf(":");
  if (at === -1) return undefined;
  const connectorId = key.slice(0, at);
  const code = key.slice(at + 1);
  const country = /^[A-Za-z]{2}$/.test(code) ? normaliseCountry(code) : undefined;
  if (!isUuid(connectorId) || country === undefined) return undefined;
  return { connectorId: connectorId.toLowerCase(), country };
}

export class ProvisionJob extends SyncJob {
  override readonly kind = JobKind.provision;

  override async run(batch: WorkBatch, signal: AbortSignal): Promise<void> {
    for (const key of batch.keys) {
      signal.throwIfAborted();
      const asked = parseProvisionKey(key);
      if (asked === undefined) {
        this.o.logger.warn({ key }, "Provision key skipped: not <connector>:<two-letter country>");
        continue;
      }
      await this.provision(asked.connectorId, asked.country);
    }
  }

  /** Adds the group; answers how many rows it added (0: there already, or nothing to add). */
  async provision(connectorId: string, country: string): Promise<number> {
    const built = await this.build(connectorId);
    if (built === undefined) return 0;
    const { state, provider } = built;
    const type = provider.type;
    const allCountries = state.connector.countries.length === 0;
    if (
      type.mode !== "session" || provider.dynamic || !allCountries || !provider.renders.country ||
      (type.countries !== undefined && !type.countries.includes(country))
    ) {
      this.o.logger.warn(
        { connector: connectorId, country },
        "Provision skipped: the connector is not an all-countries session pool serving it",
      );
      return 0;
    }
    const rows = Array.from(
      { length: provider.slots },
      (_, i) => provider.sessionSlotRow(i, country),
    );
    const added = await addPoolGroup(this.o.deps, state.connector, country, rows);
    if (added.length > 0) {
      this.o.logger.info(
        { connector: connectorId, country, rows: added.length },
        "Country group provisioned",
      );
    }
    return added.length;
  }
}
