/**
 * The audit log (admins): every write, newest first, from GET /audit (paged by its cursor, "Load
 * more"): when, who (a user, a token and the user it acts for, or the configuration file), how
 * (dashboard, CLI, api, config) and from where, what (entity, name, action) and what changed;
 * a row opens to every field before and after, secrets masked as the API gives them.
 */
import { useMemo, useState } from "preact/hooks";
import {
  auditActorText,
  auditChangeText,
  type AuditEntryView,
} from "../../../api/answers/audit.ts";
import { AUDIT_ACTIONS, AUDIT_ENTITIES, AUDIT_VIAS } from "../../../model/audit.ts";
import { Field, Select, TextInput } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useCursorPages } from "../ui/use-cursor-pages.ts";
import { LoadMore } from "../ui/load-more.tsx";

const PAGE = 50;
const PERIODS: readonly (readonly [string, string])[] = [
  ["", "Any time"],
  ["1", "Last hour"],
  ["24", "Last 24 hours"],
  ["168", "Last 7 days"],
  ["720", "Last 30 days"],
];
const every = (
  values: readonly string[],
  all: string,
) => [["", all] as const, ...values.map((v) => [v, v.replaceAll("_", " ")] as const)];

export function Audit() {
  const [entity, setEntity] = useState("");
  const [action, setAction] = useState("");
  const [via, setVia] = useState("");
  const [user, setUser] = useState("");
  const [hours, setHours] = useState("");
  // Fixed when the period is picked, so the query (and the page) stays put until then.
  const since = useMemo(
    () => (hours === "" ? "" : new Date(Date.now() - Number(hours) * 3_600_000).toISOString()),
    [hours],
  );
  const log = useCursorPages<AuditEntryView>("/audit", {
    entity,
    action,
    via,
    user: user.trim(),
    since,
    limit: PAGE,
  });
  return (
    <section class="audit">
      <h2>Audit log</h2>
      <p class="muted">
        Every change to the configuration, by whom and how, written in the change's own transaction.
        Reads and refused changes are not listed.
      </p>
      <div class="filters" role="search" aria-label="Audit filters">
        <Field label="Entity" field="entity" error={log.error}>
          <Select
            name="audit_entity"
            value={entity}
            onChange={setEntity}
            options={every(AUDIT_ENTITIES, "Every entity")}
          />
        </Field>
        <Field label="Action" field="action" error={log.error}>
          <Select
            name="audit_action"
            value={action}
            onChange={setAction}
            options={every(AUDIT_ACTIONS, "Every action")}
          />
        </Field>
        <Field label="Via" field="via" error={log.error}>
          <Select
            name="audit_via"
            value={via}
            onChange={setVia}
            options={every(AUDIT_VIAS, "Every way in")}
          />
        </Field>
        <Field label="User" field="user" error={log.error}>
          <TextInput name="audit_user" value={user} onInput={setUser} />
        </Field>
        <Field label="Period" field="since" error={log.error}>
          <Select name="audit_period" value={hours} onChange={setHours} options={PERIODS} />
        </Field>
        <button type="button" class="secondary" onClick={log.reload}>Refresh</button>
      </div>
      <ErrorNote error={log.error} />
      <table class="data" aria-label="Audit entries">
        <thead>
          <tr>
            <th>When</th>
            <th>Who</th>
            <th>Via</th>
            <th>Action</th>
            <th>Entity</th>
            <th>Name</th>
            <th>Change</th>
          </tr>
        </thead>
        <tbody>
          {log.items.map((entry) => <AuditRow key={entry.id} entry={entry} />)}
        </tbody>
      </table>
      {!log.loading && log.items.length === 0 && !log.error
        ? (
          <p class="muted">
            No audit entries{entity || action || via || user || hours ? " of these" : ""}.
          </p>
        )
        : null}
      <LoadMore pages={log} />
    </section>
  );
}

function AuditRow({ entry }: { entry: AuditEntryView }) {
  const [open, setOpen] = useState(false);
  const details = entry.before !== null || entry.after !== null;
  return (
    <>
      <tr data-audit={entry.id}>
        <td>
          <Time value={entry.at} />
        </td>
        <td title={entry.address ?? undefined}>{auditActorText(entry)}</td>
        <td>{entry.via}</td>
        <td>{entry.action}</td>
        <td>{entry.entity.replaceAll("_", " ")}</td>
        <td>{entry.entity_name ?? <span class="muted">{entry.entity_id ?? "–"}</span>}</td>
        <td>
          <span class="audit-change">{auditChangeText(entry)}</span> {details
            ? (
              <button
                type="button"
                class="link"
                aria-expanded={open}
                onClick={() => setOpen(!open)}
              >
                {open ? "Hide" : "Details"}
              </button>
            )
            : null}
        </td>
      </tr>
      {open
        ? (
          <tr class="audit-details">
            <td colSpan={7}>
              <p class="muted">
                {entry.request ?? ""}
                {entry.address ? ` from ${entry.address}` : ""}
              </p>
              <div class="audit-sides">
                <pre aria-label="Before">{JSON.stringify(entry.before, null, 2)}</pre>
                <pre aria-label="After">{JSON.stringify(entry.after, null, 2)}</pre>
              </div>
            </td>
          </tr>
        )
        : null}
    </>
  );
}
