/**
 * Custom provider descriptors: an admin's own vendors, stored as Postgres rows, versioned, with
 * every save and delete in the audit log, and announced (the global feed section carries them,
 * and every api and job applies the stored rows before using the registry).
 *
 * A save is refused unless every host its calls reach passes the egress rules (no private,
 * loopback, link-local or metadata address, no local names) and the admin confirmed each host
 * with this save (409 naming the hosts otherwise). Nothing is written on a refusal.
 */
import { asc, desc, eq, sql } from "drizzle-orm";
import { parse as parseYaml } from "yaml";
import { connectors, providerAuditLog, providerDescriptors } from "../../db/schema.ts";
import {
  ConflictError,
  NotFoundError,
  UnconfirmedHostsError,
  ValidationError,
} from "../../shared/errors.ts";
import { type Descriptor, egressHosts, parseDescriptor } from "../../shared/vendors/descriptor.ts";
import type { RegisteredDescriptor } from "../../shared/vendors/registry.ts";
import { ChangeKind } from "../../shared/roles.ts";
import { refreshCustom } from "./catalogue.ts";
import { checkEgressHost } from "../egress/guard.ts";
import { unstorableIssues } from "../core/unstorable.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";

export type AuditRow = typeof providerAuditLog.$inferSelect;

export interface DescriptorSave {
  /** The descriptor: an object, or its YAML or JSON text. */
  descriptor: unknown;
  /** The egress hosts the admin confirms with this save. */
  confirmHosts: readonly string[];
  /** Who saves it (the admin's username, for the audit log). */
  actor: string;
}

const descriptorChange = (id: string) => ({ kind: ChangeKind.descriptor, ref: id });

/** Every descriptor the registry has, custom ones as stored now. */
export async function listProviders(deps: ServiceDeps): Promise<RegisteredDescriptor[]> {
  await read(deps, (db) => refreshCustom(db, deps.providers));
  return deps.providers.list();
}

export async function getProvider(deps: ServiceDeps, id: string): Promise<RegisteredDescriptor> {
  await read(deps, (db) => refreshCustom(db, deps.providers));
  const entry = deps.providers.get(id);
  if (entry === undefined) throw new NotFoundError("Provider");
  return entry;
}

/** Parses and checks a descriptor to save: its schema, its id, its egress hosts. */
function checkedDescriptor(deps: ServiceDeps, input: DescriptorSave, id?: string): Descriptor {
  let document = input.descriptor;
  if (typeof document === "string") {
    try {
      document = parseYaml(document);
    } catch (error) {
      throw new ValidationError([{
        field: "body.descriptor",
        message: "is not valid YAML or JSON",
      }], {
        cause: error,
      });
    }
  }
  // YAML or JSON text may spell, by its escapes, what the body's own check could not see.
  const unstorable = unstorableIssues("body.descriptor", document);
  if (unstorable.length > 0) throw new ValidationError(unstorable);
  const parsed = parseDescriptor(document);
  if (!parsed.ok) {
    throw new ValidationError(parsed.issues.map((issue) => {
      // `path: message`, where a path is dot-separated keys; a rule over the whole document
      // ("proxy type res username: {…} names no credential field") has no path.
      const path = /^([^\s:]+): /.exec(issue);
      return path
        ? { field: `body.descriptor.${path[1]}`, message: issue.slice(path[0].length) }
        : { field: "body.descriptor", message: issue };
    }));
  }
  const descriptor = parsed.descriptor;
  if (id !== undefined && descriptor.id !== id) {
    throw new ValidationError([{
      field: "body.descriptor.id",
      message: `must stay ${id}: a descriptor's id cannot change`,
    }]);
  }
  const reserved = deps.providers.reservedId(descriptor.id);
  if (reserved !== undefined) {
    throw new ValidationError([{
      field: "body.descriptor.id",
      message: `${descriptor.id} is a ${
        reserved === "builtin" ? "shipped" : "folder"
      } descriptor's id`,
    }]);
  }
  const hosts = egressHosts(descriptor);
  const refused = hosts.flatMap((host) => {
    const reason = checkEgressHost(host, { allowLoopback: deps.settings.egressAllowLoopback });
    return reason === undefined ? [] : [{
      field: "body.descriptor",
      message: reason.includes(host) ? reason : `${host}: ${reason}`,
    }];
  });
  if (refused.length > 0) throw new ValidationError(refused);
  const confirmed = new Set(input.confirmHosts.map((h) => h.trim().toLowerCase()));
  const unconfirmed = hosts.filter((host) => !confirmed.has(host));
  if (unconfirmed.length > 0) throw new UnconfirmedHostsError(unconfirmed);
  return descriptor;
}

