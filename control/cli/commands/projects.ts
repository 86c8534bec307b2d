/** `projects list|get|create|delete`. */
import type { Command } from "commander";
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
          ["Name", "Username", "Strategy", "Traffic", "Id"],
          list.map((project) => [
            project.name,
            project.username,
            project.strategy,
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

  leaf(projects, "create <name>", "Create a project", [
    "octoprox projects create shop",
    "octoprox projects create shop --username shop --strategy round_robin",
    "octoprox projects create shop --set max_retries=2 --set 'rate_limit={\"requests_per_second\":50}'",
  ])
    .option("--username <username>", "the proxy username clients present (the name by default)")
    .option("--password <password>", "the proxy password (generated when left out)")
    .option("--strategy <strategy>", "the routing strategy")
    .option("--description <text>", "a description")
    .option("--max-retries <n>", "other proxies tried after a failed attempt", wholeNumber)
    .option("--set <field=value>", SET_HELP, collectSet)
    .action(async (
      name: string,
      options: JsonOption & {
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
        ...options.set,
      };
      const project = await client.request<Project>("POST", "/projects", { body });
      emit(outputOf(options), project, () => {
        line(`${pc.green("Created")} project ${project.name} (${project.id}).`);
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
    ["Created", project.created_at],
  ]);
}
