/**
 * Sequential routing: a project's connectors in order, served one at a time. Gateways route
 * only the current connector (the feed carries the sequence in the project's entry); when that
 * connector runs dry (`markDepleted`, which the provider pool calls when a run of Empty fetches
 * reaches its threshold), every sequence standing on it moves to its next connector once.
 *
 * The index moves only by compare-and-set on the row's version (`UPDATE ... WHERE project_id =
 * $1 AND version = $seen AND current_index = $idx`): any number of processes that see the same
 * depleted connector move a sequence on once, since a caller that loses the race reads the row
 * again, finds the connector no longer current, and does nothing. Past the last connector,
 * `on_end` says what happens: `stop` (the default) leaves the sequence exhausted, serving
 * nothing until it is set again; `loop` goes back to the first; `stay_last` keeps the last.
 *
 * Deleting a connector a sequence names drops it from the sequence in the same transaction: the
 * same connector stays current when it is not the one deleted; when it is, the sequence moves on
 * as a depletion would. A sequence left with fewer than two connectors is cleared.
 *
 * Every write goes through the write path (store.ts): one transaction, then one change entry,
 * so the controller compiles the feed again and gateways follow.
 */
import { and, eq, inArray, isNotNull, isNull, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { connectors, projects, projectSequences } from "../../db/schema.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import { ChangeKind, type SequenceOnEnd, type SequenceOnUnavailable } from "../../shared/roles.ts";
import { requireProject } from "./scope.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";

export type SequenceRow = typeof projectSequences.$inferSelect;

/** Why a project takes a sequence or escalation, not both (each decides which connector serves). */
export const SEQUENCE_OR_ESCALATION =
  "a project routes by its connector sequence or by escalation between tiers, not both: " +
  "clear the one before setting the other";

/** What the sequence functions touch: the store and the change log. */
export type SequenceDeps = Pick<ServiceDeps, "database" | "changes">;

/** How many times a depletion that lost its compare-and-set reads the row again. */
const CAS_ATTEMPTS = 8;

export interface SequenceInput {
  /** Connector ids of the project, in order: at least two, each once. */
  connectorIds: readonly string[];
  /** `stop` unless said. */
  onEnd?: SequenceOnEnd;
  /** `reject` unless said (the only value so far). */
  onUnavailable?: SequenceOnUnavailable;
}

/** A connector a sequence names, with when it ran dry. */
export interface SequenceConnector {
  id: string;
  /** Null for an id no connector has any more (a sequence is edited when one is deleted). */
  name: string | null;
  depletedAt: Date | null;
}

export interface SequenceView {
  projectId: string;
  connectorIds: string[];
  currentIndex: number;
  /** The connector that serves now; null once the sequence is exhausted. */
  currentConnectorId: string | null;
  onEnd: SequenceOnEnd;
  onUnavailable: SequenceOnUnavailable;
  exhausted: boolean;
  version: number;
  /** When the index last moved on (a depletion, or the deletion of the current connector). */
  switchedAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  /** The connectors in the sequence's order. */
  connectors: SequenceConnector[];
}

/** One sequence a depletion moved on, as it is after the move. */
export interface SequenceMove {
  projectId: string;
  fromIndex: number;
  toIndex: number;
  exhausted: boolean;
  version: number;
}

export interface DepletionOutcome {
  /** This call set the connector's `depleted_at` (false: already set, or no such connector). */
  marked: boolean;
  /** The sequences this call moved on (none when another caller had moved them already). */
  moved: SequenceMove[];
}

const projectChange = (projectId: string) => ({ kind: ChangeKind.project, ref: projectId });

/** The project's sequence with its connectors; NotFoundError when it has none. */
export function getSequence(deps: SequenceDeps, projectId: string): Promise<SequenceView> {
  return read(deps, async (db) => {
    await requireProject(db, projectId);
    const [row] = await db.select().from(projectSequences)
      .where(eq(projectSequences.projectId, projectId));
    if (!row) throw new NotFoundError("Sequence", "This project has no connector sequence");
    const named = await db.select({
      id: connectors.id,
      name: connectors.name,
      depletedAt: connectors.depletedAt,
    }).from(connectors).where(and(
      eq(connectors.projectId, projectId),
      inArray(connectors.id, row.connectorIds),
    ));
    return view(row, named);
  });
}

/**
 * Sets the project's sequence, replacing any: its connectors in order (at least two, distinct,
 * all of this project), `on_end` and `on_unavailable`. It starts over: the first connector is
 * current, not exhausted, and the version moves on (a depletion that read the old one changes
 * nothing).
 */
export async function setSequence(
  deps: SequenceDeps,
  projectId: string,
  input: SequenceInput,
): Promise<SequenceView> {
  const ids = [...input.connectorIds];
  const issue = (message: string) =>
    new ValidationError([{ field: "body.connector_ids", message }]);
  if (ids.length < 2) throw issue("must name at least two connectors");
  if (new Set(ids).size !== ids.length) throw issue("must name each connector once");
  return await write(deps, async (tx) => {
    await requireProject(tx, projectId, { lock: true });
    const [escalated] = await tx.select({ id: projects.id }).from(projects)
      .where(and(eq(projects.id, projectId), isNotNull(projects.escalation)));
    if (escalated !== undefined) throw issue(SEQUENCE_OR_ESCALATION);
    // Held until the commit, so a connector deleted meanwhile waits and then drops itself
    // from the sequence this writes (or this finds it gone).
    const found = await tx.select({
      id: connectors.id,
      name: connectors.name,
      depletedAt: connectors.depletedAt,
    }).from(connectors)
      .where(and(eq(connectors.projectId, projectId), inArray(connectors.id, ids)))
      .for("key share");
    const known = new Set(found.map((row) => row.id));
    const missing = ids.filter((id) => !known.has(id));
    if (missing.length > 0) {
      throw issue(
        `${missing.join(", ")} ${missing.length === 1 ? "is" : "are"} not a connector ` +
          "of this project",
      );
    }
    const fields = {
      connectorIds: ids,
      currentIndex: 0,
      onEnd: input.onEnd ?? "stop",
      onUnavailable: input.onUnavailable ?? "reject",
      exhausted: false,
      switchedAt: null,
    };
    const [row] = await tx.insert(projectSequences).values({ projectId, ...fields })
      .onConflictDoUpdate({
        target: projectSequences.projectId,
        set: {
          ...fields,
          version: sql`${projectSequences.version} + 1`,
          updatedAt: sql`now()`,
        },
      })
      .returning();
    return { result: view(row, found), change: projectChange(projectId) };
  });
}

/** Removes the project's sequence: every eligible connector shares by weight again. */
export async function clearSequence(deps: SequenceDeps, projectId: string): Promise<void> {
  await write(deps, async (tx) => {
    const deleted = await tx.delete(projectSequences)
      .where(eq(projectSequences.projectId, projectId))
      .returning({ projectId: projectSequences.projectId });
    if (deleted.length === 0) {
      await requireProject(tx, projectId);
      throw new NotFoundError("Sequence", "This project has no connector sequence");
    }
    return { result: undefined, change: projectChange(projectId) };
  });
}

/**
 * The connector ran dry: marks it depleted (when it is not already) and moves every sequence
 * whose current connector it is to its next one, once, by compare-and-set. Any number of
 * concurrent calls for the same connector move a sequence one step: a caller that loses the
 * compare-and-set reads the row again and finds the connector no longer current. A sequence that
 * lands on a connector already depleted stays there until that connector is marked again (the
 * pool marks a connector at each Empty run past its threshold). No such connector: nothing.
 */
export async function markDepleted(
  deps: SequenceDeps,
  connectorId: string,
): Promise<DepletionOutcome> {
  return await write(deps, async (tx) => {
    // Locks are taken connector first, then sequence, as a connector's deletion and a
    // sequence's set take them. The key-share lock keeps the connector from being deleted
    // meanwhile without queueing concurrent callers behind each other: the compare-and-set is
    // what decides which of them moves the sequence.
    const [connector] = await tx.select({ projectId: connectors.projectId }).from(connectors)
      .where(eq(connectors.id, connectorId)).for("key share");
    if (!connector) return { result: { marked: false, moved: [] }, change: null };
    const moved: SequenceMove[] = [];
    const move = await moveOn(tx, connector.projectId, connectorId);
    if (move !== undefined) moved.push(move);
    const marked = await tx.update(connectors).set({ depletedAt: sql`now()` })
      .where(and(eq(connectors.id, connectorId), isNull(connectors.depletedAt)))
      .returning({ id: connectors.id });
    // depleted_at is not in the feed: only a moved sequence asks for a compile.
    return {
      result: { marked: marked.length > 0, moved },
      change: moved.length === 0 ? null : projectChange(moved.map((m) => m.projectId).join(",")),
    };
  });
}

/**
 * The connector found proxies again: clears its `depleted_at`. No sequence moves back (one that
 * ran past it stays where it is; setting the sequence again starts it over). Answers whether it
 * was depleted.
 */
export async function clearDepleted(deps: SequenceDeps, connectorId: string): Promise<boolean> {
  return await write(deps, async (tx) => {
    const cleared = await tx.update(connectors).set({ depletedAt: null })
      .where(and(eq(connectors.id, connectorId), isNotNull(connectors.depletedAt)))
      .returning({ id: connectors.id });
    // Not in the feed: nothing to announce.
    return { result: cleared.length > 0, change: null };
  });
}

/**
 * Inside a transaction deleting `connectorIds` of the project: drops them from its sequence,
 * keeping the same connector current when it stays, moving on as a depletion would when it goes,
 * and clearing a sequence left with fewer than two connectors. Answers whether the sequence
 * changed (the caller's change entry covers it: any entry compiles the whole feed again).
 */
export async function dropFromSequence(
  tx: Tx,
  projectId: string,
  connectorIds: readonly string[],
): Promise<boolean> {
  if (connectorIds.length === 0) return false;
  const [row] = await tx.select().from(projectSequences)
    .where(eq(projectSequences.projectId, projectId)).for("update");
  if (!row) return false;
  const gone = new Set(connectorIds);
  if (!row.connectorIds.some((id) => gone.has(id))) return false;
  const remaining = row.connectorIds.filter((id) => !gone.has(id));
  if (remaining.length < 2) {
    await tx.delete(projectSequences).where(eq(projectSequences.projectId, projectId));
    return true;
  }
  const currentId = row.connectorIds[row.currentIndex];
  let index: number;
  let exhausted = row.exhausted;
  let switched = false;
  if (row.exhausted) index = remaining.length - 1;
  else if (!gone.has(currentId)) index = remaining.indexOf(currentId);
  else {
    switched = true;
    const after = row.connectorIds.slice(row.currentIndex + 1).find((id) => !gone.has(id));
    if (after !== undefined) index = remaining.indexOf(after);
    else {
      const end = pastTheEnd(row.onEnd as SequenceOnEnd, remaining.length);
      index = end.index;
      exhausted = end.exhausted;
    }
  }
  await tx.update(projectSequences).set({
    connectorIds: remaining,
    currentIndex: index,
    exhausted,
    version: sql`${projectSequences.version} + 1`,
    ...(switched ? { switchedAt: sql`now()` } : {}),
    updatedAt: sql`now()`,
  }).where(eq(projectSequences.projectId, projectId));
  return true;
}

/**
 * Moves the project's sequence off `connectorId` when it is current, by compare-and-set;
 * undefined when it is not current (or there is no sequence, or stay_last keeps it).
 */
async function moveOn(
  tx: Tx,
  projectId: string,
  connectorId: string,
): Promise<SequenceMove | undefined> {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    // Each statement of a read-committed transaction sees what committed before it: a caller
    // that lost the race below sees the winner's row here.
    const [row] = await tx.select().from(projectSequences)
      .where(eq(projectSequences.projectId, projectId));
    if (!row || row.exhausted || row.connectorIds[row.currentIndex] !== connectorId) {
      return undefined;
    }
    const next = nextPlace(row);
    if (next === undefined) return undefined;
    const [moved] = await tx.update(projectSequences).set({
      currentIndex: next.index,
      exhausted: next.exhausted,
      version: sql`${projectSequences.version} + 1`,
      switchedAt: sql`now()`,
      updatedAt: sql`now()`,
    }).where(and(
      eq(projectSequences.projectId, projectId),
      eq(projectSequences.version, row.version),
      eq(projectSequences.currentIndex, row.currentIndex),
    )).returning({ version: projectSequences.version });
    if (moved) {
      return {
        projectId,
        fromIndex: row.currentIndex,
        toIndex: next.index,
        exhausted: next.exhausted,
        version: moved.version,
      };
    }
  }
  // Edited that many times while this ran: the latest edit stands, and the pool marks the
  // connector again at its next Empty run if it is still current.
  return undefined;
}