export async function createDescriptor(
  deps: ServiceDeps,
  input: DescriptorSave,
): Promise<RegisteredDescriptor> {
  await read(deps, (db) => refreshCustom(db, deps.providers));
  const descriptor = checkedDescriptor(deps, input);
  const document = descriptor as unknown as Record<string, unknown>;
  const hosts = egressHosts(descriptor);
  await write(deps, async (tx) => {
    const inserted = await tx.insert(providerDescriptors)
      .values({ id: descriptor.id, document, confirmedHosts: hosts })
      .onConflictDoNothing().returning({ id: providerDescriptors.id });
    if (inserted.length === 0) {
      throw new ConflictError(`A custom descriptor ${descriptor.id} exists; edit it instead`);
    }
    await tx.insert(providerAuditLog).values({
      descriptorId: descriptor.id,
      version: 1,
      action: "created",
      actor: input.actor,
      document,
    });
    return { result: undefined, change: descriptorChange(descriptor.id) };
  });
  return getProvider(deps, descriptor.id);
}

export async function updateDescriptor(
  deps: ServiceDeps,
  id: string,
  input: DescriptorSave,
): Promise<RegisteredDescriptor> {
  await read(deps, (db) => refreshCustom(db, deps.providers));
  const descriptor = checkedDescriptor(deps, input, id);
  const document = descriptor as unknown as Record<string, unknown>;
  await write(deps, async (tx) => {
    const [row] = await tx.update(providerDescriptors).set({
      document,
      confirmedHosts: egressHosts(descriptor),
      version: sql`${providerDescriptors.version} + 1`,
      updatedAt: sql`now()`,
    }).where(eq(providerDescriptors.id, id)).returning({ version: providerDescriptors.version });
    if (!row) throw new NotFoundError("Provider");
    await tx.insert(providerAuditLog).values({
      descriptorId: id,
      version: row.version,
      action: "updated",
      actor: input.actor,
      document,
    });
    return { result: undefined, change: descriptorChange(id) };
  });
  return getProvider(deps, id);
}

/**
 * Deletes a custom descriptor. Connectors that use it stay, left out of the feed (their
 * provider is gone) until it is stored again or they are deleted: their names are answered.
 */
export async function deleteDescriptor(
  deps: ServiceDeps,
  id: string,
  actor: string,
): Promise<{ orphaned: string[] }> {
  const orphaned = await write(deps, async (tx) => {
    const [row] = await tx.delete(providerDescriptors).where(eq(providerDescriptors.id, id))
      .returning({ version: providerDescriptors.version });
    if (!row) throw new NotFoundError("Provider");
    await tx.insert(providerAuditLog).values({
      descriptorId: id,
      version: row.version,
      action: "deleted",
      actor,
      document: null,
    });
    const users = await tx.select({ name: connectors.name }).from(connectors)
      .where(eq(connectors.provider, id)).orderBy(asc(connectors.name));
    return { result: users.map((u) => u.name), change: descriptorChange(id) };
  });
  await read(deps, (db) => refreshCustom(db, deps.providers));
  return { orphaned };
}

/** A custom descriptor's audit log, newest first. */
export async function descriptorHistory(deps: ServiceDeps, id: string): Promise<AuditRow[]> {
  const rows = await read(
    deps,
    (db) =>
      db.select().from(providerAuditLog).where(eq(providerAuditLog.descriptorId, id))
        .orderBy(desc(providerAuditLog.at), desc(providerAuditLog.id)),
  );
  if (rows.length === 0) throw new NotFoundError("Provider");
  return rows;
}
