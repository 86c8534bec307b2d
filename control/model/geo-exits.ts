/**
 * Queries of the exit reads (`/api/v1/geo/observations`, `/geo/exits`, `/geo/exits/ips`,
 * `/geo/accuracy`): filters by project, connector, proxy, address and country, and pages.
 */
import * as v from "valibot";
import { COUNTRY_HINT, normaliseCountry } from "../../shared/countries.ts";
import { exitAddress } from "../../shared/geo/observation-wire.ts";
import { queryInteger, uuidField } from "./common.ts";

/** An exit address as the log and the exit table keep it (IPv6 short, mapped as IPv4). */
const ipField = v.pipe(
  v.string("must be an IP address"),
  v.maxLength(64, "must be an IP address"),
  v.transform((text) => exitAddress(text.trim())),
  v.check((ip) => ip !== undefined, "must be an IP address"),
  v.transform((ip) => ip!),
);

/** A cursor the observation log gave: `<observed_at epoch µs>-<id>`, both whole numbers. */
const cursorField = v.pipe(
  v.string("is not a cursor this API gave"),
  v.regex(/^\d{1,18}-\d{1,18}$/, "is not a cursor this API gave"),
  v.transform((text) => {
    const [micros, id] = text.split("-");
    return { micros, id };
  }),
);

export const ObservationsQuery = v.object({
  project_id: v.optional(uuidField),
  connector_id: v.optional(uuidField),
  proxy_id: v.optional(uuidField),
  ip: v.optional(ipField),
  limit: queryInteger(1, 500, 100),
  cursor: v.optional(cursorField),
});

/** Per-connector reads: every connector that has exits, or a project's, or one. */
export const ConnectorExitsQuery = v.object({
  project_id: v.optional(uuidField),
  connector_id: v.optional(uuidField),
});

export const ExitIpsQuery = v.object({
  project_id: v.optional(uuidField),
  connector_id: v.optional(uuidField),
  /** The country an exit was last seen in (`uk` read as GB). */
  country: v.optional(
    v.pipe(
      v.string(),
      v.check((value) => normaliseCountry(value) !== undefined, COUNTRY_HINT),
      v.transform((value) => normaliseCountry(value) as string),
    ),
  ),
  page: queryInteger(1, 1_000_000, 1),
  page_size: queryInteger(1, 1000, 100),
});
