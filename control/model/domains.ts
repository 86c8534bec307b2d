/** `GET /projects/{id}/domains`: over how many days, and how many sites. */
import * as v from "valibot";
import { queryInteger } from "./common.ts";

/**
 * The most days the per-site page reads back: the last seven from Redis (and Postgres), older
 * ones from the history in Postgres, as far as the project's metrics_retention_days keeps them.
 */
export const DOMAIN_HISTORY_DAYS_MAX = 90;

export const DomainsQuery = v.object({
  days: queryInteger(1, DOMAIN_HISTORY_DAYS_MAX, 1),
  limit: queryInteger(1, 1000, 100),
});
