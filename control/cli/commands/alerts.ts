/**
 * `alerts rules|channels|events|deliveries`: alerting, for admins (docs/alerts.md). A channel's
 * signing secret is printed once, when it is made.
 */
import type { Command } from "commander";
import type {
  AlertChannel,
  AlertDelivery,
  AlertEvent,
  AlertRule,
} from "../../api/answers/alerts.ts";
import type { Client } from "../client.ts";
import {
  collectRepeated,
  connect,
  type JsonOption,
  leaf,
  outputOf,
  positiveInteger,
  wholeNumber,
} from "../command.ts";
import { emit, line, pc, printTable } from "../output.ts";
import { confirm } from "../prompt.ts";
import { pick, resolveConnector, resolveProject } from "../resolve.ts";

async function channelOf(client: Client, ref: string): Promise<AlertChannel> {
  const channels = await client.request<AlertChannel[]>("GET", "/alerts/channels");
  return pick(channels, ref, (channel) => channel.name, "channel");
}

async function ruleOf(client: Client, ref: string): Promise<AlertRule> {
  const rules = await client.request<AlertRule[]>("GET", "/alerts/rules");
  return pick(rules, ref, (rule) => rule.name, "rule");
}

const SEVERITY_COLOURS: Record<string, (text: string) => string> = {
  critical: pc.red,
  warning: pc.yellow,
  info: pc.dim,
};

function registerRules(alerts: Command): void {
  const rules = alerts.command("rules").description("What to watch");

  leaf(rules, "list", "List the alert rules", ["octoprox alerts rules list"])
    .action(async (options: JsonOption) => {
      const client = await connect();
      const list = await client.request<AlertRule[]>("GET", "/alerts/rules");
      emit(outputOf(options), list, () =>
        printTable(
          ["Name", "Kind", "Threshold", "Severity", "Quiet (s)", "Scope", "Channels", "Id"],
          list.map((rule) => [
            rule.name,
            rule.kind,
            rule.threshold,
            rule.severity,
            rule.quiet_period_seconds,
            rule.connector_id ?? rule.project_id ?? "all",
            rule.channel_ids.length,
            rule.id,
          ]),
          "No rule.",
        ));
    });

  leaf(rules, "add <name>", "Add an alert rule", [
    "octoprox alerts rules add shop-limit --kind traffic_limit -p shop --channel ops",
    "octoprox alerts rules add thin-pool --kind healthy_share --threshold 50 -p shop -c main",
    "octoprox alerts rules add backlog --kind job_backlog --threshold 1000 --severity critical",
  ])
    .requiredOption("--kind <kind>", "traffic_limit, healthy_share, job_backlog, tls_ca_expiry")
    .option("--threshold <n>", "the kind's threshold (percent, entries, days)", Number)
    .option("-p, --project <project>", "watch one project (name or id)")
    .option("-c, --connector <connector>", "watch one connector of --project (name or id)")
    .option("--severity <severity>", "info, warning (default) or critical")
    .option("--quiet-seconds <n>", "no new event for the same subject within it", wholeNumber)
    .option("--channel <channel>", "deliver to this channel (repeatable)", collectRepeated)
    .action(async (
      name: string,
      options: JsonOption & {
        kind: string;
        threshold?: number;
        project?: string;
        connector?: string;
        severity?: string;
        quietSeconds?: number;
        channel?: string[];
      },
    ) => {
      const client = await connect();
      let projectId: string | undefined;
      let connectorId: string | undefined;
      if (options.project) {
        const project = await resolveProject(client, options.project);
        if (options.connector) {
          connectorId = (await resolveConnector(client, project.id, options.connector)).id;
        } else projectId = project.id;
      }
      const channelIds = [];
      for (const ref of options.channel ?? []) channelIds.push((await channelOf(client, ref)).id);
      const rule = await client.request<AlertRule>("POST", "/alerts/rules", {
        body: {
          name,
          kind: options.kind,
          threshold: options.threshold,
          project_id: projectId,
          connector_id: connectorId,
          severity: options.severity,
          quiet_period_seconds: options.quietSeconds,
          channel_ids: channelIds,
        },
      });
      emit(outputOf(options), rule, () => line(`${pc.green("Added")} rule ${rule.name}.`));
    });

  leaf(rules, "remove <rule>", "Remove an alert rule, its events and deliveries", [
    "octoprox alerts rules remove shop-limit --yes",
  ])
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const rule = await ruleOf(client, ref);
      if (!await confirm(`Remove rule ${rule.name}?`, options.yes)) {
        line("Nothing removed.");
        return;
      }
      await client.request("DELETE", `/alerts/rules/${rule.id}`);
      emit(
        outputOf(options),
        { removed: rule },
        () => line(`${pc.green("Removed")} ${rule.name}.`),
      );
    });
}

