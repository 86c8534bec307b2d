/**
 * Proxies: the rows a connector routes to. Added one at a time or uploaded as a list (static
 * connectors), or kept by the sync and provision jobs (vendor connectors), edited and deleted
 * here only; their status moves only by add (initializing) and, later, drain, terminate
 * and the health job. Every proxy write announces one change entry of kind `proxy` whose ref is
 * the connector whose proxies changed, since the routing feed is built per connector.
 */
import { and, asc, count, desc, eq, ilike, ne, type SQL, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import { connectors, proxies } from "../../db/schema.ts";
import { ConflictError } from "../../shared/errors.ts";
import type { ProviderRow } from "../../shared/vendors/provider.ts";
import { ChangeKind, ConnectorKind, JobKind, ProxyStatus } from "../../shared/roles.ts";
import { changedFields } from "./diff.ts";
import { parseProxyLine, type ProxyAddress, proxyIdentity } from "../model/proxy-url.ts";
import { missingIn, requireProject } from "./scope.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";

export type ProxyRow = typeof proxies.$inferSelect;

/** Where a country came from when an operator typed it. */
/** A country set by hand (an edit, an upload line, a configuration file). */
export const MANUAL = "manual";
/** A country a vendor's list or the descriptor's group gave. */
export const VENDOR = "vendor";
/** Rows per INSERT of an upload: one statement of arrays each, all in the upload's transaction. */
const UPLOAD_CHUNK_ROWS = 5000;

const proxyChange = (connectorId: string) => ({ kind: ChangeKind.proxy, ref: connectorId });

export interface ProxyFilter {
  connectorId?: string;
  status?: ProxyStatus;
  country?: string;
  /** Part of the host, lower-cased. */
  search?: string;
}

/** The list's orders, each served by an index that starts with the project. */
export type ProxyOrder = "created" | "status" | "country" | "status_changed";

export interface ProxyPage {
  items: ProxyRow[];
  total: number;
}

export interface NewProxy {
  connectorId: string;
  address: ProxyAddress;
  country?: string | null;
  metadata?: Record<string, unknown>;
}

export interface ProxyPatch {
  /** Replaces scheme, host, port, username and password together. */
  address?: ProxyAddress;
  /** null clears the country. */
  country?: string | null;
  metadata?: Record<string, unknown>;
}

/**
 * The connector proxies are added to: in this project, static (the only kind whose rows an
 * operator writes) and not being deleted. Holds a key-share lock so it cannot vanish meanwhile.
 */
/**
 * The static connector proxies are added to, or a ConflictError naming `field`; answers whether
 * its health checks ask a URL of its own (and so never see the exits through the echo).
 */
async function requireStaticConnector(
  tx: Tx,
  projectId: string,
  connectorId: string,
  field: string,
): Promise<{ ownCheckUrl: boolean }> {
  await requireProject(tx, projectId, { lock: true });
  const [connector] = await tx.select({
    kind: connectors.kind,
    pending: connectors.pendingDeletion,
    checkUrl: connectors.healthcheckUrl,
  })
    .from(connectors)
    .where(and(eq(connectors.id, connectorId), eq(connectors.projectId, projectId)))
    .for("key share");
  if (!connector) throw new ConflictError(`${field}: no connector with this id in this project`);
  if (connector.kind !== ConnectorKind.static) {
    throw new ConflictError(`${field}: only static connectors take proxies by hand`);
  }
  if (connector.pending) throw new ConflictError(`${field}: the connector is being deleted`);
  return { ownCheckUrl: connector.checkUrl !== null };
}

function filterOf(projectId: string, filter: ProxyFilter): SQL | undefined {
  return and(
    eq(proxies.projectId, projectId),
    filter.connectorId === undefined ? undefined : eq(proxies.connectorId, filter.connectorId),
    filter.status === undefined ? undefined : eq(proxies.status, filter.status),
    filter.country === undefined ? undefined : eq(proxies.country, filter.country),
    filter.search === undefined || filter.search === ""
      ? undefined
      : ilike(proxies.host, `%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`),
  );
}

/** The ORDER BY of a sort: its column, then creation and id, all in one direction. */
function orderOf(sort: ProxyOrder, direction: "asc" | "desc"): SQL[] {
  const by = direction === "asc" ? asc : desc;
  const lead = {
    created: [],
    status: [by(proxies.status)],
    country: [by(proxies.country)],
    status_changed: [by(proxies.statusChangedAt)],
  }[sort];
  return [...lead, by(proxies.createdAt), by(proxies.id)];
}

export function listProxies(
  deps: ServiceDeps,
  projectId: string,
  filter: ProxyFilter,
  page: { offset: number; limit: number; sort?: ProxyOrder; direction?: "asc" | "desc" },
): Promise<ProxyPage> {
  return read(deps, async (db) => {
    await requireProject(db, projectId);
    const where = filterOf(projectId, filter);
    const [items, [{ total }]] = await Promise.all([
      db.select().from(proxies).where(where)
        .orderBy(...orderOf(page.sort ?? "created", page.direction ?? "asc"))
        .offset(page.offset).limit(page.limit),
      db.select({ total: count() }).from(proxies).where(where),
    ]);
    return { items, total };
  });
}

/** The ids of a connector's proxies (a follow-up over all of them, such as lifting quarantines). */
export async function connectorProxyIds(deps: ServiceDeps, connectorId: string): Promise<string[]> {
  const rows = await read(
    deps,
    (db) => db.select({ id: proxies.id }).from(proxies).where(eq(proxies.connectorId, connectorId)),
  );
  return rows.map((row) => row.id);
}

export function getProxy(deps: ServiceDeps, projectId: string, id: string): Promise<ProxyRow> {
  return read(deps, async (db) => {
    const [row] = await db.select().from(proxies)
      .where(and(eq(proxies.projectId, projectId), eq(proxies.id, id)));
    return row ?? missingIn(db, projectId, "Proxy");
  });
}

export async function createProxy(
  deps: ServiceDeps,
  projectId: string,
  input: NewProxy,
): Promise<ProxyRow> {
  const created = await write(deps, async (tx) => {
    const { ownCheckUrl } = await requireStaticConnector(
      tx,
      projectId,
      input.connectorId,
      "connector_id",
    );
    const country = input.country ?? null;
    const [row] = await tx.insert(proxies).values({
      projectId,
      connectorId: input.connectorId,
      ...input.address,
      country,
      countrySource: country === null ? null : MANUAL,
      metadata: input.metadata ?? {},
      status: ProxyStatus.initializing,
    }).returning();
    return { result: { row, ownCheckUrl }, change: proxyChange(input.connectorId) };
  });
  // A proxy added is checked at once, not at its slot second; the check's echo shows its exit.
  // Without a country set by hand, behind a check URL of its own (which shows no exit), the
  // exit is looked up through it (enrich) so its country is known as soon as it can be.
  await deps.jobs.request(JobKind.health, [created.row.id], { first: true });
  if (created.row.country === null && created.ownCheckUrl) {
    await deps.jobs.request(JobKind.enrich, [created.row.id]);
  }
  return created.row;
}

export function updateProxy(
  deps: ServiceDeps,
  projectId: string,
  id: string,
  patch: ProxyPatch,
): Promise<ProxyRow> {
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(proxies)
      .where(and(eq(proxies.projectId, projectId), eq(proxies.id, id))).for("update");
    if (!current) return missingIn(tx, projectId, "Proxy");
    const changes = changedFields(current, {
      ...patch.address,
      country: patch.country,
      countrySource: patch.country === undefined
        ? undefined
        : patch.country === null
        ? null
        : MANUAL,
      metadata: patch.metadata,
    });
    if (!changes) return { result: current, change: null };
    const [row] = await tx.update(proxies).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(proxies.id, id)).returning();
    return { result: row, change: proxyChange(current.connectorId) };
  });
}

