/**
 * Connectors: where a project's proxies come from. Only `static` (a list an operator owns) has
 * behaviour in this release; the row already stores kind, provider and config for the vendor,
 * provider-API and cloud kinds that follow. Cross-field rules (one domain list at a time, a
 * credential of the same project) are checked on the copy about to be saved, so an edit of one
 * field cannot break a rule another field keeps.
 */
import { and, asc, count, eq, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import {
  connectors,
  credentials,
  proxies,
  type RateLimitConfig,
  type TrafficConfig,
} from "../../db/schema.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../shared/errors.ts";
import { ChangeKind, type ConnectorKind } from "../../shared/roles.ts";
import { changedFields, definedOnly } from "./diff.ts";
import { missingIn, requireProject } from "./scope.ts";
import { read, type ServiceDeps, write } from "./store.ts";

export type ConnectorRow = typeof connectors.$inferSelect;

export interface ConnectorFields {
  name: string;
  kind: ConnectorKind;
  credentialId: string | null;
  enabled: boolean;
  weight: number;
  countries: string[];
  domainAllow: string[];
  domainDeny: string[];
  healthcheckUrl: string | null;
  rateLimitConfig: RateLimitConfig | null;
  trafficConfig: TrafficConfig | null;
}

export type NewConnector = Pick<ConnectorFields, "name" | "kind"> & Partial<ConnectorFields>;
/** The kind is fixed at creation: another kind is another connector. */
export type ConnectorPatch = Partial<Omit<ConnectorFields, "kind">>;

/** What a connector's fields are when a create leaves them out. */
export const CONNECTOR_DEFAULTS: Readonly<Omit<ConnectorFields, "name" | "kind">> = {
  credentialId: null,
  enabled: true,
  weight: 1,
  countries: [],
  domainAllow: [],
  domainDeny: [],
  healthcheckUrl: null,
  rateLimitConfig: null,
  trafficConfig: null,
};

const connectorChange = (id: string) => ({ kind: ChangeKind.connector, ref: id });

/** The rules of a connector about to be saved. `touched` names the fields the caller sent. */
async function validateConnector(
  tx: Tx,
  projectId: string,
  connector: ConnectorFields,
  touched: ReadonlySet<string>,
): Promise<void> {
  if (connector.domainAllow.length > 0 && connector.domainDeny.length > 0) {
    const field = touched.has("domainAllow") && !touched.has("domainDeny")
      ? "body.domain_allow"
      : "body.domain_deny";
    throw new ValidationError([{
      field,
      message: "domain_allow and domain_deny are mutually exclusive; set one and empty the other",
    }]);
  }
  if (connector.credentialId !== null && touched.has("credentialId")) {
    const [credential] = await tx.select({ id: credentials.id }).from(credentials)
      .where(and(
        eq(credentials.id, connector.credentialId),
        eq(credentials.projectId, projectId),
      )).for("key share");
    if (!credential) {
      throw new ConflictError("credential_id: no credential with this id in this project");
    }
  }
}

export function listConnectors(deps: ServiceDeps, projectId: string): Promise<ConnectorRow[]> {
  return read(deps, async (db) => {
    await requireProject(db, projectId);
    return db.select().from(connectors).where(eq(connectors.projectId, projectId))
      .orderBy(asc(connectors.createdAt), asc(connectors.id));
  });
}

export function getConnector(
  deps: ServiceDeps,
  projectId: string,
  id: string,
): Promise<ConnectorRow> {
  return read(deps, async (db) => {
    await requireProject(db, projectId);
    const [row] = await db.select().from(connectors)
      .where(and(eq(connectors.projectId, projectId), eq(connectors.id, id)));
    if (!row) throw new NotFoundError("Connector");
    return row;
  });
}

/** How many proxies each connector of a project has. */
export async function proxyCounts(
  deps: ServiceDeps,
  projectId: string,
  connectorId?: string,
): Promise<Map<string, number>> {
  const rows = await read(
    deps,
    (db) =>
      db.select({ connectorId: proxies.connectorId, total: count() }).from(proxies)
        .where(and(
          eq(proxies.projectId, projectId),
          connectorId === undefined ? undefined : eq(proxies.connectorId, connectorId),
        ))
        .groupBy(proxies.connectorId),
  );
  return new Map(rows.map((row) => [row.connectorId, row.total]));
}

export function createConnector(
  deps: ServiceDeps,
  projectId: string,
  input: NewConnector,
): Promise<ConnectorRow> {
  const connector: ConnectorFields = {
    ...CONNECTOR_DEFAULTS,
    ...definedOnly(input),
    name: input.name,
    kind: input.kind,
  };
  return write(deps, async (tx) => {
    await requireProject(tx, projectId, { lock: true });
    await validateConnector(tx, projectId, connector, new Set(Object.keys(definedOnly(input))));
    const [row] = await tx.insert(connectors).values({
      ...connector,
      projectId,
      // A static list names no provider; the vendor kinds will name theirs here.
      provider: "static",
      config: {},
    }).returning();
    return { result: row, change: connectorChange(row.id) };
  });
}

export function updateConnector(
  deps: ServiceDeps,
  projectId: string,
  id: string,
  patch: ConnectorPatch,
): Promise<ConnectorRow> {
  return write(deps, async (tx) => {
    const [current] = await tx.select().from(connectors)
      .where(and(eq(connectors.projectId, projectId), eq(connectors.id, id))).for("update");
    if (!current) return missingIn(tx, projectId, "Connector");
    const next = { ...current, ...definedOnly(patch) } as ConnectorRow;
    const touched = new Set(Object.keys(definedOnly(patch)));
    await validateConnector(
      tx,
      projectId,
      { ...next, kind: next.kind as ConnectorKind },
      touched,
    );
    const changes = changedFields(current, patch);
    if (!changes) return { result: current, change: null };
    const [row] = await tx.update(connectors).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(connectors.id, id)).returning();
    return { result: row, change: connectorChange(id) };
  });
}

/**
 * Deletes a connector with its proxies and history (by cascade), in one transaction. Cloud
 * connectors, when they arrive, must terminate their instances first (pending deletion).
 */
export async function deleteConnector(
  deps: ServiceDeps,
  projectId: string,
  id: string,
): Promise<void> {
  await write(deps, async (tx) => {
    const deleted = await tx.delete(connectors)
      .where(and(eq(connectors.projectId, projectId), eq(connectors.id, id)))
      .returning({ id: connectors.id });
    if (deleted.length === 0) return missingIn(tx, projectId, "Connector");
    return { result: undefined, change: connectorChange(id) };
  });
}

/**
 * Counts the connector's traffic usage from now on (`traffic_reset_at`), leaving its history
 * as it is. The decision it calls for is asked after the commit (routes/connectors.ts).
 */
export function resetConnectorTraffic(
  deps: ServiceDeps,
  projectId: string,
  id: string,
): Promise<ConnectorRow> {
  return write(deps, async (tx) => {
    const [row] = await tx.update(connectors).set({ trafficResetAt: sql`now()` })
      .where(and(eq(connectors.projectId, projectId), eq(connectors.id, id))).returning();
    if (!row) return missingIn(tx, projectId, "Connector");
    // Nothing the feed carries changed: no entry to announce.
    return { result: row, change: null };
  });
}
