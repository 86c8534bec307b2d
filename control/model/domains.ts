/** `GET /projects/{id}/domains`: over how many days, and how many sites. */
import * as v from "valibot";
import { DOMAIN_COUNTS_DAYS } from "../../shared/redis-keys.ts";
import { queryInteger } from "./common.ts";

export const DomainsQuery = v.object({
  days: queryInteger(1, DOMAIN_COUNTS_DAYS, 1),
  limit: queryInteger(1, 1000, 100),
});