/**
 * Deletes a proxy. A vendor connector's row is one of the slots its config asks for: its sync is
 * asked at once, so the slot comes back as the config says (delete the slot in the connector's
 * config to have one fewer). A cloud connector's row stands for an instance, which must go
 * first: the row is marked terminating and a scale run asked for, also when it was terminating
 * already (a second delete is how an admin retries a stalled termination).
 */
export async function deleteProxy(
  deps: ServiceDeps,
  projectId: string,
  id: string,
): Promise<string> {
  const deleted = await write(deps, async (tx) => {
    const [row] = await tx.select({ connectorId: proxies.connectorId, kind: connectors.kind })
      .from(proxies).innerJoin(connectors, eq(connectors.id, proxies.connectorId))
      .where(and(eq(proxies.projectId, projectId), eq(proxies.id, id))).for("update");
    if (!row) return missingIn(tx, projectId, "Proxy");
    if (row.kind === ConnectorKind.cloud) {
      const moved = await tx.update(proxies)
        .set({
          status: ProxyStatus.terminating,
          statusChangedAt: sql`now()`,
          updatedAt: sql`now()`,
        })
        .where(and(eq(proxies.id, id), ne(proxies.status, ProxyStatus.terminating)))
        .returning({ id: proxies.id });
      return {
        result: row,
        change: moved.length === 0 ? null : proxyChange(row.connectorId),
      };
    }
    await tx.delete(proxies).where(eq(proxies.id, id));
    return { result: row, change: proxyChange(row.connectorId) };
  });
  if (deleted.kind === ConnectorKind.vendor) {
    await deps.jobs.request(JobKind.sync, [deleted.connectorId]);
  }
  if (deleted.kind === ConnectorKind.cloud) {
    await deps.jobs.request(JobKind.scale, [deleted.connectorId]);
  }
  return deleted.kind;
}

