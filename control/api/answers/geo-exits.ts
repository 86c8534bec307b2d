/** The exit reads' answers: the observation log, the exit table, provider accuracy. */
import * as v from "valibot";
import { OBSERVATION_SOURCES } from "../../../shared/geo/observation-wire.ts";
import { count, id, nullableTimestamp, pageOf, timestamp } from "./common.ts";

const country = v.nullable(v.string());
/** A share from 0 to 1; null when nothing could be judged. */
const share = v.nullable(v.number());

/** One observation of the log. */
export const ObservationAnswer = v.strictObject({
  id: v.string(),
  observed_at: timestamp,
  ip: v.string(),
  project_id: v.nullable(id),
  connector_id: v.nullable(id),
  proxy_id: v.nullable(id),
  source: v.picklist(OBSERVATION_SOURCES),
  session_id: v.nullable(v.string()),
  instance_id: v.nullable(v.string()),
  country,
  region: v.nullable(v.string()),
  city: v.nullable(v.string()),
  asn: v.nullable(count),
  claimed_country: country,
  /** The proxy was seen on another exit than the last one counted for it. */
  hand_out: v.boolean(),
});
export type ObservationView = v.InferOutput<typeof ObservationAnswer>;

export const ObservationLogAnswer = v.strictObject({
  items: v.array(ObservationAnswer),
  /** Pass as `cursor` for the next (older) page; null at the end. */
  next_cursor: v.nullable(v.string()),
});

/** One exit of a connector. */
export const ExitIpAnswer = v.strictObject({
  ip: v.string(),
  connector_id: id,
  connector_name: v.string(),
  project_id: id,
  country,
  region: v.nullable(v.string()),
  city: v.nullable(v.string()),
  asn: v.nullable(count),
  sources: v.array(v.string()),
  claimed_country: country,
  first_seen_at: timestamp,
  last_seen_at: timestamp,
  observations: count,
  hand_outs: count,
});
export type ExitIp = v.InferOutput<typeof ExitIpAnswer>;

export const ExitIpPageAnswer = pageOf(ExitIpAnswer);

const CONNECTOR_FIELDS = {
  connector_id: id,
  connector_name: v.string(),
  project_id: id,
  project_name: v.string(),
  kind: v.string(),
  provider: v.string(),
};

/** A connector's exits: what it claims against where they were seen. */
export const ConnectorExitsAnswer = v.strictObject({
  ...CONNECTOR_FIELDS,
  /** The countries it declares, and those its exits were promised in. */
  claimed_countries: v.array(v.string()),
  /** Where its exits were seen, most exits first; `country` null: not placed. */
  seen_countries: v.array(v.strictObject({ country, exits: count })),
  exits: count,
  observations: count,
  hand_outs: count,
  /** Exits with both a claim and a seen country, and those of them that agree. */
  exits_judged: count,
  exits_matching: count,
  accuracy: share,
  first_seen_at: nullableTimestamp,
  last_seen_at: nullableTimestamp,
});
export type ConnectorExits = v.InferOutput<typeof ConnectorExitsAnswer>;

export const ConnectorExitsListAnswer = v.strictObject({
  items: v.array(ConnectorExitsAnswer),
});

const AccuracyCounts = {
  exits_judged: count,
  exits_matching: count,
  accuracy: share,
};

/** A connector's provider accuracy: the share of its exits seen where they were claimed. */
export const ConnectorAccuracyAnswer = v.strictObject({
  ...CONNECTOR_FIELDS,
  ...AccuracyCounts,
  /** Per claimed country. */
  by_country: v.array(v.strictObject({ claimed_country: v.string(), ...AccuracyCounts })),
});
export type ConnectorAccuracy = v.InferOutput<typeof ConnectorAccuracyAnswer>;

export const AccuracyListAnswer = v.strictObject({
  items: v.array(ConnectorAccuracyAnswer),
});
