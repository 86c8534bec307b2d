/**
 * `extract <project>`, `extract renew|release <project> <lease>`: the extraction API with a
 * distribution key (`--key`, or OCTOPROX_DISTRIBUTION_KEY), not the admin login: what a script
 * that hands proxies to a crawler runs. The API's address is `--url`, else OCTOPROX_URL, else the
 * stored login's. A project is named by id; by name only where an admin login can look it up.
 */
import { type Command, InvalidArgumentError } from "commander";
import { Client } from "../client.ts";
import {
  collectRepeated,
  examplesText,
  type JsonOption,
  leaf,
  outputOf,
  positiveInteger,
  wholeNumber,
} from "../command.ts";
import { readStored, resolveConnection } from "../config-store.ts";
import { CliError, UsageError } from "../errors.ts";
import { emit, line, note, pc, printTable } from "../output.ts";
import type { ExtractAnswer, ExtractedProxy } from "../../provider-api/extraction/service.ts";
import { isUuid, resolveProject } from "../resolve.ts";

export const KEY_ENV = "OCTOPROX_DISTRIBUTION_KEY";

interface KeyOptions {
  key?: string;
  url?: string;
}

/** The extraction API's client: the given or remembered address, the distribution key. */
async function distributionClient(options: KeyOptions): Promise<Client> {
  const key = options.key || process.env[KEY_ENV];
  if (!key) {
    throw new UsageError(`A distribution key is needed: --key oxd_… or ${KEY_ENV}`);
  }
  const url = options.url || process.env.OCTOPROX_URL || (await readStored())?.url;
  if (!url) {
    throw new UsageError("The API's address is needed: --url, OCTOPROX_URL or `octoprox login`");
  }
  return new Client({
    url,
    token: key,
    unauthorizedHint: `(check the distribution key: --key or ${KEY_ENV})`,
  });
}

/** A project's id: as given, or looked up by name through the admin login. */
async function projectId(ref: string): Promise<string> {
  if (isUuid(ref)) return ref.toLowerCase();
  let admin: Client;
  try {
    admin = new Client(await resolveConnection());
  } catch (error) {
    throw new CliError(
      `"${ref}" is not a project id, and without an admin login its name cannot be looked up`,
      { cause: error },
    );
  }
  return (await resolveProject(admin, ref)).id;
}

/** `scheme://user:password@host:port`, the form most clients take a proxy in. */
export function proxyUrl(proxy: ExtractedProxy): string {
  const host = proxy.host.includes(":") ? `[${proxy.host}]` : proxy.host;
  const login = proxy.username === null
    ? ""
    : `${encodeURIComponent(proxy.username)}${
      proxy.password === null ? "" : `:${encodeURIComponent(proxy.password)}`
    }@`;
  return `${proxy.scheme}://${login}${host}:${proxy.port}`;
}

function mode(text: string): string {
  if (text !== "partial" && text !== "all_or_nothing") {
    throw new InvalidArgumentError("must be partial or all_or_nothing");
  }
  return text;
}

const withKey = (command: Command) =>
  command
    .option("--key <key>", `the distribution key (default: ${KEY_ENV})`)
    .option("--url <url>", "the API's address (default: OCTOPROX_URL, else the stored login's)");

interface ExtractOptions extends JsonOption, KeyOptions {
  count: number;
  country?: string;
  protocol?: string;
  carrier?: string;
  connector?: string[];
  mode?: string;
  minTtl?: number;
  maxCheckAge?: number;
  lease?: number;
  idempotencyKey?: string;
  urls?: boolean;
}

