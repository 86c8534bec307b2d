/** `connectors list|get|instances|pool|create|delete`, under a project (`--project <name or id>`). */
import type { Command } from "commander";
import type * as v from "valibot";
import type { CloudInstancesAnswer, Connector, PoolView } from "../../api/answers/connectors.ts";
import type { Credential } from "../../api/answers/credentials.ts";
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
import { scaleHoldWords } from "../../model/cloud.ts";
import { formatAge } from "../../core/format-age.ts";
import { pick, resolveConnector, resolveProject } from "../resolve.ts";

interface ProjectOption extends JsonOption {
  project: string;
}

export function registerConnectors(program: Command): void {
  const connectors = program.command("connectors").description(
    "Connectors: where a project's proxies come from",
  );

  leaf(connectors, "list", "List a project's connectors", [
    "octoprox connectors list --project shop",
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .action(async (options: ProjectOption) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const list = await client.request<Connector[]>("GET", `/projects/${project.id}/connectors`);
      emit(outputOf(options), list, () =>
        printTable(
          ["Name", "Kind", "Enabled", "Weight", "Proxies", "Countries", "Id"],
          list.map((connector) => [
            connector.name,
            connector.kind,
            connector.enabled,
            connector.weight,
            connector.proxy_count,
            connector.countries.join(","),
            connector.id,
          ]),
          `No connector in ${project.name} yet.`,
        ));
    });

  leaf(connectors, "get <connector>", "Show a connector (by name or id)", [
    "octoprox connectors get main --project shop",
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .action(async (ref: string, options: ProjectOption) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const { id } = await resolveConnector(client, project.id, ref);
      const connector = await client.request<Connector>(
        "GET",
        `/projects/${project.id}/connectors/${id}`,
      );
      emit(outputOf(options), connector, () => printConnector(connector));
    });

  leaf(connectors, "pool <connector>", "Show a provider_api connector's pool (--run: refill now)", [
    "octoprox connectors pool rotating --project shop",
    "octoprox connectors pool rotating --project shop --run",
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .option("--run", "ask a pool run (reap, check, refill) before showing it")
    .action(async (ref: string, options: ProjectOption & { run?: boolean }) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const { id, name } = await resolveConnector(client, project.id, ref);
      const path = `/projects/${project.id}/connectors/${id}/pool`;
      if (options.run) await client.request("POST", `${path}/run`);
      const pool = await client.request<PoolView>("GET", path);
      emit(outputOf(options), pool, () => {
        if (options.run) line(`${pc.green("Asked")} a pool run of ${name}.`);
        const c = pool.counts;
        const f = pool.fetch;
        const sizes = pool.pool === null
          ? "–"
          : `min ${pool.pool.min_size}, target ${pool.pool.target_size}, max ${pool.pool.max_size}`;
        printFields([
          ["Live", `${pool.live} (${sizes})`],
          ["Checking", c.checking],
          ["Routed", c.routed],
          ["Stock", c.stock],
          ["Suspect", c.suspect],
          ["Draining", c.draining],
          ["Extracted", c.extracted],
          ["Gateway reserve", pool.pool?.reserve_for_gateway ?? "all routed"],
          [
            "Fetches",
            `${f.success} success, ${f.duplicate_only} duplicate only, ${f.empty} empty, ${f.error} error (${f.rate_limited} rate limited)`,
          ],
          ["Streaks", `${f.empty_streak} empty, ${f.error_streak} error`],
          ["Backing off until", f.backoff_until ?? "–"],
          ["In flight", f.in_flight],
          [
            "Ledger",
            `${f.ledger_used} used, ${f.ledger_pending} pending of ${f.max_total ?? "no cap"}`,
          ],
          ["Depleted since", pool.depleted_at ?? "–"],
          ["Generation", pool.generation ?? "–"],
        ]);
      });
    });

  leaf(connectors, "instances <connector>", "Show a cloud connector's instances and scaling", [
    "octoprox connectors instances fleet --project shop",
    "octoprox connectors instances fleet --project shop --json",
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .action(async (ref: string, options: ProjectOption) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const { id } = await resolveConnector(client, project.id, ref);
      const view = await client.request<CloudInstances>(
        "GET",
        `/projects/${project.id}/connectors/${id}/instances`,
      );
      emit(outputOf(options), view, () => printInstances(view));
    });

  leaf(connectors, "create <name>", "Create a connector in a project", [
    "octoprox connectors create main --project shop",
    "octoprox connectors create eu --project shop --weight 2 --countries de,fr",
    "octoprox connectors create main --project shop --credential login --set enabled=false",
    "octoprox connectors create fleet --project shop --kind cloud --provider aws " +
    '--credential aws-main --set \'config={"instance_name":"fleet","region":"eu-west-1",' +
    '"instance_type":"t3.micro","ami_id":"ami-0123456789abcdef0"}\'',
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .option("--kind <kind>", "the connector kind", "static")
    .option("--provider <provider>", "a vendor's descriptor id, or aws, gcp or azure for a cloud")
    .option("--weight <n>", "its share of the traffic against the others", wholeNumber)
    .option("--countries <codes>", "country codes, comma-separated")
    .option("--credential <credential>", "a credential of the project (name or id)")
    .option("--healthcheck-url <url>", "the URL health checks ask through its proxies")
    .option("--set <field=value>", SET_HELP, collectSet)
    .action(async (
      name: string,
      options: ProjectOption & {
        kind: string;
        provider?: string;
        weight?: number;
        countries?: string;
        credential?: string;
        healthcheckUrl?: string;
        set?: Record<string, unknown>;
      },
    ) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      let credentialId: string | undefined;
      if (options.credential) {
        const credentials = await client.request<Credential[]>(
          "GET",
          `/projects/${project.id}/credentials`,
        );
        credentialId = pick(credentials, options.credential, (c) => c.name, "credential").id;
      }
      const body = {
        name,
        kind: options.kind,
        provider: options.provider,
        weight: options.weight,
        countries: options.countries?.split(",").map((code) => code.trim()).filter(Boolean),
        credential_id: credentialId,
        healthcheck_url: options.healthcheckUrl,
        ...options.set,
      };
      const connector = await client.request<Connector>(
        "POST",
        `/projects/${project.id}/connectors`,
        { body },
      );
      emit(outputOf(options), connector, () => {
        line(`${pc.green("Created")} connector ${connector.name} in ${project.name}.`);
        printConnector(connector);
      });
    });

  leaf(connectors, "delete <connector>", "Delete a connector with its proxies", [
    "octoprox connectors delete main --project shop --yes",
  ])
    .requiredOption("-p, --project <project>", "the project (name or id)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: ProjectOption & { yes?: boolean }) => {
      const client = await connect();
      const project = await resolveProject(client, options.project);
      const connector = await resolveConnector(client, project.id, ref);
      if (
        !await confirm(
          `Delete connector ${connector.name} of ${project.name} with its proxies?`,
          options.yes,
        )
      ) {
        line("Nothing deleted.");
        return;
      }
      await client.request("DELETE", `/projects/${project.id}/connectors/${connector.id}`);
      const cloud = connector.kind === "cloud";
      emit(
        outputOf(options),
        cloud ? { pending_deletion: connector } : { deleted: connector },
        () =>
          line(
            cloud
              ? `${pc.yellow("Deleting")} connector ${connector.name} of ${project.name}: ` +
                "its instances are terminating; it goes once none is left " +
                `(octoprox connectors instances ${connector.name} --project ${project.name}).`
              : `${pc.green("Deleted")} connector ${connector.name} of ${project.name}.`,
          ),
      );
    });
}

type CloudInstances = v.InferOutput<typeof CloudInstancesAnswer>;

function printInstances(view: CloudInstances): void {
  printFields([
    ["Cloud", view.provider],
    [
      "Instances",
      `${view.instances.length} (min ${view.min_proxies ?? "–"}, max ${view.max_proxies ?? "–"})`,
    ],
    ["Target", view.target ?? "– (no run yet)"],
    ["Holding", view.hold === null ? "–" : scaleHoldWords(view.hold)],
    [
      "Demand",
      view.demand_per_minute === null
        ? "–"
        : `${view.demand_per_minute.toFixed(1)} a minute (${view.demand_level})`,
    ],
    ["Last run", view.last_run_at ?? "–"],
    ["Last listing", view.last_listing_at ?? "–"],
    ["Last step", view.last_scaled_at ?? "–"],
    ["Last error", view.last_error ?? "–"],
    ["Backing off until", view.backoff_until ?? "–"],
    ["Pending deletion", view.pending_deletion],
  ]);
  line("");
  printTable(
    ["Name", "Status", "Address", "Age", "Rotates at", "Id"],
    view.instances.map((instance) => [
      instance.name ?? "–",
      instance.status === "draining" && instance.quiet_checks !== null
        ? `draining (${instance.quiet_checks} quiet)`
        : instance.status,
      instance.address,
      formatAge(instance.age_seconds * 1000),
      instance.rotates_at ?? "–",
      instance.instance_id ?? "–",
    ]),
    "No instance.",
  );
  if (view.creating.length > 0) {
    line("");
    printTable(
      ["Creating", "Purpose", "Since", "Stale"],
      view.creating.map((entry) => [entry.name, entry.purpose, entry.started_at, entry.stale]),
    );
  }
}

function printConnector(connector: Connector): void {
  printFields([
    ["Name", connector.name],
    ["Id", connector.id],
    ["Kind", connector.kind],
    ["Enabled", connector.enabled],
    ["Weight", connector.weight],
    ["Proxies", connector.proxy_count],
    ["Countries", connector.countries.join(", ")],
    ["Domains allowed", connector.domain_allow.join(", ")],
    ["Domains denied", connector.domain_deny.join(", ")],
    ["Health check URL", connector.healthcheck_url],
    [
      "Rate limit",
      connector.rate_limit_config
        ? `${connector.rate_limit_config.max_requests} in ${connector.rate_limit_config.window_seconds} s`
        : null,
    ],
    [
      "Traffic limit",
      connector.traffic_config?.limit_bytes
        ? `${
          formatBytes(connector.traffic_config.limit_bytes)
        } a ${connector.traffic_config.period}`
        : null,
    ],
    [
      "Traffic used",
      connector.traffic_usage
        ? `${formatBytes(connector.traffic_usage.bytes)} (${connector.traffic_usage.status})`
        : null,
    ],
    ["Last error", connector.last_error],
    ["Created", connector.created_at],
  ]);
}
