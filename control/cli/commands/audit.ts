/**
 * `audit`: the audit log (GET /audit, admins), newest first: who wrote what, when, how, and the
 * fields before and after. Filters as the API takes them; `--since 24h` as well as a timestamp.
 * `--json`: the API's answer.
 */
import { type Command, InvalidArgumentError } from "commander";
import { auditActorText, auditChangeText, type AuditEntryView } from "../../api/answers/audit.ts";
import { AUDIT_ACTIONS, AUDIT_ENTITIES, AUDIT_VIAS } from "../../model/audit.ts";
import { connect, type JsonOption, leaf } from "../command.ts";
import { emit, line, pc, printTable } from "../output.ts";

const UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `24h`, `30m`, `7d` back from now, or an ISO 8601 timestamp as given. */
export function timeOf(text: string): string {
  const relative = /^(\d{1,6})([mhd])$/.exec(text.trim());
  if (relative) {
    return new Date(Date.now() - Number(relative[1]) * UNITS[relative[2]]).toISOString();
  }
  if (Number.isNaN(Date.parse(text))) {
    throw new InvalidArgumentError("must be a time such as 24h, 7d or 2026-12-01T12:00:00Z");
  }
  return text;
}

function oneOf(values: readonly string[]) {
  return (text: string) => {
    if (!values.includes(text)) {
      throw new InvalidArgumentError(`must be one of ${values.join(", ")}`);
    }
    return text;
  };
}

function limitOf(text: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || value < 1 || value > 500) {
    throw new InvalidArgumentError("must be a whole number from 1 to 500");
  }
  return value;
}

interface AuditOptions extends JsonOption {
  entity?: string;
  id?: string;
  user?: string;
  action?: string;
  via?: string;
  since?: string;
  until?: string;
  limit: number;
  cursor?: string;
}

interface AuditPage {
  items: AuditEntryView[];
  next_cursor: string | null;
}

export function registerAudit(program: Command): void {
  leaf(program, "audit", "Show the audit log: who changed what, when, from where (admin)", [
    "octoprox audit",
    "octoprox audit --entity project --since 24h",
    "octoprox audit --user alice --action delete --json",
  ])
    .option(
      "--entity <entity>",
      `one kind of entity (${AUDIT_ENTITIES.join(", ")})`,
      oneOf(AUDIT_ENTITIES),
    )
    .option("--id <id>", "one entity, by its id")
    .option("--user <name>", "writes by this user, or by tokens acting for them")
    .option("--action <action>", `one action (${AUDIT_ACTIONS.join(", ")})`, oneOf(AUDIT_ACTIONS))
    .option("--via <via>", `one way in (${AUDIT_VIAS.join(", ")})`, oneOf(AUDIT_VIAS))
    .option("--since <time>", "from this time: 24h, 7d or a timestamp", timeOf)
    .option("--until <time>", "before this time: 24h, 7d or a timestamp", timeOf)
    .option("-n, --limit <n>", "entries a page (1 to 500)", limitOf, 50)
    .option("--cursor <cursor>", "the next page, as the previous one said")
    .addHelpText(
      "after",
      "\nAn entry for each entity a write changed, written in the write's own transaction; a " +
        "bulk proxy write is one entry with its count. Secrets show as ********. `--json` " +
        "shows every field before and after.\n",
    )
    .action(async (options: AuditOptions) => {
      const client = await connect();
      const page = await client.request<AuditPage>("GET", "/audit", {
        query: {
          entity: options.entity,
          entity_id: options.id,
          user: options.user,
          action: options.action,
          via: options.via,
          since: options.since,
          until: options.until,
          limit: options.limit,
          cursor: options.cursor,
        },
      });
      emit({ json: options.json === true }, page, () => {
        printTable(
          ["Time", "Who", "Via", "Action", "Entity", "Name", "Change"],
          page.items.map((entry) => [
            entry.at.replace("T", " ").replace(/\.\d+Z$/, "Z"),
            auditActorText(entry),
            entry.via,
            entry.action,
            entry.entity,
            entry.entity_name ?? entry.entity_id ?? "–",
            auditChangeText(entry),
          ]),
          "No audit entries.",
        );
        if (page.next_cursor !== null) {
          line(pc.dim(`More: octoprox audit --cursor ${page.next_cursor} (with the same filters)`));
        }
      });
    });
}
