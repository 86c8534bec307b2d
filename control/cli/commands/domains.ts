/**
 * `domains`: what a project's block rules found per site (GET …/domains): a row per site with
 * the answers judged, blocked and rate-limited, the requests sent again, the bytes of the blocked
 * attempts and what they cost, what every answer cost per good one, the shadow rules' findings and the tier an escalated site is
 * served from (with its escalation line below the table); `--days` over the last days.
 * `--json`: the API's answer.
 */
import { type Command, InvalidArgumentError } from "commander";
import {
  blockedSpendText,
  costPerSuccessText,
  type DomainSiteAnswer,
  type DomainsPageAnswer,
} from "../../api/answers/domains.ts";
import { connect, type JsonOption, leaf } from "../command.ts";
import { emit, formatBytes, formatCount, line, pc, printTable } from "../output.ts";
import { resolveProject } from "../resolve.ts";
import { DOMAIN_HISTORY_DAYS_MAX } from "../../model/domains.ts";

function daysOf(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || value < 1 || value > DOMAIN_HISTORY_DAYS_MAX) {
    throw new InvalidArgumentError(`must be a whole number from 1 to ${DOMAIN_HISTORY_DAYS_MAX}`);
  }
  return value;
}

function shadowText(site: DomainSiteAnswer): string {
  if (site.shadow.length === 0) return "–";
  return site.shadow.map((s) => `${s.rule} ${s.verdict} ${formatCount(s.count)}`).join(", ");
}

export function registerDomains(program: Command): void {
  leaf(
    program,
    "domains <project>",
    "Show what a project's block rules found per site: blocked answers, retries, their cost",
    ["octoprox domains shop", "octoprox domains shop --days 7 --json"],
  )
    .option(
      "-d, --days <n>",
      `the last n UTC days, today included (1 to ${DOMAIN_HISTORY_DAYS_MAX})`,
      daysOf,
      1,
    )
    .addHelpText(
      "after",
      "A row per site (its registrable domain), the most blocked first: answers judged, blocked, " +
        "rate-limited, requests sent again through another exit, the bytes the blocked attempts " +
        "carried and their cost at the connectors' price per GB, and what rules in shadow mode " +
        "would have given (docs/blocking.md).\n",
    )
    .action(async (projectRef: string, options: JsonOption & { days: number }) => {
      const client = await connect();
      const project = await resolveProject(client, projectRef);
      const page = await client.request<DomainsPageAnswer>(
        "GET",
        `/projects/${project.id}/domains`,
        {
          query: { days: options.days, limit: 1000 },
        },
      );
      emit({ json: options.json === true }, page, () => {
        printTable(
          [
            "Site",
            "Judged",
            "Blocked",
            "Rate-limited",
            "Retries",
            "Blocked bytes",
            "Spend",
            "Per good",
            "Shadow",
            "Cooled exits",
            "Tier",
          ],
          page.sites.map((site) => [
            site.site,
            formatCount(site.judged),
            site.blocked > 0 ? pc.yellow(formatCount(site.blocked)) : formatCount(site.blocked),
            formatCount(site.rate_limited),
            formatCount(site.retries),
            formatBytes(site.blocked_bytes),
            blockedSpendText(site),
            costPerSuccessText(site),
            shadowText(site),
            formatCount(site.cooldowns),
            site.escalation === null
              ? "–"
              : site.escalation.tier_connectors.join(" + ") || `tier ${site.escalation.tier}`,
          ]),
          `Nothing judged for ${project.name} from ${page.from} to ${page.to}.`,
        );
        if (page.more > 0) line(pc.dim(`${formatCount(page.more)} more sites not shown.`));
        // Where the project escalates: a line per site that moved, as the dashboard shows it.
        for (const site of page.sites) {
          if (site.escalation !== null) line(site.escalation.summary);
        }
      });
    });
}
