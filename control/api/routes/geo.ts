/**
 * IP databases and the attribution settings (`/api/v1/geo`): anyone signed in reads them and
 * asks where an address is; only admins change them, since a database decides where every
 * proxy is said to exit.
 */
import { errorText, StoreUnavailableError, ValidationError } from "../../../shared/errors.ts";
import { JobKind, UserRole } from "../../../shared/roles.ts";
import { getProject } from "../../services/projects.ts";
import {
  addFromUrl,
  addUploaded,
  checkNewUrlDatabase,
  deleteDatabase,
  type GeoDatabaseRow,
  getDatabase,
  listDatabases,
  patchDatabase,
  replaceUploadedFile,
} from "../../geo/databases.ts";
import { GeoDefinitions } from "../../geo/definitions.ts";
import { storedAuth } from "../../geo/download.ts";
import { checkFile, MAX_GEO_FILE_BYTES } from "../../geo/files.ts";
import { fetchChecked, refreshById } from "../../geo/refresh.ts";
import { type GeoSettings, readGeoSettings, updateGeoSettings } from "../../geo/settings.ts";
import { shippedFile } from "../../geo/shipped.ts";
import {
  FromUrlBody,
  GeoSettingsBody,
  InspectDatabaseQuery,
  LookupBody,
  PatchDatabaseBody,
  ReattributeBody,
  UploadDatabaseQuery,
} from "../../model/geo.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  GeoDatabaseAnswer,
  GeoDatabaseListAnswer,
  type GeoDatabaseRecord,
  GeoInspectAnswer,
  GeoLookupAnswer,
  GeoReattributeAnswer,
  GeoRefreshAnswer,
  GeoSettingsAnswer,
  type GeoSettingsRecord,
  GeoStatusAnswer,
} from "../answers/geo.ts";

const GEO = "/api/v1/geo";
const MAX_MB = MAX_GEO_FILE_BYTES / (1024 * 1024);
const FILE_BODY = {
  maxBytes: MAX_GEO_FILE_BYTES,
  description: `The file as it is (an .mmdb, or a geofeed's CSV text), up to ${MAX_MB} MiB`,
};

const iso = (date: Date | null) => date === null ? null : date.toISOString();

