/**
 * `geo databases list|add|add-url|replace|refresh|enable|disable|delete`, `geo settings` and
 * `geo lookup`: the IP databases exits are placed with, the attribution settings, and where an
 * address is. Writes are the admins'.
 */
import { basename, extname } from "node:path";
import { type Command, InvalidArgumentError, Option } from "commander";
import type {
  GeoDatabaseRecord,
  GeoLookupRecord,
  GeoRefreshRecord,
  GeoSettingsRecord,
} from "../../api/answers/geo.ts";
import type { Client } from "../client.ts";
import { connect, type JsonOption, leaf, outputOf, positiveInteger } from "../command.ts";
import { CliError } from "../errors.ts";
import { emit, formatBytes, formatCount, line, pc, printFields, printTable } from "../output.ts";
import { byteProgress } from "../progress.ts";
import { askSecret, confirm } from "../prompt.ts";
import { pick, resolveProject } from "../resolve.ts";
import { readSecretFile } from "../secrets.ts";
import { sizeOf, streamParts } from "../streams.ts";

const FORMATS = ["mmdb", "geofeed"];
const SOURCES = ["database", "vendor", "endpoint"];

/** A whole number that may be negative (a position). */
function integer(text: string): number {
  if (!/^-?\d{1,7}$/.test(text.trim())) throw new InvalidArgumentError("must be a whole number");
  return Number(text);
}

/** The format a file's name says, when it says one. */
function formatOf(file: string, given: string | undefined): string {
  if (given !== undefined) return given;
  const ending = extname(file).toLowerCase();
  if (ending === ".mmdb") return "mmdb";
  if (ending === ".csv" || ending === ".txt") return "geofeed";
  throw new CliError(`Cannot tell the format of ${basename(file)}: give --format mmdb|geofeed`);
}

async function resolveDatabase(client: Client, ref: string): Promise<GeoDatabaseRecord> {
  const list = await client.request<GeoDatabaseRecord[]>("GET", "/geo/databases");
  return pick(list, ref, (database) => database.name, "IP database");
}

function printDatabases(list: readonly GeoDatabaseRecord[]): void {
  printTable(
    [
      "Name",
      "Format",
      "Enabled",
      "Position",
      "Origin",
      "Version",
      "Entries",
      "Size",
      "Updated",
      "Last error",
      "Id",
    ],
    list.map((database) => [
      database.name,
      database.format,
      database.enabled ? pc.green("yes") : pc.dim("no"),
      database.position,
      database.origin === "url" ? `url, every ${database.update_interval_hours ?? 24} h` : "upload",
      database.version,
      formatCount(database.entries),
      formatBytes(database.size_bytes),
      database.last_update_at,
      database.last_error === null ? null : pc.red(database.last_error),
      database.id,
    ]),
    "No IP database of your own: the shipped country database answers alone.",
  );
}

function printDatabase(verb: string, database: GeoDatabaseRecord): void {
  const entries = `${formatCount(database.entries)} ${
    database.entries === 1 ? "entry" : "entries"
  }`;
  const version = database.version === null ? "" : `, ${database.version}`;
  line(
    `${pc.green(verb)} IP database ${database.name} (${database.format}, ${entries}, ${
      formatBytes(database.size_bytes)
    }${version}).`,
  );
}

/** Uploads a file as a request body, with a progress bar on a terminal. */
async function uploadFile<T>(
  client: Client,
  method: string,
  path: string,
  file: string,
  query: Record<string, string | number | boolean | undefined>,
): Promise<T> {
  const parts = [{ file }];
  const lengthBytes = await sizeOf(parts);
  const progress = byteProgress(`Uploading ${basename(file)}`, lengthBytes);
  try {
    return await client.request<T>(method, path, {
      query,
      stream: {
        body: streamParts(parts, (bytes) => progress.update(bytes)),
        contentType: "application/octet-stream",
        lengthBytes,
      },
    });
  } finally {
    progress.stop();
  }
}

interface AuthOptions {
  auth?: "basic" | "token";
  username?: string;
  secretFile?: string;
}

/** The download's credentials, the secret from a file or asked (never an argument). */
async function downloadAuth(options: AuthOptions): Promise<Record<string, string> | null> {
  if (options.auth === undefined) return null;
  const secret = options.secretFile
    ? await readSecretFile(options.secretFile)
    : await askSecret(options.auth === "basic" ? "Password (licence key): " : "Token: ");
  if (options.auth === "token") return { type: "token", token: secret };
  if (!options.username) throw new CliError("--auth basic needs --username");
  return { type: "basic", username: options.username, password: secret };
}

