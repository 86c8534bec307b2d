/** `proxies list|get|create|delete|import|lift`, under a project. */
import { basename } from "node:path";
import type { Command } from "commander";
import type { Page } from "../../api/answers/common.ts";
import type { Connector } from "../../api/answers/connectors.ts";
import type { Proxy, UploadReport } from "../../api/answers/proxies.ts";
import type { Client } from "../client.ts";
import {
  collectSet,
  connect,
  type JsonOption,
  leaf,
  outputOf,
  positiveInteger,
  SET_HELP,
} from "../command.ts";
import { emit, formatCount, line, pc, printFields, printTable } from "../output.ts";
import { byteProgress } from "../progress.ts";
import { confirm } from "../prompt.ts";
import { type Named, resolveConnector, resolveProject, resolveProxy } from "../resolve.ts";
import { sizeOf, streamParts } from "../streams.ts";

interface ProjectOption extends JsonOption {
  project: string;
}

/** How many refused lines a person sees; `--json` has them all. */
const SHOWN_REFUSALS = 50;

const projectOption = ["-p, --project <project>", "the project (name or id)"] as const;

async function connectorNames(client: Client, project: Named): Promise<Map<string, string>> {
  const connectors = await client.request<Connector[]>("GET", `/projects/${project.id}/connectors`);
  return new Map(connectors.map((connector) => [connector.id, connector.name]));
}

