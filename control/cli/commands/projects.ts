/** `projects list|get|create|update|delete`. */
import { type Command, Option } from "commander";
import type { Project } from "../../api/answers/projects.ts";
import {
  collectSet,
  connect,
  type JsonOption,
  leaf,
  outputOf,
  SET_HELP,
  wholeNumber,
} from "../command.ts";
import { emit, formatBytes, line, pc, printFields, printTable } from "../output.ts";
import { confirm } from "../prompt.ts";
import { resolveProject } from "../resolve.ts";
import { UsageError } from "../errors.ts";
import { TLS_MITM_BROWSERS, TLS_MITM_MODES } from "../../model/tls-mitm.ts";

/** The interception flags of create and update, as the API's body names them. */
interface TlsMitmOptions {
  tlsMitmMode?: string;
  tlsMitmBrowser?: string;
  tlsMitmBypass?: string[];
}

/**
 * `--tls-mitm-bypass a.example,.bank.example` (repeatable, lists joined): the hosts as typed,
 * which the API reads and judges (`""` clears the list).
 */
function collectHosts(value: string, previous: string[] = []): string[] {
  return [...previous, ...value.split(",").map((host) => host.trim()).filter((h) => h !== "")];
}

/** Adds the interception flags; the API keeps the one rule (control/model/tls-mitm.ts). */
function withTlsMitmOptions(command: Command): Command {
  return command
    .addOption(
      new Option("--tls-mitm-mode <mode>", "TLS interception of the project's tunnels")
        .choices(TLS_MITM_MODES),
    )
    .addOption(
      new Option("--tls-mitm-browser <browser>", "the browser override_ua presents")
        .choices(TLS_MITM_BROWSERS),
    )
    .option(
      "--tls-mitm-bypass <hosts>",
      'hosts and .suffixes whose tunnels stay raw, comma-separated, repeatable ("" clears)',
      collectHosts,
    );
}

function tlsMitmBody(options: TlsMitmOptions): Record<string, unknown> {
  return {
    tls_mitm_mode: options.tlsMitmMode,
    tls_mitm_browser: options.tlsMitmBrowser,
    tls_mitm_bypass: options.tlsMitmBypass,
  };
}