function registerDatabases(geo: Command): void {
  const databases = geo.command("databases").description(
    "IP databases: MaxMind DB files and geofeeds, uploaded or downloaded on a schedule",
  );

  leaf(databases, "list", "List the IP databases in the order they are consulted", [
    "octoprox geo databases list",
  ]).action(async (options: JsonOption) => {
    const client = await connect();
    const list = await client.request<GeoDatabaseRecord[]>("GET", "/geo/databases");
    emit(outputOf(options), list, () => printDatabases(list));
  });

  leaf(databases, "add <file>", "Upload a database file (admins)", [
    "octoprox geo databases add GeoLite2-City.mmdb --name geolite-city",
    "octoprox geo databases add exits.csv --name our-exits --position -1",
  ])
    .requiredOption("--name <name>", "its name, which attributions quote")
    .addOption(
      new Option("--format <format>", "mmdb or geofeed (from the file's ending otherwise)")
        .choices(FORMATS),
    )
    .option("--position <n>", "consulted in ascending position, then name (0)", integer)
    .option("--disabled", "store it without consulting it yet")
    .action(async (
      file: string,
      options: JsonOption & {
        name: string;
        format?: string;
        position?: number;
        disabled?: boolean;
      },
    ) => {
      const client = await connect();
      const database = await uploadFile<GeoDatabaseRecord>(client, "POST", "/geo/databases", file, {
        name: options.name,
        format: formatOf(file, options.format),
        position: options.position,
        enabled: options.disabled ? false : undefined,
      });
      emit(outputOf(options), database, () => printDatabase("Added", database));
    });

  leaf(
    databases,
    "add-url <url>",
    "Add a database downloaded from an HTTPS URL, now and on a schedule (admins)",
    [
      "octoprox geo databases add-url 'https://download.example/{YYYY}-{MM}/city.mmdb.gz' --name city --format mmdb",
      "octoprox geo databases add-url https://download.maxmind.com/geoip/databases/GeoLite2-City/download?suffix=tar.gz --name geolite --format mmdb --auth basic --username 123456 --secret-file key.txt",
    ],
  )
    .requiredOption("--name <name>", "its name, which attributions quote")
    .addOption(
      new Option("--format <format>", "mmdb or geofeed").choices(FORMATS).makeOptionMandatory(),
    )
    .option("--interval-hours <n>", "hours between downloads (24)", positiveInteger)
    .option("--position <n>", "consulted in ascending position, then name (0)", integer)
    .addOption(
      new Option("--auth <type>", "how the download authenticates").choices(["basic", "token"]),
    )
    .option("--username <user>", "the basic auth user (an account id)")
    .option("--secret-file <path>", "read the password or token from this file (asked otherwise)")
    .option("--disabled", "store it without consulting it yet")
    .addHelpText(
      "after",
      "\n{YYYY} and {MM} in the URL are the month of each download (UTC). A gzip or tar download\n" +
        "is unpacked. The first download is made now: a URL that gives no file of the format is\n" +
        "refused and nothing is stored.\n",
    )
    .action(async (
      url: string,
      options: JsonOption & AuthOptions & {
        name: string;
        format: string;
        intervalHours?: number;
        position?: number;
        disabled?: boolean;
      },
    ) => {
      const client = await connect();
      const database = await client.request<GeoDatabaseRecord>("POST", "/geo/databases/from-url", {
        body: {
          name: options.name,
          format: options.format,
          url,
          auth: await downloadAuth(options),
          update_interval_hours: options.intervalHours,
          position: options.position,
          enabled: options.disabled ? false : undefined,
        },
        // The first download may take a while: no client deadline.
        untimed: true,
      });
      emit(outputOf(options), database, () => printDatabase("Added", database));
    });

  leaf(
    databases,
    "replace <database> <file>",
    "Upload a new file for an uploaded database (admins)",
    [
      "octoprox geo databases replace our-exits exits.csv",
    ],
  ).action(async (ref: string, file: string, options: JsonOption) => {
    const client = await connect();
    const current = await resolveDatabase(client, ref);
    const database = await uploadFile<GeoDatabaseRecord>(
      client,
      "PUT",
      `/geo/databases/${current.id}/file`,
      file,
      {},
    );
    emit(outputOf(options), database, () => printDatabase("Replaced the file of", database));
  });

  leaf(databases, "refresh <database>", "Download a URL database's file now (admins)", [
    "octoprox geo databases refresh geolite",
  ]).action(async (ref: string, options: JsonOption) => {
    const client = await connect();
    const current = await resolveDatabase(client, ref);
    const refreshed = await client.request<GeoRefreshRecord>(
      "POST",
      `/geo/databases/${current.id}/refresh`,
      { untimed: true },
    );
    emit(outputOf(options), refreshed, () => {
      const database = refreshed.database;
      if (refreshed.outcome === "updated") printDatabase("Updated", database);
      else if (refreshed.outcome === "unchanged") {
        line(`${database.name}: the download is the file in force already.`);
      } else {
        line(`${pc.red("Refused")} the download of ${database.name}: ${database.last_error}`);
        line("The file in force is kept.");
      }
    });
    if (refreshed.outcome === "failed") process.exitCode = 1;
  });

  for (const [verb, enabled] of [["enable", true], ["disable", false]] as const) {
    leaf(
      databases,
      `${verb} <database>`,
      `${enabled ? "Consult" : "Stop consulting"} a database (admins)`,
      [`octoprox geo databases ${verb} geolite`],
    ).action(async (ref: string, options: JsonOption) => {
      const client = await connect();
      const current = await resolveDatabase(client, ref);
      const database = await client.request<GeoDatabaseRecord>(
        "PATCH",
        `/geo/databases/${current.id}`,
        { body: { enabled } },
      );
      emit(
        outputOf(options),
        database,
        () => line(`${pc.green(enabled ? "Enabled" : "Disabled")} IP database ${database.name}.`),
      );
    });
  }

  leaf(databases, "delete <database>", "Delete a database (admins)", [
    "octoprox geo databases delete geolite --yes",
  ])
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const database = await resolveDatabase(client, ref);
      if (!await confirm(`Delete IP database ${database.name}?`, options.yes)) {
        line("Nothing deleted.");
        return;
      }
      await client.request("DELETE", `/geo/databases/${database.id}`);
      emit(
        outputOf(options),
        { deleted: database },
        () => line(`${pc.green("Deleted")} IP database ${database.name}.`),
      );
    });
}