export function registerProxies(program: Command): void {
  const proxies = program.command("proxies").description("Proxies: the upstream addresses");

  leaf(proxies, "list", "List a project's proxies, a page at a time", [
    "octoprox proxies list --project shop",
    "octoprox proxies list --project shop --connector main --status unhealthy",
    "octoprox proxies list --project shop --search 203.0.113 --page 2 --json",
  ])
    .requiredOption(...projectOption)
    .option("-c, --connector <connector>", "only this connector's (name or id)")
    .option("--status <status>", "only this status (healthy, degraded, unhealthy, …)")
    .option("--country <code>", "only this country")
    .option("--search <text>", "part of the host")
    .option("--sort <order>", "created, status, country or status_changed")
    .option("--page <n>", "the page", positiveInteger, 1)
    .option("--page-size <n>", "proxies a page (at most 1000)", positiveInteger, 50)
    .action(async (
      options: ProjectOption & {
        connector?: string;
        status?: string;
        country?: string;
        search?: string;
        sort?: string;
        page: number;
        pageSize: number;
      },
    ) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const connectorId = options.connector
        ? (await resolveConnector(client, project.id, options.connector)).id
        : undefined;
      const page = await client.request<Page<Proxy>>("GET", `/projects/${project.id}/proxies`, {
        query: {
          connector_id: connectorId,
          status: options.status,
          country: options.country,
          search: options.search,
          sort: options.sort,
          page: options.page,
          page_size: options.pageSize,
        },
      });
      if (options.json) return emit(outputOf(options), page, () => {});
      const names = await connectorNames(client, project);
      printTable(
        ["Proxy", "Connector", "Country", "Status", "Quarantined", "Id"],
        page.items.map((proxy) => [
          proxy.url,
          names.get(proxy.connector_id) ?? proxy.connector_id,
          proxy.country,
          proxy.status,
          proxy.quarantined ? `${proxy.quarantine_remaining_seconds} s left` : null,
          proxy.id,
        ]),
        "No proxy matches.",
      );
      const pages = Math.max(1, Math.ceil(page.total / page.page_size));
      line(pc.dim(`Page ${page.page} of ${pages}, ${formatCount(page.total)} proxies.`));
    });

  leaf(proxies, "get <proxy>", "Show a proxy (by id, URL or host:port)", [
    "octoprox proxies get 0b6f… --project shop",
    "octoprox proxies get 203.0.113.7:3128 --project shop",
  ])
    .requiredOption(...projectOption)
    .action(async (ref: string, options: ProjectOption) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const id = await resolveProxy(client, project.id, ref);
      const proxy = await client.request<Proxy>("GET", `/projects/${project.id}/proxies/${id}`);
      emit(outputOf(options), proxy, () => printProxy(proxy));
    });

  leaf(proxies, "create <url>", "Add one proxy to a connector", [
    "octoprox proxies create http://203.0.113.7:3128 --project shop --connector main",
    "octoprox proxies create socks5://u:p@203.0.113.8:1080 -p shop -c main --country de",
  ])
    .requiredOption(...projectOption)
    .requiredOption("-c, --connector <connector>", "the connector (name or id)")
    .option("--country <code>", "its country")
    .option("--set <field=value>", SET_HELP, collectSet)
    .action(async (
      url: string,
      options: ProjectOption & {
        connector: string;
        country?: string;
        set?: Record<string, unknown>;
      },
    ) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const connector = await resolveConnector(client, project.id, options.connector);
      const proxy = await client.request<Proxy>("POST", `/projects/${project.id}/proxies`, {
        body: { connector_id: connector.id, url, country: options.country, ...options.set },
      });
      emit(outputOf(options), proxy, () => {
        line(`${pc.green("Added")} ${proxy.url} to ${connector.name}.`);
        printProxy(proxy);
      });
    });

  leaf(proxies, "delete <proxy>", "Delete a proxy (by id, URL or host:port)", [
    "octoprox proxies delete 0b6f… --project shop --yes",
    "octoprox proxies delete http://203.0.113.7:3128 --project shop --yes",
  ])
    .requiredOption(...projectOption)
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: ProjectOption & { yes?: boolean }) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const id = await resolveProxy(client, project.id, ref);
      const proxy = await client.request<Proxy>("GET", `/projects/${project.id}/proxies/${id}`);
      if (!await confirm(`Delete proxy ${proxy.url}?`, options.yes)) {
        line("Nothing deleted.");
        return;
      }
      await client.request("DELETE", `/projects/${project.id}/proxies/${proxy.id}`);
      emit(
        outputOf(options),
        { deleted: proxy },
        () => line(`${pc.green("Deleted")} ${proxy.url}.`),
      );
    });

  leaf(proxies, "lift <proxy>", "End a proxy's quarantine now (by id, URL or host:port)", [
    "octoprox proxies lift 0b6f… --project shop",
    "octoprox proxies lift 203.0.113.7:3128 --project shop",
  ])
    .requiredOption(...projectOption)
    .action(async (ref: string, options: ProjectOption) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const id = await resolveProxy(client, project.id, ref);
      const answer = await client.request(
        "POST",
        `/projects/${project.id}/proxies/${id}/unquarantine`,
      );
      emit(
        outputOf(options),
        answer,
        () =>
          line(
            `${
              pc.green("Lifted")
            } the quarantine of ${ref}: gateways route to it with the next feed.`,
          ),
      );
    });

  leaf(
    proxies,
    "import <file>",
    "Upload a list of proxies (one URL a line, optionally a country)",
    [
      "octoprox proxies import proxies.txt --project shop --connector main",
      "octoprox proxies import proxies.txt -p shop -c main --json > report.json",
    ],
  )
    .requiredOption(...projectOption)
    .requiredOption("-c, --connector <connector>", "the static connector (name or id)")
    .addHelpText(
      "after",
      "\nThe file: one proxy URL a line (scheme://[user:pass@]host:port), optionally followed by\n" +
        "whitespace and a country code; blank lines and lines starting with # are skipped.\n" +
        "Lines the connector already has count as duplicates; refused lines are listed with\n" +
        "their line number and reason. At most 32 MB in one import.\n",
    )
    .action(async (file: string, options: ProjectOption & { connector: string }) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const connector = await resolveConnector(client, project.id, options.connector);
      const parts = [{ file }];
      const lengthBytes = await sizeOf(parts);
      const progress = byteProgress(`Uploading ${basename(file)}`, lengthBytes);
      let report: UploadReport;
      try {
        report = await client.request<UploadReport>(
          "POST",
          `/projects/${project.id}/proxies/upload`,
          {
            query: { connector_id: connector.id },
            stream: {
              body: streamParts(parts, (bytes) => progress.update(bytes)),
              contentType: "text/plain; charset=utf-8",
              lengthBytes,
            },
          },
        );
      } finally {
        progress.stop();
      }
      emit(outputOf(options), report, () => printUpload(report, connector.name));
    });
}

function printUpload(report: UploadReport, connector: string): void {
  line(
    `${formatCount(report.total_lines)} lines read: ${
      pc.green(`${formatCount(report.added)} added`)
    }, ` +
      `${formatCount(report.duplicates)} duplicates, ` +
      `${report.refused > 0 ? pc.red(`${formatCount(report.refused)} refused`) : "0 refused"} ` +
      `(connector ${connector}).`,
  );
  if (report.errors.length === 0) return;
  printTable(
    ["Line", "Reason"],
    report.errors.slice(0, SHOWN_REFUSALS).map((error) => [String(error.line), error.reason]),
  );
  if (report.errors.length > SHOWN_REFUSALS) {
    line(
      pc.dim(
        `… and ${
          formatCount(report.errors.length - SHOWN_REFUSALS)
        } more (--json lists every one).`,
      ),
    );
  }
}

function printProxy(proxy: Proxy): void {
  printFields([
    ["URL", proxy.url],
    ["Id", proxy.id],
    ["Connector", proxy.connector_id],
    ["Country", proxy.country],
    ["Status", proxy.status],
    ["Status since", proxy.status_changed_at],
    ["Quarantined", proxy.quarantined ? `${proxy.quarantine_remaining_seconds} s left` : false],
    ["Last checked", proxy.last_checked_at],
    ["Created", proxy.created_at],
  ]);
}