/**
 * Rotates vendor session slots whose exit contradicted their vendor's claim (the sighting
 * ingest's, control/geo/sighting-ingest.ts): the slots are deleted, all of a batch's in one
 * transaction announced by one change entry, and each of their connectors is asked for one
 * sync, which gives the slot a fresh vendor session, so a burst of rotations is one sync per
 * connector, not one per slot. Only a vendor connector's session slots (rows holding a vendor
 * session id) are deleted, whatever ids are given; answers the ids deleted.
 */
export async function rotateSessionSlots(
  deps: ServiceDeps,
  ids: readonly string[],
): Promise<string[]> {
  if (ids.length === 0) return [];
  const deleted = await write(deps, async (tx) => {
    const rows = await tx.execute<{ id: string; connector_id: string }>(sql`
      delete from ${proxies} as p using ${connectors} as c
       where p.id = any(${sql.param([...ids])}::uuid[])
         and c.id = p.connector_id and c.kind = ${ConnectorKind.vendor}
         and p.metadata ? 'session_id'
      returning p.id as id, p.connector_id as connector_id`);
    const owners = [...new Set(rows.map((row) => row.connector_id))].sort();
    return {
      result: { ids: rows.map((row) => row.id), owners },
      change: owners.length === 0 ? null : { kind: ChangeKind.proxy, ref: owners.join(",") },
    };
  });
  await deps.jobs.request(JobKind.sync, deleted.owners);
  return deleted.ids;
}

// ---------------------------------------------------------------------------------------------
// Upload

export interface UploadReport {
  total_lines: number;
  added: number;
  duplicates: number;
  refused: number;
  errors: { line: number; reason: string }[];
  /** Lines whose proxy the connector already had, or an earlier line of the file named. */
  duplicate_lines: number[];
}

interface GoodLine {
  line: number;
  identity: string;
  address: ProxyAddress;
  country: string | null;
}

/** Reads an upload: the good lines (first of each identity), the refused ones, the repeats. */
export function readUpload(text: string) {
  const lines = text.split(/\r?\n/);
  // A final newline does not make one more line.
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  const good: GoodLine[] = [];
  const errors: UploadReport["errors"] = [];
  const repeated: number[] = [];
  const seen = new Set<string>();
  lines.forEach((text, index) => {
    const line = index + 1;
    const parsed = parseProxyLine(text);
    if (parsed === undefined) return;
    if (!parsed.ok) {
      errors.push({ line, reason: parsed.reason });
      return;
    }
    const identity = proxyIdentity(parsed.value.address);
    if (seen.has(identity)) {
      repeated.push(line);
      return;
    }
    seen.add(identity);
    good.push({ line, identity, ...parsed.value });
  });
  return { totalLines: lines.length, good, errors, repeated };
}

/** A proxy to insert: its address and its country set by hand (or none). */
export interface NewProxyRow {
  address: ProxyAddress;
  country: string | null;
}

/**
 * Inserts proxies into a connector inside `tx`, in chunks of one INSERT each, skipping those it
 * already has; answers the ids of the rows inserted.
 */
export async function insertProxies(
  tx: Tx,
  projectId: string,
  connectorId: string,
  rows: readonly NewProxyRow[],
): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; start < rows.length; start += UPLOAD_CHUNK_ROWS) {
    const chunk = rows.slice(start, start + UPLOAD_CHUNK_ROWS);
    ids.push(...(await insertChunk(tx, projectId, connectorId, chunk)).values());
  }
  return ids;
}

