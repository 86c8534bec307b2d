/**
 * `sequence show|set|clear <project>`: a project's connector sequence (sequential routing: the
 * gateways serve the current connector alone and move on when it runs dry), over the admin API.
 */
import type { Command } from "commander";
import type { Sequence } from "../../api/answers/sequences.ts";
import { connect, type JsonOption, leaf, outputOf } from "../command.ts";
import { ApiError } from "../errors.ts";
import { emit, line, pc, printFields, printTable } from "../output.ts";
import { confirm } from "../prompt.ts";
import { resolveConnector, resolveProject } from "../resolve.ts";

const ON_END = ["stop", "loop", "stay_last"];

export function registerSequence(program: Command): void {
  const sequence = program.command("sequence").description(
    "A project's connector sequence: served one at a time, moving on when one runs dry",
  );

  leaf(sequence, "show <project>", "Show the project's sequence", [
    "octoprox sequence show shop",
  ])
    .action(async (ref: string, options: JsonOption) => {
      const client = await connect();
      const project = await resolveProject(client, ref);
      let found: Sequence | null = null;
      try {
        found = await client.request<Sequence>("GET", `/projects/${project.id}/sequence`);
      } catch (error) {
        if (!(error instanceof ApiError && error.status === 404)) throw error;
      }
      emit(outputOf(options), found, () => {
        if (found === null) line(`${project.name} has no sequence: its connectors share traffic.`);
        else printSequence(found);
      });
    });

  leaf(sequence, "set <project> <connectors...>", "Set the sequence (connectors in order)", [
    "octoprox sequence set shop primary backup",
    "octoprox sequence set shop primary backup last-resort --on-end stay_last",
  ])
    .option("--on-end <what>", `past the last connector: ${ON_END.join(", ")}`, "stop")
    .action(async (ref: string, names: string[], options: JsonOption & { onEnd: string }) => {
      const client = await connect();
      const project = await resolveProject(client, ref);
      const ids: string[] = [];
      for (const name of names) ids.push((await resolveConnector(client, project.id, name)).id);
      const set = await client.request<Sequence>("PUT", `/projects/${project.id}/sequence`, {
        body: { connector_ids: ids, on_end: options.onEnd },
      });
      emit(outputOf(options), set, () => {
        line(`${pc.green("Set")} the sequence of ${project.name}.`);
        printSequence(set);
      });
    });

  leaf(sequence, "clear <project>", "Remove the sequence (connectors share traffic again)", [
    "octoprox sequence clear shop --yes",
  ])
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (ref: string, options: JsonOption & { yes?: boolean }) => {
      const client = await connect();
      const project = await resolveProject(client, ref);
      if (!await confirm(`Remove the sequence of ${project.name}?`, options.yes)) {
        line("Nothing changed.");
        return;
      }
      await client.request("DELETE", `/projects/${project.id}/sequence`);
      emit(
        outputOf(options),
        { cleared: project.id },
        () => line(`${pc.green("Cleared")} the sequence of ${project.name}.`),
      );
    });
}

function printSequence(sequence: Sequence): void {
  printFields([
    ["Past the end", sequence.on_end],
    ["When it cannot serve", sequence.on_unavailable],
    ["Exhausted", sequence.exhausted],
    ["Last switched", sequence.switched_at ?? "–"],
  ]);
  printTable(
    ["#", "Connector", "Current", "Depleted since"],
    sequence.connectors.map((connector, index) => [
      index + 1,
      connector.name,
      index === sequence.current_index && !sequence.exhausted ? "current" : "",
      connector.depleted_at ?? "–",
    ]),
    "No connector.",
  );
}