/** `--sources vendor,database`: each a known source, once. */
function sourceList(text: string): string[] {
  const list = text.split(",").map((part) => part.trim()).filter((part) => part !== "");
  const unknown = list.filter((source) => !SOURCES.includes(source));
  if (list.length === 0 || unknown.length > 0) {
    throw new InvalidArgumentError(`must be a comma-separated list of ${SOURCES.join(", ")}`);
  }
  return list;
}

/** A number of days, or `forever`. */
function daysOrForever(text: string): number | null {
  if (text.trim().toLowerCase() === "forever") return null;
  return positiveInteger(text);
}

export function registerGeo(program: Command): void {
  const geo = program.command("geo").description(
    "Where exits are: IP databases, the attribution settings, lookups",
  );
  registerDatabases(geo);

  leaf(geo, "settings", "Show the attribution settings, or change them (admins)", [
    "octoprox geo settings",
    "octoprox geo settings --sources database,vendor --conflict-rule first",
  ])
    .option(
      "--sources <list>",
      "the sources asked, in order: database, vendor, endpoint",
      sourceList,
    )
    .addOption(
      new Option("--conflict-rule <rule>", "when sources disagree").choices(["consensus", "first"]),
    )
    .option("--observation-retention-days <n>", "days observations are kept", positiveInteger)
    .option("--exit-ip-retention-days <n>", "days exit IPs are kept, or forever", daysOrForever)
    .action(async (
      options: JsonOption & {
        sources?: string[];
        conflictRule?: string;
        observationRetentionDays?: number;
        exitIpRetentionDays?: number | null;
      },
    ) => {
      const client = await connect();
      const body = {
        location_sources: options.sources,
        location_conflict_rule: options.conflictRule,
        observation_retention_days: options.observationRetentionDays,
        exit_ip_retention_days: options.exitIpRetentionDays,
      };
      const change = Object.values(body).some((value) => value !== undefined);
      const settings = change
        ? await client.request<GeoSettingsRecord>("PUT", "/geo/settings", { body })
        : await client.request<GeoSettingsRecord>("GET", "/geo/settings");
      emit(outputOf(options), settings, () =>
        printFields([
          ["Sources", settings.location_sources.join(", ")],
          ["Conflict rule", settings.location_conflict_rule],
          ["Observations kept", `${settings.observation_retention_days} days`],
          [
            "Exit IPs kept",
            settings.exit_ip_retention_days === null
              ? "forever"
              : `${settings.exit_ip_retention_days} days`,
          ],
        ]));
    });

  leaf(geo, "lookup <ip>", "Where an address is, by each database and by the stack", [
    "octoprox geo lookup 8.8.8.8",
  ]).action(async (ip: string, options: JsonOption) => {
    const client = await connect();
    const lookup = await client.request<GeoLookupRecord>("POST", "/geo/lookup", { body: { ip } });
    emit(outputOf(options), lookup, () => {
      const answer = lookup.answer;
      line(
        answer === null
          ? `${ip}: no database places it.`
          : `${ip}: ${[answer.country, answer.region, answer.city].filter(Boolean).join(", ")}${
            answer.asn === null ? "" : ` (AS${answer.asn})`
          }, from ${answer.source}`,
      );
      printTable(
        ["Database", "Country", "Region", "City", "ASN"],
        lookup.databases.map((entry) => [
          entry.name,
          entry.found?.country ?? null,
          entry.found?.region ?? null,
          entry.found?.city ?? null,
          entry.found?.asn ?? null,
        ]),
      );
    });
  });

  leaf(geo, "reattribute", "Judge stored exits again with the databases in force (admins)", [
    "octoprox geo reattribute",
    "octoprox geo reattribute --project shop",
  ])
    .option("-p, --project <project>", "only this project's exits (name or id)")
    .action(async (options: JsonOption & { project?: string }) => {
      const client = await connect();
      const project = options.project ? await resolveProject(client, options.project) : undefined;
      const asked = await client.request<{ scope: string }>("POST", "/geo/reattribute", {
        body: project === undefined ? {} : { project_id: project.id },
      });
      emit(outputOf(options), asked, () =>
        line(
          project === undefined
            ? "Every proxy's exit is being judged again."
            : `Project ${project.name}'s exits are being judged again.`,
        ));
    });
}