/** Inserts one chunk, skipping rows the connector has; answers the ids inserted by identity. */
async function insertChunk(
  tx: Tx,
  projectId: string,
  connectorId: string,
  chunk: readonly NewProxyRow[],
): Promise<Map<string, string>> {
  const column = <T>(pick: (line: NewProxyRow) => T) => sql.param(chunk.map(pick));
  const rows = await tx.execute<Pick<ProxyRow, "id" | "scheme" | "host" | "port" | "username">>(sql`
    insert into ${proxies}
      (project_id, connector_id, scheme, host, port, username, password, country, country_source,
       status)
    select ${projectId}::uuid, ${connectorId}::uuid, t.scheme, t.host, t.port, t.username,
      t.password, t.country, case when t.country is null then null else ${MANUAL} end,
      ${ProxyStatus.initializing}
    from unnest(
      ${column((l) => l.address.scheme)}::text[],
      ${column((l) => l.address.host)}::text[],
      ${column((l) => l.address.port)}::int[],
      ${column((l) => l.address.username)}::text[],
      ${column((l) => l.address.password)}::text[],
      ${column((l) => l.country)}::text[]
    ) as t(scheme, host, port, username, password, country)
    on conflict do nothing
    returning id, scheme, host, port, username`);
  return new Map(rows.map((row) => [proxyIdentity(row), row.id]));
}

/**
 * Adds every good line of an upload to a static connector, all in one transaction (in chunks
 * of one INSERT each), and reports each refused line with its number and reason. Lines naming
 * a proxy the connector already has, or one an earlier line named, count as duplicates.
 */
export async function uploadProxies(
  deps: ServiceDeps,
  projectId: string,
  connectorId: string,
  text: string,
): Promise<UploadReport> {
  const upload = readUpload(text);
  const existing = await write(deps, async (tx) => {
    const { ownCheckUrl } = await requireStaticConnector(
      tx,
      projectId,
      connectorId,
      "connector_id",
    );
    const skipped: number[] = [];
    const addedIds: string[] = [];
    const unplaced: string[] = [];
    for (let start = 0; start < upload.good.length; start += UPLOAD_CHUNK_ROWS) {
      const chunk = upload.good.slice(start, start + UPLOAD_CHUNK_ROWS);
      const inserted = await insertChunk(tx, projectId, connectorId, chunk);
      addedIds.push(...inserted.values());
      for (const line of chunk) {
        const id = inserted.get(line.identity);
        if (id === undefined) skipped.push(line.line);
        else if (ownCheckUrl && (line.country === null || line.country === undefined)) {
          unplaced.push(id);
        }
      }
    }
    return {
      result: { skipped, addedIds, unplaced },
      change: addedIds.length > 0 ? proxyChange(connectorId) : null,
    };
  });
  // Rows no check has judged yet are checked at once, not at their slot second.
  await deps.jobs.request(JobKind.health, existing.addedIds, { first: true });
  await deps.jobs.request(JobKind.enrich, existing.unplaced);
  const duplicateLines = [...upload.repeated, ...existing.skipped].sort((a, b) => a - b);
  return {
    total_lines: upload.totalLines,
    added: existing.addedIds.length,
    duplicates: duplicateLines.length,
    refused: upload.errors.length,
    errors: upload.errors,
    duplicate_lines: duplicateLines,
  };
}

/** A vendor pool's writes (the sync and provision jobs): see control/vendors/rows.ts. */
export interface PoolWrites {
  edits: readonly {
    id: string;
    set: Partial<Pick<ProxyRow, "scheme" | "host" | "port" | "username" | "password" | "country">>;
    metadata: Record<string, unknown>;
  }[];
  deletions: readonly string[];
  additions: readonly ProviderRow[];
}

/** Inserts a pool's rows, insert-or-skip, their slot in their metadata; answers the ids added. */
async function insertPoolRows(
  tx: Tx,
  connector: { id: string; projectId: string },
  rows: PoolWrites["additions"],
  status: ProxyStatus,
): Promise<string[]> {
  const column = <T>(pick: (row: PoolWrites["additions"][number]) => T) =>
    sql.param(rows.map(pick));
  const inserted = await tx.execute<{ id: string }>(sql`
    insert into ${proxies}
      (project_id, connector_id, scheme, host, port, username, password, country,
       country_source, vendor_country, metadata, status)
    select ${connector.projectId}::uuid, ${connector.id}::uuid, t.scheme, t.host, t.port,
      t.username, t.password, t.country, case when t.country is null then null else ${VENDOR} end,
      t.country, t.metadata, ${status}
    from unnest(
      ${column((r) => r.scheme)}::text[],
      ${column((r) => r.host)}::text[],
      ${column((r) => r.port)}::int[],
      ${column((r) => r.username)}::text[],
      ${column((r) => r.password)}::text[],
      ${column((r) => r.country)}::text[],
      ${column((r) => JSON.stringify({ ...r.metadata, slot: r.slot }))}::jsonb[]
    ) as t(scheme, host, port, username, password, country, metadata)
    on conflict do nothing
    returning id`);
  return inserted.map((row) => row.id);
}

