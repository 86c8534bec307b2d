/**
 * sequence_moved: a project's connector sequence off its first connector, or run past its last
 * one. The subject names the position (`sequence:<project>:<index>`, or `:exhausted`), so each
 * move fires an event of its own and resolves the one before; a reset to the first connector
 * resolves the last.
 */
import type { Condition } from "./condition.ts";

export const sequenceMoved: Condition = async (deps, rule) => {
  const rows = await deps.database.sql<
    {
      project_id: string;
      project_name: string;
      connector_ids: string[] | string;
      current_index: number;
      exhausted: boolean;
    }[]
  >`
    select s.project_id::text, p.name as project_name, s.connector_ids, s.current_index,
      s.exhausted
    from project_sequences s join projects p on p.id = s.project_id
    where (s.current_index > 0 or s.exhausted)
      and (${rule.projectId}::uuid is null or s.project_id = ${rule.projectId}::uuid)
      and (${rule.connectorId}::uuid is null or s.connector_ids ? ${rule.connectorId}::text)`;
  return rows.map((row) => {
    const ids: string[] = typeof row.connector_ids === "string"
      ? JSON.parse(row.connector_ids)
      : row.connector_ids;
    const position = row.exhausted ? "exhausted" : String(row.current_index);
    return {
      subject: `sequence:${row.project_id}:${position}`,
      message: row.exhausted
        ? `Project ${row.project_name}'s sequence ran past its last connector: it serves nothing`
        : `Project ${row.project_name}'s sequence moved on to connector ${
          row.current_index + 1
        } of ${ids.length}`,
      details: {
        project_id: row.project_id,
        current_index: row.current_index,
        connector_id: row.exhausted ? null : ids[row.current_index] ?? null,
        exhausted: row.exhausted,
      },
    };
  });
};