export function registerProjects(program: Command): void {
  const projects = program.command("projects").description("Projects: who uses the gateway");

  leaf(projects, "list", "List the projects", [
    "octoprox projects list",
    "octoprox projects list --json",
  ])
    .action(async (options: JsonOption) => {
      const client = await connect();
      const list = await client.request<Project[]>("GET", "/projects");
      emit(outputOf(options), list, () =>
        printTable(
          ["Name", "Username", "Strategy", "Interception", "Traffic", "Id"],
          list.map((project) => [
            project.name,
            project.username,
            project.strategy,
            project.tls_mitm_mode,
            project.traffic_usage
              ? `${formatBytes(project.traffic_usage.bytes)} of ${
                formatBytes(project.traffic_usage.limit_bytes)
              }`
              : null,
            project.id,
          ]),
          "No project yet: octoprox projects create <name>",
        ));
    });

  leaf(projects, "get <project>", "Show a project (by name or id)", [
    "octoprox projects get shop",
    "octoprox projects get shop --json",
  ]).action(async (ref: string, options: JsonOption) => {
    const client = await connect();
    const { id } = await resolveProject(client, ref);
    const project = await client.request<Project>("GET", `/projects/${id}`);
    emit(outputOf(options), project, () => printProject(project));
  });

  withTlsMitmOptions(leaf(projects, "create <name>", "Create a project", [
    "octoprox projects create shop",
    "octoprox projects create shop --username shop --strategy round_robin",
    "octoprox projects create shop --set max_retries=2 --set 'rate_limit={\"requests_per_second\":50}'",
    "octoprox projects create shop --tls-mitm-mode plain --tls-mitm-bypass .bank.example",
  ]))
    .option("--username <username>", "the proxy username clients present (the name by default)")
    .option("--password <password>", "the proxy password (generated when left out)")
    .option("--strategy <strategy>", "the routing strategy")
    .option("--description <text>", "a description")
    .option("--max-retries <n>", "other proxies tried after a failed attempt", wholeNumber)
    .option("--set <field=value>", SET_HELP, collectSet)
    .action(async (
      name: string,
      options: JsonOption & TlsMitmOptions & {
        username?: string;
        password?: string;
        strategy?: string;
        description?: string;
        maxRetries?: number;
        set?: Record<string, unknown>;
      },
    ) => {
      const client = await connect();
      const body = {
        name,
        username: options.username ?? name,
        password: options.password,
        strategy: options.strategy,
        description: options.description,
        max_retries: options.maxRetries,
        ...tlsMitmBody(options),
        ...options.set,
      };
      const project = await client.request<Project>("POST", "/projects", { body });
      emit(outputOf(options), project, () => {
        line(`${pc.green("Created")} project ${project.name} (${project.id}).`);
        printProject(project);
      });
    });

  withTlsMitmOptions(leaf(projects, "update <project>", "Change a project's fields", [
    "octoprox projects update shop --strategy least_used --max-retries 2",
    "octoprox projects update shop --tls-mitm-mode plain --tls-mitm-bypass bank.example,.pinned.example",
    "octoprox projects update shop --tls-mitm-bypass ''",
    "octoprox projects update shop --tls-mitm-mode off",
    "octoprox projects update shop --set 'rate_limit={\"requests_per_second\":50}'",
  ]))
    .option("--name <name>", "a new name")
    .option("--password <password>", "a new proxy password")
    .option("--strategy <strategy>", "the routing strategy")
    .option("--description <text>", "a description")
    .option("--max-retries <n>", "other proxies tried after a failed attempt", wholeNumber)
    .option("--set <field=value>", SET_HELP, collectSet)
    .action(async (
      ref: string,
      options: JsonOption & TlsMitmOptions & {
        name?: string;
        password?: string;
        strategy?: string;
        description?: string;
        maxRetries?: number;
        set?: Record<string, unknown>;
      },
    ) => {
      const client = await connect();
      const { id } = await resolveProject(client, ref);
      const body = Object.fromEntries(
        Object.entries({
          name: options.name,
          password: options.password,
          strategy: options.strategy,
          description: options.description,
          max_retries: options.maxRetries,
          ...tlsMitmBody(options),
          ...options.set,
        }).filter(([, value]) => value !== undefined),
      );
      if (Object.keys(body).length === 0) {
        throw new UsageError("Nothing to change: give a field to set (see --help).");
      }
      const project = await client.request<Project>("PATCH", `/projects/${id}`, { body });
      emit(outputOf(options), project, () => {
        line(`${pc.green("Updated")} project ${project.name} (${project.id}).`);
        printProject(project);
      });
    });

  leaf(projects, "delete <project>", "Delete a project with its connectors and proxies", [
    "octoprox projects delete shop",
    "octoprox projects delete shop --yes",
  ])
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const project = await resolveProject(client, ref);
      const sure = await confirm(
        `Delete project ${project.name} with its connectors and proxies?`,
        options.yes,
      );
      if (!sure) {
        line("Nothing deleted.");
        return;
      }
      await client.request("DELETE", `/projects/${project.id}`);
      emit(
        outputOf(options),
        { deleted: project },
        () => line(`${pc.green("Deleted")} project ${project.name}.`),
      );
    });
}

function printProject(project: Project): void {
  printFields([
    ["Name", project.name],
    ["Id", project.id],
    ["Username", project.username],
    ["Password", project.password],
    ["Strategy", project.strategy],
    ["Description", project.description],
    ["Session TTL", `${project.session_ttl_seconds} s`],
    ["Max retries", project.max_retries],
    [
      "Rate limit",
      project.rate_limit
        ? `${project.rate_limit.requests_per_second}/s (burst ${project.rate_limit.burst})`
        : null,
    ],
    ["Max connections", project.max_connections],
    [
      "Traffic quota",
      project.traffic_quota
        ? `${formatBytes(project.traffic_quota.limit_bytes)} a ${project.traffic_quota.period}`
        : null,
    ],
    [
      "Traffic used",
      project.traffic_usage
        ? `${formatBytes(project.traffic_usage.bytes)} (${project.traffic_usage.status})`
        : null,
    ],
    ["Allowed CIDRs", project.allowed_cidrs.join(", ")],
    ["Password-less CIDRs", project.passwordless_cidrs.join(", ")],
    [
      "TLS interception",
      project.tls_mitm_browser === null
        ? project.tls_mitm_mode
        : `${project.tls_mitm_mode} (${project.tls_mitm_browser})`,
    ],
    ["Interception bypass", project.tls_mitm_bypass.join(", ")],
    ["Created", project.created_at],
  ]);
}