/** Where a sequence goes from its current connector; undefined when it stays (stay_last). */
function nextPlace(row: SequenceRow): { index: number; exhausted: boolean } | undefined {
  const next = row.currentIndex + 1;
  if (next < row.connectorIds.length) return { index: next, exhausted: false };
  const end = pastTheEnd(row.onEnd as SequenceOnEnd, row.connectorIds.length);
  return end.index === row.currentIndex && !end.exhausted ? undefined : end;
}

/** Past the last of `length` connectors: stop (exhausted, on the last), loop, stay_last. */
function pastTheEnd(onEnd: SequenceOnEnd, length: number): { index: number; exhausted: boolean } {
  switch (onEnd) {
    case "loop":
      return { index: 0, exhausted: false };
    case "stay_last":
      return { index: length - 1, exhausted: false };
    default:
      return { index: length - 1, exhausted: true };
  }
}

function view(
  row: SequenceRow,
  named: readonly { id: string; name: string; depletedAt: Date | null }[],
): SequenceView {
  const byId = new Map(named.map((c) => [c.id, c]));
  return {
    projectId: row.projectId,
    connectorIds: [...row.connectorIds],
    currentIndex: row.currentIndex,
    currentConnectorId: row.exhausted ? null : row.connectorIds[row.currentIndex] ?? null,
    onEnd: row.onEnd as SequenceOnEnd,
    onUnavailable: row.onUnavailable as SequenceOnUnavailable,
    exhausted: row.exhausted,
    version: row.version,
    switchedAt: row.switchedAt,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    connectors: row.connectorIds.map((id) => ({
      id,
      name: byId.get(id)?.name ?? null,
      depletedAt: byId.get(id)?.depletedAt ?? null,
    })),
  };
}