function registerChannels(alerts: Command): void {
  const channels = alerts.command("channels").description("Where alerts are delivered");

  leaf(channels, "list", "List the alert channels", ["octoprox alerts channels list"])
    .action(async (options: JsonOption) => {
      const client = await connect();
      const list = await client.request<AlertChannel[]>("GET", "/alerts/channels");
      emit(outputOf(options), list, () =>
        printTable(
          ["Name", "Type", "Format", "URL", "Private", "Id"],
          list.map((channel) => [
            channel.name,
            channel.type,
            channel.format,
            channel.url,
            channel.allow_private_address ? "allowed" : "",
            channel.id,
          ]),
          "No channel.",
        ));
    });

  leaf(channels, "add <name>", "Add a channel (its signing secret is shown once)", [
    "octoprox alerts channels add ops --url https://hooks.example.com/octoprox",
    "octoprox alerts channels add chat --url https://hooks.slack.com/services/… --format slack",
    "octoprox alerts channels add oncall --url mailto:oncall@example.com",
  ])
    .requiredOption("--url <url>", "a webhook's http(s) URL, or mailto:address (email)")
    .option("--format <format>", "json (default) or slack")
    .option("--allow-private-address", "deliver to a private or loopback address")
    .action(async (
      name: string,
      options: JsonOption & { url: string; format?: string; allowPrivateAddress?: boolean },
    ) => {
      const client = await connect();
      const channel = await client.request<AlertChannel>("POST", "/alerts/channels", {
        body: {
          name,
          type: options.url.startsWith("mailto:") ? "email" : "webhook",
          url: options.url,
          format: options.format,
          allow_private_address: options.allowPrivateAddress ?? false,
        },
      });
      emit(outputOf(options), channel, () => {
        line(`${pc.green("Added")} channel ${channel.name}. Its signing secret, shown this once:`);
        line(channel.secret ?? "");
      });
    });

  leaf(channels, "remove <channel>", "Remove a channel and its deliveries", [
    "octoprox alerts channels remove ops --yes",
  ])
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const channel = await channelOf(client, ref);
      if (!await confirm(`Remove channel ${channel.name}?`, options.yes)) {
        line("Nothing removed.");
        return;
      }
      await client.request("DELETE", `/alerts/channels/${channel.id}`);
      emit(
        outputOf(options),
        { removed: channel },
        () => line(`${pc.green("Removed")} ${channel.name}.`),
      );
    });

  leaf(channels, "test <channel>", "Send a test delivery (follow it with `alerts deliveries`)", [
    "octoprox alerts channels test ops",
  ])
    .action(async (ref: string, options: JsonOption) => {
      const client = await connect();
      const channel = await channelOf(client, ref);
      const delivery = await client.request<AlertDelivery>(
        "POST",
        `/alerts/channels/${channel.id}/test`,
      );
      emit(
        outputOf(options),
        delivery,
        () => line(`${pc.green("Owed")} test delivery ${delivery.id} to ${channel.name}.`),
      );
    });
}

export function registerAlerts(program: Command): void {
  const alerts = program.command("alerts").description("Alert rules, channels and deliveries");
  registerRules(alerts);
  registerChannels(alerts);

  leaf(alerts, "events", "What fired, and when it resolved, newest first", [
    "octoprox alerts events",
    "octoprox alerts events --limit 20 --json",
  ])
    .option("--limit <n>", "how many (100)", positiveInteger)
    .action(async (options: JsonOption & { limit?: number }) => {
      const client = await connect();
      const list = await client.request<AlertEvent[]>("GET", "/alerts/events", {
        query: { limit: options.limit },
      });
      emit(outputOf(options), list, () =>
        printTable(
          ["Fired", "Resolved", "Severity", "Rule", "Message"],
          list.map((event) => [
            event.fired_at,
            event.resolved_at ?? pc.bold("firing"),
            (SEVERITY_COLOURS[event.severity] ?? String)(event.severity),
            event.rule_name,
            event.message,
          ]),
          "No event.",
        ));
    });

  leaf(alerts, "deliveries", "The delivery log, newest first, with each try", [
    "octoprox alerts deliveries",
    "octoprox alerts deliveries --json | jq '.[0].tries'",
  ])
    .option("--limit <n>", "how many (100)", positiveInteger)
    .action(async (options: JsonOption & { limit?: number }) => {
      const client = await connect();
      const list = await client.request<AlertDelivery[]>("GET", "/alerts/deliveries", {
        query: { limit: options.limit },
      });
      emit(outputOf(options), list, () =>
        printTable(
          ["Id", "Created", "Channel", "Action", "State", "Tries"],
          list.map((delivery) => [
            delivery.id,
            delivery.created_at,
            delivery.channel_name,
            delivery.action,
            delivery.state === "delivered"
              ? pc.green(delivery.state)
              : delivery.state === "failed"
              ? pc.red(delivery.state)
              : delivery.state,
            delivery.tries.map((t) => t.status_code ?? t.error ?? "?").join(", "),
          ]),
          "No delivery.",
        ));
    });
}