function presentDatabase(row: GeoDatabaseRow): GeoDatabaseRecord {
  return {
    id: row.id,
    name: row.name,
    format: row.format as GeoDatabaseRecord["format"],
    enabled: row.enabled,
    position: row.position,
    origin: row.origin as GeoDatabaseRecord["origin"],
    url: row.url,
    auth_type: storedAuth(row.auth)?.type ?? null,
    update_interval_hours: row.updateIntervalHours,
    checksum: row.checksum,
    size_bytes: row.sizeBytes,
    entries: row.entries,
    version: row.version,
    last_update_at: iso(row.lastUpdateAt),
    last_error: row.lastError,
    last_error_at: iso(row.lastErrorAt),
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

function presentSettings(settings: GeoSettings): GeoSettingsRecord {
  return {
    location_sources: [...settings.locationSources],
    location_conflict_rule: settings.locationConflictRule,
    observation_retention_days: settings.observationRetentionDays,
    exit_ip_retention_days: settings.exitIpRetentionDays,
    updated_at: iso(settings.updatedAt),
  };
}

const HOUR_MS = 3_600_000;

export function geoRoutes(deps: ApiDeps): Route[] {
  // The process's view of the databases in force (the echo's too): each file opened once.
  let own: GeoDefinitions | undefined;
  const inForce = () => deps.geo ?? (own ??= new GeoDefinitions({ deps, logger: deps.logger }));
  return [
    defineRoute({
      method: "get",
      path: `${GEO}/settings`,
      tag: "geo",
      summary: "The install's attribution settings",
      access: UserRole.viewer,
      responses: { 200: answer("The settings", GeoSettingsAnswer) },
      async handler({ c }) {
        return c.json(presentSettings(await readGeoSettings(deps)));
      },
    }),
    defineRoute({
      method: "put",
      path: `${GEO}/settings`,
      tag: "geo",
      summary: "Change the attribution settings",
      description: "`location_sources` (database, vendor, endpoint, in the order asked) and " +
        "`location_conflict_rule` (consensus or first) are the install's defaults, which a " +
        "project may override; a change to either judges every proxy's location again " +
        "(`reattribute all`). Fields left out keep their values.",
      access: UserRole.admin,
      body: GeoSettingsBody,
      responses: { 200: answer("The settings", GeoSettingsAnswer) },
      async handler({ c, body }) {
        const settings = await updateGeoSettings(deps, {
          locationSources: body.location_sources,
          locationConflictRule: body.location_conflict_rule,
          observationRetentionDays: body.observation_retention_days,
          exitIpRetentionDays: body.exit_ip_retention_days,
        });
        return c.json(presentSettings(settings));
      },
    }),
    defineRoute({
      method: "get",
      path: `${GEO}/databases`,
      tag: "geo",
      summary: "List the IP databases",
      description: "In the order they are consulted (position, then name); the shipped " +
        "database is consulted after them (`GET /geo/status`).",
      access: UserRole.viewer,
      responses: { 200: answer("The admin's databases", GeoDatabaseListAnswer) },
      async handler({ c }) {
        return c.json((await listDatabases(deps)).map(presentDatabase));
      },
    }),
    defineRoute({
      method: "post",
      path: `${GEO}/databases`,
      tag: "geo",
      summary: "Add an IP database from an uploaded file",
      description: "The file is the body, as it is. It is opened as `format` first: a file " +
        "that is not one is refused whole (422 naming the format; for a geofeed, each line at " +
        "fault with its number) and nothing is stored. An enabled database's file judges " +
        "every proxy's location again.",
      access: UserRole.admin,
      query: UploadDatabaseQuery,
      fileBody: FILE_BODY,
      responses: {
        201: answer("The database", GeoDatabaseAnswer),
        400: "The name is taken",
        413: `The file is over ${MAX_MB} MiB`,
      },
      async handler({ c, query, file }) {
        const row = await addUploaded(deps, {
          name: query.name,
          format: query.format,
          position: query.position,
          enabled: query.enabled,
        }, file);
        return c.json(presentDatabase(row), 201);
      },
    }),
    defineRoute({
      method: "post",
      path: `${GEO}/databases/from-url`,
      tag: "geo",
      summary: "Add an IP database downloaded from a URL, on a schedule",
      description: "The first download is made now, through the egress guard (HTTPS only, " +
        "no internal address, no redirect); a gzip or tar download is unpacked. `{YYYY}` and " +
        "`{MM}` in the URL are the month of each download (UTC). A download that brings no " +
        "file of the format is a 422 naming `body.url` and the reason, and nothing is stored. " +
        "Then geo_update downloads it again every `update_interval_hours` (default 24). " +
        "`auth` (basic or token) is sent as the Authorization header and never answered.",
      access: UserRole.admin,
      body: FromUrlBody,
      responses: {
        201: answer("The database, its first file in force", GeoDatabaseAnswer),
        400: "The name is taken",
      },
      async handler({ c, body }) {
        const input = {
          name: body.name,
          format: body.format,
          url: body.url,
          auth: body.auth ?? null,
          updateIntervalHours: body.update_interval_hours,
          position: body.position,
          enabled: body.enabled,
        };
        await checkNewUrlDatabase(deps, input);
        let first;
        try {
          first = await fetchChecked(deps, input.name, input, new Date());
        } catch (error) {
          throw new ValidationError([{
            field: "body.url",
            message: `gave no usable file: ${errorText(error)}`,
          }], { cause: error });
        }
        const row = await addFromUrl(deps, input, first);
        return c.json(presentDatabase(row), 201);
      },
    }),
    defineRoute({
      method: "post",
      path: `${GEO}/databases/inspect`,
      tag: "geo",
      summary: "Read what a file holds, storing nothing",
      description: "The same check an upload makes: 422 naming the format when the file is " +
        "not one.",
      access: UserRole.admin,
      query: InspectDatabaseQuery,
      fileBody: FILE_BODY,
      responses: {
        200: answer("What the file holds", GeoInspectAnswer),
        413: `The file is over ${MAX_MB} MiB`,
      },
      handler({ c, query, file }) {
        const checked = checkFile("upload", query.format, file, "body");
        return c.json({
          format: query.format,
          checksum: checked.checksum,
          size_bytes: checked.sizeBytes,
          entries: checked.entries,
          version: checked.version,
        });
      },
    }),
    defineRoute({
      method: "get",
      path: `${GEO}/databases/:id`,
      tag: "geo",
      summary: "Read an IP database",
      access: UserRole.viewer,
      responses: { 200: answer("The database", GeoDatabaseAnswer) },
      async handler({ c, params }) {
        return c.json(presentDatabase(await getDatabase(deps, params.id)));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${GEO}/databases/:id`,
      tag: "geo",
      summary: "Edit an IP database: name, enabled, position, and a URL database's download",
      description: "Enabling, disabling, moving or renaming a database with a file judges " +
        "every proxy's location again. `url`, `auth` (null: none) and " +
        "`update_interval_hours` are a URL database's only (400 for an uploaded one).",
      access: UserRole.admin,
      body: PatchDatabaseBody,
      responses: {
        200: answer("The database", GeoDatabaseAnswer),
        400: "The name is taken, or a download field of an uploaded database",
      },
      async handler({ c, params, body }) {
        const row = await patchDatabase(deps, params.id, {
          name: body.name,
          enabled: body.enabled,
          position: body.position,
          url: body.url,
          auth: body.auth,
          updateIntervalHours: body.update_interval_hours,
        });
        return c.json(presentDatabase(row));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${GEO}/databases/:id`,
      tag: "geo",
      summary: "Delete an IP database",
      description: "Its file is deleted by the next geo_update tick, unless another database " +
        "holds the same file.",
      access: UserRole.admin,
      responses: { 204: "Deleted" },
      async handler({ c, params }) {
        await deleteDatabase(deps, params.id);
        return c.body(null, 204);
      },
    }),
    defineRoute({
      method: "put",
      path: `${GEO}/databases/:id/file`,
      tag: "geo",
      summary: "Replace an uploaded database's file",
      description: "Checked as an upload is; the new file swaps in whole. A URL database " +
        "takes its file from its URL (400: refresh it).",
      access: UserRole.admin,
      fileBody: FILE_BODY,
      responses: {
        200: answer("The database", GeoDatabaseAnswer),
        400: "A URL database",
        413: `The file is over ${MAX_MB} MiB`,
      },
      async handler({ c, params, file }) {
        return c.json(presentDatabase(await replaceUploadedFile(deps, params.id, file)));
      },
    }),
    defineRoute({
      method: "post",
      path: `${GEO}/databases/:id/refresh`,
      tag: "geo",
      summary: "Download a URL database's file now",
      description: "Whatever its schedule. `outcome` is `updated` (a new file swapped in), " +
        "`unchanged` (the same file), or `failed` (the file in force kept; `last_error` says " +
        "why). An uploaded database has no URL (400).",
      access: UserRole.admin,
      responses: {
        200: answer("What the download came to, and the database", GeoRefreshAnswer),
        400: "An uploaded database",
      },
      async handler({ c, params }) {
        const refreshed = await refreshById(deps, params.id);
        return c.json({ outcome: refreshed.outcome, database: presentDatabase(refreshed.row) });
      },
    }),
    defineRoute({
      method: "post",
      path: `${GEO}/lookup`,
      tag: "geo",
      summary: "Where an address is, by each database in force and by the stack",
      access: UserRole.viewer,
      body: LookupBody,
      responses: { 200: answer("The answers", GeoLookupAnswer) },
      async handler({ c, body }) {
        const { databases, stack } = await inForce().current();
        const found = stack.lookup(body.ip);
        return c.json({
          ip: body.ip,
          answer: found === undefined ? null : {
            country: found.country,
            region: found.region,
            city: found.city,
            asn: found.asn,
            source: found.source,
          },
          databases: databases.map((entry) => {
            const place = entry.database.lookup(body.ip);
            return {
              name: entry.name,
              found: place === undefined ? null : {
                country: place.country,
                region: place.region,
                city: place.city,
                asn: place.asn,
              },
            };
          }),
        });
      },
    }),
    defineRoute({
      method: "post",
      path: `${GEO}/reattribute`,
      tag: "geo",
      summary: "Judge stored exits again with the databases and settings in force",
      description: "Asks the workers for a re-attribution of every proxy's exit, or of one " +
        "project's (`project_id`): each stored exit judged again by the databases, the vendor's " +
        "word and the settings in force, the rows that moved written and announced. Answered " +
        "once the ask is queued; the workers run it in the background.",
      access: UserRole.admin,
      body: ReattributeBody,
      responses: {
        202: answer("The scope asked for", GeoReattributeAnswer),
        404: "No such project",
        503: "Redis did not take the ask; nothing was asked",
      },
      async handler({ c, body }) {
        if (body.project_id !== undefined) await getProject(deps, body.project_id);
        const scope = body.project_id === undefined ? "all" : `project:${body.project_id}`;
        if (!await deps.jobs.request(JobKind.reattribute, [scope])) {
          throw new StoreUnavailableError("redis");
        }
        return c.json({ scope }, 202);
      },
    }),
    defineRoute({
      method: "get",
      path: `${GEO}/status`,
      tag: "geo",
      summary: "The databases' versions, ages, sizes and last errors, and the settings",
      access: UserRole.viewer,
      responses: { 200: answer("The status", GeoStatusAnswer) },
      async handler({ c }) {
        const [rows, settings, shipped] = await Promise.all([
          listDatabases(deps),
          readGeoSettings(deps),
          shippedFile(),
        ]);
        const now = Date.now();
        return c.json({
          settings: presentSettings(settings),
          databases: rows.map((row) => {
            const stored = row.lastUpdateAt?.getTime();
            const scheduled = row.origin === "url" && row.enabled && stored !== undefined;
            return {
              ...presentDatabase(row),
              age_seconds: stored === undefined
                ? null
                : Math.max(0, Math.floor((now - stored) / 1000)),
              next_update_at: scheduled
                ? new Date(stored + (row.updateIntervalHours ?? 24) * HOUR_MS).toISOString()
                : null,
              in_force: row.enabled && row.checksum !== null,
            };
          }),
          shipped: {
            name: shipped.name,
            format: "mmdb" as const,
            checksum: shipped.checksum,
            size_bytes: shipped.sizeBytes,
          },
        });
      },
    }),
  ];
}