export function registerExtract(program: Command): void {
  const extract = program.command("extract").description(
    "Extract proxies for your own use (the extraction API, with a distribution key)",
  ).addHelpText(
    "after",
    "\nThe answer holds each proxy's credentials in clear: whoever has them uses the proxy " +
      "directly,\noutside the gateway's limits and metering. Release a lease when done.\n",
  );

  // The default: `octoprox extract <project> …` runs `take`.
  withKey(
    extract.command("take <project>", { isDefault: true })
      .description("Extract proxies under a lease (`octoprox extract <project>` runs this)")
      .option("--json", "print the answer as JSON (nothing else on stdout)")
      .addHelpText(
        "after",
        examplesText([
          "octoprox extract 3f1c2a9e-… --count 5 --country de",
          "octoprox extract 3f1c2a9e-… --count 10 --mode all_or_nothing --lease 600 --json",
          "OCTOPROX_DISTRIBUTION_KEY=oxd_… octoprox extract 3f1c2a9e-… --count 3 --urls",
        ]),
      ),
  )
    .requiredOption("--count <n>", "proxies wanted (1-1000)", positiveInteger)
    .option("--country <cc>", "their country (ISO 3166-1 alpha-2)")
    .option("--protocol <scheme>", "their scheme: http, https, socks4 or socks5")
    .option("--carrier <name>", "their carrier")
    .option("--connector <id>", "a connector to take from (repeatable)", collectRepeated)
    .option("--mode <mode>", "partial (default) or all_or_nothing", mode)
    .option("--min-ttl <s>", "each must stay usable at least this many seconds", wholeNumber)
    .option("--max-check-age <s>", "each checked at most this many seconds ago", positiveInteger)
    .option("--lease <s>", "the lease's length in seconds (default 300)", positiveInteger)
    .option("--idempotency-key <key>", "a retry with the same key gets the same answer")
    .option("--urls", "print one proxy URL a line (scheme://user:password@host:port)")
    .action(async (project: string, options: ExtractOptions) => {
      const client = await distributionClient(options);
      const id = await projectId(project);
      const answer = await client.request<ExtractAnswer>("POST", `/projects/${id}/extract`, {
        body: {
          count: options.count,
          country: options.country,
          protocol: options.protocol,
          carrier: options.carrier,
          connectors: options.connector,
          mode: options.mode,
          min_remaining_ttl_seconds: options.minTtl,
          max_health_check_age_seconds: options.maxCheckAge,
          lease_seconds: options.lease,
        },
        headers: options.idempotencyKey === undefined
          ? undefined
          : { "idempotency-key": options.idempotencyKey },
      });
      emit(outputOf(options), answer, () => {
        if (options.urls) {
          for (const proxy of answer.proxies) line(proxyUrl(proxy));
        } else {
          printTable(
            [
              "Scheme",
              "Host",
              "Port",
              "Username",
              "Password",
              "Country",
              "Carrier",
              "Usable until",
            ],
            answer.proxies.map((p) => [
              p.scheme,
              p.host,
              String(p.port),
              p.username,
              p.password,
              p.country,
              p.carrier,
              p.usable_until,
            ]),
            "No proxy returned.",
          );
        }
        const summary = `Returned ${answer.returned} of ${answer.requested}`;
        note(
          answer.lease === null
            ? `${summary}.`
            : `${summary}; lease ${answer.lease.id} until ${answer.lease.expires_at}. ` +
              `When done: octoprox extract release ${id} ${answer.lease.id}`,
        );
        if (answer.returned < answer.requested) {
          note(pc.yellow("Fewer proxies than asked were available; the pool refills."));
        }
      });
    });

  withKey(leaf(extract, "renew <project> <lease>", "Renew an extraction lease", [
    "octoprox extract renew 3f1c2a9e-… 8d2b… --lease 600",
  ]))
    .requiredOption("--lease <s>", "the lease's new length in seconds, from now", positiveInteger)
    .action(async (
      project: string,
      lease: string,
      options: JsonOption & KeyOptions & {
        lease: number;
      },
    ) => {
      const client = await distributionClient(options);
      const id = await projectId(project);
      const renewed = await client.request<{ id: string; expires_at: string }>(
        "POST",
        `/projects/${id}/extract/${encodeURIComponent(lease)}/renew`,
        { body: { lease_seconds: options.lease } },
      );
      emit(outputOf(options), renewed, () => {
        line(`${pc.green("Renewed")} lease ${renewed.id} until ${renewed.expires_at}.`);
      });
    });

  withKey(leaf(extract, "release <project> <lease>", "Release an extraction lease", [
    "octoprox extract release 3f1c2a9e-… 8d2b…",
  ]))
    .action(async (project: string, lease: string, options: JsonOption & KeyOptions) => {
      const client = await distributionClient(options);
      const id = await projectId(project);
      const released = await client.request<{ returned: number; retired: number }>(
        "POST",
        `/projects/${id}/extract/${encodeURIComponent(lease)}/release`,
      );
      emit(outputOf(options), released, () => {
        const back = released.returned > 0
          ? `, ${released.returned} back to the pool after its cool-down`
          : "";
        line(`${pc.green("Released")} lease ${lease}: ${released.retired} proxies retired${back}.`);
      });
    });
}
