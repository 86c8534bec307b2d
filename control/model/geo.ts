/**
 * IP database and attribution-settings bodies and queries (`/api/v1/geo/...`). A database file
 * itself is the raw body of an upload, checked against its stated format by the service, not
 * here.
 */
import * as v from "valibot";
import { conflictRuleField, locationSourcesField } from "./location.ts";
import { GEO_FORMATS } from "../../shared/geo/contract.ts";
import { parseIp } from "../../shared/net/ip.ts";
import { booleanField, integerField, nameField, textField, uuidField } from "./common.ts";

const MAX_URL_CHARS = 2048;

/** What `{YYYY}` and `{MM}` become in a download URL: the month the download runs in (UTC). */
export const URL_PLACEHOLDERS = ["{YYYY}", "{MM}"] as const;

/** A download URL with its placeholders filled for `at` (UTC). */
export function fillDownloadUrl(url: string, at: Date): string {
  const year = String(at.getUTCFullYear());
  const month = String(at.getUTCMonth() + 1).padStart(2, "0");
  return url.replaceAll("{YYYY}", year).replaceAll("{MM}", month);
}

/**
 * An HTTPS URL without credentials in it (they go in `auth`), `{YYYY}` and `{MM}` allowed:
 * downloads go through the egress guard, which takes HTTPS only.
 */
export const downloadUrlField = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.maxLength(MAX_URL_CHARS, `must be at most ${MAX_URL_CHARS} characters`),
  v.check((value) => {
    try {
      return new URL(fillDownloadUrl(value, new Date(0))).protocol === "https:";
    } catch {
      return false;
    }
  }, "must be an https:// URL"),
  v.check((value) => {
    try {
      const url = new URL(fillDownloadUrl(value, new Date(0)));
      return url.username === "" && url.password === "";
    } catch {
      return true;
    }
  }, "must not carry credentials: put them in `auth`"),
);

const secretText = v.pipe(
  v.string("must be text"),
  v.minLength(1, "must not be empty"),
  v.maxLength(1024, "must be at most 1024 characters"),
);

/**
 * How a download authenticates: HTTP basic (MaxMind's account id and licence key), or a bearer
 * token. Stored, never answered: an answer says only its type.
 */
export const DownloadAuthField = v.variant("type", [
  v.strictObject({
    type: v.literal("basic"),
    username: secretText,
    password: secretText,
  }),
  v.strictObject({
    type: v.literal("token"),
    token: secretText,
  }),
], "must be {type: basic, username, password} or {type: token, token}");
export type DownloadAuth = v.InferOutput<typeof DownloadAuthField>;

const formatField = v.picklist(GEO_FORMATS, `must be one of ${GEO_FORMATS.join(", ")}`);
/** Consulted in ascending position, then name. */
const positionField = integerField(-1_000_000, 1_000_000);
/** Hours between downloads of a URL database: an hour to a year. */
const intervalField = integerField(1, 8760);

/** A query's whole number (text), such as `position=2`. */
const queryPosition = v.pipe(
  v.string("must be a whole number"),
  v.regex(/^-?\d{1,7}$/, "must be a whole number from -1000000 to 1000000"),
  v.transform(Number),
  v.minValue(-1_000_000, "must be a whole number from -1000000 to 1000000"),
  v.maxValue(1_000_000, "must be a whole number from -1000000 to 1000000"),
);

const queryFlag = v.pipe(
  v.picklist(["true", "false"], "must be true or false"),
  v.transform((value) => value === "true"),
);

/** `POST /geo/databases?name=&format=`: the file is the body. */
export const UploadDatabaseQuery = v.object({
  name: nameField(),
  format: formatField,
  position: v.optional(queryPosition),
  enabled: v.optional(queryFlag),
});

/** `POST /geo/databases/inspect?format=`: what a file holds, nothing stored. */
export const InspectDatabaseQuery = v.object({
  format: formatField,
});

export const FromUrlBody = v.strictObject({
  name: nameField(),
  format: formatField,
  url: downloadUrlField,
  auth: v.optional(v.nullable(DownloadAuthField)),
  update_interval_hours: v.optional(intervalField, 24),
  position: v.optional(positionField),
  enabled: v.optional(booleanField),
});

export const PatchDatabaseBody = v.strictObject({
  name: v.optional(nameField()),
  enabled: v.optional(booleanField),
  position: v.optional(positionField),
  /** A URL database's own; an uploaded one has none. */
  url: v.optional(downloadUrlField),
  /** null: downloads without authentication. */
  auth: v.optional(v.nullable(DownloadAuthField)),
  update_interval_hours: v.optional(intervalField),
});

export const GeoSettingsBody = v.strictObject({
  /** The attribution sources in the order they are asked; at least one, each once. */
  location_sources: v.optional(locationSourcesField),
  location_conflict_rule: v.optional(conflictRuleField),
  observation_retention_days: v.optional(integerField(1, 3650)),
  /** null: exit IPs are kept forever. */
  exit_ip_retention_days: v.optional(v.nullable(integerField(1, 36_500))),
});

export const LookupBody = v.strictObject({
  ip: v.pipe(
    textField(64),
    v.trim(),
    // IPv4 in its dotted-quad form only: `inet_aton`'s shorter forms are not an exit anyone saw.
    v.check(
      (value) =>
        parseIp(value) !== undefined &&
        (value.includes(":") || /^\d{1,3}(\.\d{1,3}){3}$/.test(value)),
      "must be an IPv4 or IPv6 address",
    ),
  ),
});

/**
 * `POST /geo/reattribute`: judge stored exits again with the databases and settings in force,
 * every proxy's (no `project_id`) or one project's.
 */
export const ReattributeBody = v.strictObject({
  project_id: v.optional(uuidField),
});
