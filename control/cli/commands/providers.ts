/** `providers list|show|apply|delete|history`: the provider catalogue and custom descriptors. */
import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { parse as parseYaml } from "yaml";
import type { ProviderRecord } from "../../api/answers/providers.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { emit, line, pc, printTable } from "../output.ts";
import { confirm } from "../prompt.ts";

interface HistoryRecord {
  version: number;
  action: string;
  actor: string;
  at: string;
}

const collect = (value: string, previous: string[]) => [...previous, value];

export function registerProviders(program: Command): void {
  const providers = program.command("providers").description(
    "The vendor descriptors connectors are built from; custom ones (admins)",
  );

  leaf(providers, "list", "List every descriptor with its proxy types", [
    "octoprox providers list",
  ]).action(async (options: JsonOption) => {
    const client = await connect();
    const list = await client.request<ProviderRecord[]>("GET", "/providers");
    emit(outputOf(options), list, () =>
      printTable(
        ["Id", "Name", "Source", "Version", "Types"],
        list.map((p) => [
          p.id,
          p.name,
          p.source,
          p.version,
          p.proxy_types.map((t) => `${t.id} (${t.mode}${t.dynamic_sessions ? ", dynamic" : ""})`)
            .join(", "),
        ]),
      ));
  });

  leaf(providers, "show <id>", "A descriptor's fields and proxy types", [
    "octoprox providers show oxylabs",
  ]).action(async (id: string, options: JsonOption) => {
    const client = await connect();
    const provider = await client.request<ProviderRecord>(
      "GET",
      `/providers/${encodeURIComponent(id)}`,
    );
    emit(outputOf(options), provider, () => {
      line(`${pc.bold(provider.name)} (${provider.id}, ${provider.source} v${provider.version})`);
      if (provider.docs_url) line(provider.docs_url);
      const fields = [
        ...provider.credential_fields.map((f) => ({ ...f, of: "credential" })),
        ...provider.connector_fields.map((f) => ({ ...f, of: "connector" })),
      ];
      printTable(
        ["Field", "Of", "Type", "Required", "Secret", "Default"],
        fields.map((f) => [f.key, f.of, f.type, f.required, f.secret, f.default ?? ""]),
      );
      printTable(
        ["Type", "Mode", "Gateway", "Dynamic", "Renders"],
        provider.proxy_types.map((t) => [
          t.id,
          t.mode,
          t.host === null ? "" : `${t.host}:${t.port}`,
          t.dynamic_sessions,
          Object.entries(t.renders).filter(([, on]) => on).map(([name]) => name).join(", "),
        ]),
      );
      if (provider.egress_hosts.length > 0) line(`Calls: ${provider.egress_hosts.join(", ")}`);
    });
  });

  leaf(
    providers,
    "apply",
    "Store a custom descriptor from a YAML or JSON file (create or replace)",
    [
      "octoprox providers apply -f acme.yaml --confirm-host api.acme.example",
    ],
  )
    .requiredOption("-f, --file <path>", "the descriptor (YAML or JSON)")
    .option(
      "--confirm-host <host>",
      "a host its calls reach, confirmed (repeat for each)",
      collect,
      [],
    )
    .action(async (options: JsonOption & { file: string; confirmHost: string[] }) => {
      const client = await connect();
      const text = await readFile(options.file, "utf8");
      const body = { descriptor: text, confirm_hosts: options.confirmHost };
      const list = await client.request<ProviderRecord[]>("GET", "/providers");
      // The api reads the text itself (and names any field at fault); the id says create or replace.
      let id: unknown;
      try {
        id = (parseYaml(text) as { id?: unknown } | null)?.id;
      } catch {
        id = undefined;
      }
      const existing = list.find((p) => p.id === id && p.source === "custom");
      const saved = existing === undefined
        ? await client.request<ProviderRecord>("POST", "/providers", { body })
        : await client.request<ProviderRecord>("PUT", `/providers/${existing.id}`, { body });
      emit(
        outputOf(options),
        saved,
        () =>
          line(
            `${pc.green(existing === undefined ? "Stored" : "Replaced")} descriptor ${saved.id} ` +
              `(version ${saved.version}).`,
          ),
      );
    });

  leaf(providers, "delete <id>", "Delete a custom descriptor", [
    "octoprox providers delete acme --yes",
  ])
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (id: string, options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      if (
        !await confirm(`Delete descriptor ${id}? Connectors using it leave the feed.`, options.yes)
      ) {
        line("Nothing deleted.");
        return;
      }
      const answer = await client.request<{ deleted: string; orphaned_connectors: string[] }>(
        "DELETE",
        `/providers/${encodeURIComponent(id)}`,
      );
      emit(outputOf(options), answer, () => {
        line(`${pc.green("Deleted")} descriptor ${id}.`);
        if (answer.orphaned_connectors.length > 0) {
          line(
            `Left out of the feed until it is stored again: ${
              answer.orphaned_connectors.join(", ")
            }`,
          );
        }
      });
    });

  leaf(providers, "history <id>", "A custom descriptor's audit log", [
    "octoprox providers history acme",
  ]).action(async (id: string, options: JsonOption) => {
    const client = await connect();
    const rows = await client.request<HistoryRecord[]>(
      "GET",
      `/providers/${encodeURIComponent(id)}/history`,
    );
    emit(
      outputOf(options),
      rows,
      () =>
        printTable(
          ["Version", "Action", "By", "At"],
          rows.map((r) => [r.version, r.action, r.actor, r.at]),
        ),
    );
  });
}
