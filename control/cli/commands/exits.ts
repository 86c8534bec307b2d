/**
 * `exits`: every exit the connectors were seen leaving through (GET /geo/exits/ips), last seen
 * first, a page at a time: where each is, the sources that placed it, what was claimed for it,
 * first and last seen, observations and hand-outs. An exit seen elsewhere than claimed is
 * marked.
 */
import { type Command, InvalidArgumentError } from "commander";
import type { Page } from "../../api/answers/common.ts";
import type { ExitIp } from "../../api/answers/geo-exits.ts";
import { normaliseCountry } from "../../../shared/countries.ts";
import { connect, type JsonOption, leaf, outputOf, positiveInteger } from "../command.ts";
import { CliError } from "../errors.ts";
import { emit, formatCount, line, pc, printTable } from "../output.ts";
import { isUuid, resolveConnector, resolveProject } from "../resolve.ts";

function country(text: string): string {
  const code = normaliseCountry(text);
  if (code === undefined) throw new InvalidArgumentError("must be a country code such as DE");
  return code;
}

export function registerExits(program: Command): void {
  leaf(program, "exits", "List the exit IPs connectors were seen at, and where they are", [
    "octoprox exits --project shop",
    "octoprox exits --project shop --connector residential --country de",
    "octoprox exits --country us --json | jq -r '.items[].ip'",
  ])
    .option("-p, --project <project>", "only this project's (name or id)")
    .option("-c, --connector <connector>", "only this connector's (name with --project, or id)")
    .option("--country <code>", "only exits seen in this country", country)
    .option("--page <n>", "the page", positiveInteger, 1)
    .option("--page-size <n>", "exits a page (at most 1000)", positiveInteger, 50)
    .action(async (
      options: JsonOption & {
        project?: string;
        connector?: string;
        country?: string;
        page: number;
        pageSize: number;
      },
    ) => {
      const client = await connect();
      const project = options.project ? await resolveProject(client, options.project) : undefined;
      let connectorId: string | undefined;
      if (options.connector !== undefined) {
        if (project !== undefined) {
          connectorId = (await resolveConnector(client, project.id, options.connector)).id;
        } else if (isUuid(options.connector)) connectorId = options.connector.toLowerCase();
        else throw new CliError("A connector by name needs --project (or give its id)");
      }
      const page = await client.request<Page<ExitIp>>("GET", "/geo/exits/ips", {
        query: {
          project_id: project?.id,
          connector_id: connectorId,
          country: options.country,
          page: options.page,
          page_size: options.pageSize,
        },
      });
      emit(outputOf(options), page, () => {
        printTable(
          [
            "Exit IP",
            "Connector",
            "Country",
            "Region",
            "City",
            "ASN",
            "Sources",
            "Claimed",
            "First seen",
            "Last seen",
            "Seen",
            "Hand-outs",
          ],
          page.items.map((exit) => [
            exit.ip,
            exit.connector_name,
            exit.country,
            exit.region,
            exit.city,
            exit.asn === null ? null : `AS${exit.asn}`,
            exit.sources.join(", "),
            // Seen elsewhere than claimed: marked.
            exit.claimed_country !== null && exit.country !== null &&
              exit.claimed_country !== exit.country
              ? pc.yellow(`${exit.claimed_country} (seen elsewhere)`)
              : exit.claimed_country,
            exit.first_seen_at,
            exit.last_seen_at,
            exit.observations,
            exit.hand_outs,
          ]),
          "No exit matches.",
        );
        const pages = Math.max(1, Math.ceil(page.total / page.page_size));
        line(pc.dim(`Page ${page.page} of ${pages}, ${formatCount(page.total)} exits.`));
      });
    });
}
