/**
 * Who is writing: the request (or the api's own configuration file) a write runs for, carried
 * with the async context so every transaction opened under it names its writer to Postgres
 * (`octoprox.actor`, local to the transaction), where the audit triggers read it (migration
 * 0016, docs/audit.md). A transaction opened outside any (the system's own loops) names none
 * and is not audited.
 */
import { AsyncLocalStorage } from "node:async_hooks";

export type ActorKind = "user" | "token" | "system";
/** How the write came: the dashboard, the CLI, another api client, or the api's config file. */
export type ActorVia = "dashboard" | "cli" | "api" | "config";

export interface Actor {
  kind: ActorKind;
  /** The user's or the token's id; null for the system. */
  id: string | null;
  /** The user's username, the token's name, or what the system is. */
  name: string;
  /** The user a token acts for; the user itself for a user. */
  user: string | null;
  address: string | null;
  via: ActorVia;
  /** The route (`PATCH /api/v1/projects/:id`) or the system's operation. */
  request: string | null;
  /** A backup's import: its rows are not listed, the import writes one entry of its own. */
  summary?: boolean;
}

/** The writer of a request, named once authentication knows it (a slot the request carries). */
interface WriterSlot {
  actor: Actor | undefined;
}

const writing = new AsyncLocalStorage<WriterSlot>();

/** The transaction-local setting the audit triggers read (migration 0016). */
export const ACTOR_SETTING = "octoprox.actor";

/** Runs `work` with an unnamed writer, named later by `nameWriter` (a request's middleware). */
export function withWriterSlot<T>(work: () => T): T {
  return writing.run({ actor: undefined }, work);
}

/** Names the writer of the surrounding slot; outside one it does nothing. */
export function nameWriter(actor: Actor): void {
  const slot = writing.getStore();
  if (slot) slot.actor = actor;
}

/** Runs `work` with `actor` as the writer of every transaction it opens. */
export function asActor<T>(actor: Actor, work: () => T): T {
  return writing.run({ actor }, work);
}

export function currentActor(): Actor | undefined {
  return writing.getStore()?.actor;
}