/**
 * Writes a vendor pool's plan: the edits (only the changed columns and metadata keys) and the
 * deletions in one transaction, then the additions, insert-or-skip, in one more; each announced
 * by one change entry when it changed a row. Added rows start initializing and are checked at
 * once; a dynamic-sessions row (`healthy`) is never checked, since its vendor session changes
 * per request. A sync's own deletions ask for no further sync.
 */
export async function writePool(
  deps: ServiceDeps,
  connector: { id: string; projectId: string },
  plan: PoolWrites,
  options: { addedStatus: ProxyStatus },
): Promise<{ edited: number; deleted: number; added: string[] }> {
  const connectorId = connector.id;
  let edited = 0;
  let deleted = 0;
  if (plan.edits.length > 0 || plan.deletions.length > 0) {
    await write(deps, async (tx) => {
      for (const edit of plan.edits) {
        const done = await tx.update(proxies).set({
          ...edit.set,
          // The vendor's word for the exit: attribution judges it against what is seen.
          ...(edit.set.country !== undefined
            ? { countrySource: edit.set.country ? VENDOR : null, vendorCountry: edit.set.country }
            : {}),
          metadata: sql`${proxies.metadata} || ${JSON.stringify(edit.metadata)}::jsonb`,
          updatedAt: sql`now()`,
        }).where(and(eq(proxies.id, edit.id), eq(proxies.connectorId, connectorId)))
          .returning({ id: proxies.id });
        edited += done.length;
      }
      for (let start = 0; start < plan.deletions.length; start += UPLOAD_CHUNK_ROWS) {
        const ids = plan.deletions.slice(start, start + UPLOAD_CHUNK_ROWS);
        const done = await tx.execute<{ id: string }>(sql`
          delete from ${proxies} where ${proxies.connectorId} = ${connectorId}
            and ${proxies.id} = any(${sql.param(ids)}::uuid[]) returning ${proxies.id} as id`);
        deleted += done.length;
      }
      return { result: undefined, change: edited + deleted > 0 ? proxyChange(connectorId) : null };
    });
  }
  const added: string[] = [];
  if (plan.additions.length > 0) {
    await write(deps, async (tx) => {
      for (let start = 0; start < plan.additions.length; start += UPLOAD_CHUNK_ROWS) {
        const chunk = plan.additions.slice(start, start + UPLOAD_CHUNK_ROWS);
        added.push(...await insertPoolRows(tx, connector, chunk, options.addedStatus));
      }
      return { result: undefined, change: added.length > 0 ? proxyChange(connectorId) : null };
    });
  }
  if (options.addedStatus !== ProxyStatus.healthy) {
    await deps.jobs.request(JobKind.health, added, { first: true });
  }
  return { edited, deleted, added };
}

/**
 * The provision job's lock on its connector's row. Runs take turns on it, so two gateways asking
 * at once make one group; `no key update` rather than `update`, since no key of the row changes:
 * it does not conflict with the key-share locks that inserts referencing the connector (a
 * proxy's row, a usage row) and the metering flush's parent lookups take, so those never wait
 * behind a provision.
 */
export const PROVISION_LOCK = "no key update";

/**
 * Adds one country group to an "All countries" session pool (the provision job), unless it has
 * one, under PROVISION_LOCK. Answers the ids added (none when the group was there).
 */
export async function addPoolGroup(
  deps: ServiceDeps,
  connector: { id: string; projectId: string },
  country: string,
  rows: PoolWrites["additions"],
): Promise<string[]> {
  const added = await write(deps, async (tx) => {
    const [locked] = await tx.select({ id: connectors.id }).from(connectors)
      .where(eq(connectors.id, connector.id)).for(PROVISION_LOCK);
    if (!locked) return { result: [] as string[], change: null };
    const [present] = await tx.select({ total: count() }).from(proxies).where(and(
      eq(proxies.connectorId, connector.id),
      sql`${proxies.metadata} ->> 'group' = ${country}`,
    ));
    if ((present?.total ?? 0) > 0) return { result: [] as string[], change: null };
    const ids = await insertPoolRows(tx, connector, rows, ProxyStatus.initializing);
    return { result: ids, change: ids.length > 0 ? proxyChange(connector.id) : null };
  });
  await deps.jobs.request(JobKind.health, added, { first: true });
  return added;
}
