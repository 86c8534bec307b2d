/**
 * Connectors: where a project's proxies come from. `static` is a list an operator owns; `vendor`
 * is a vendor account described by a provider descriptor, whose rows the sync job keeps (its
 * config is checked against the descriptor here, with the descriptor's defaults stored);
 * `provider_api` is a provider's API that hands out short-lived proxies into the connector's
 * pool (its config checked by its own schema and stored with its defaults; its templates read
 * only its `provider_api` credential's keys and `{count}`); `cloud` is instances an AWS, GCP or
 * Azure account runs for the connector, which the scale job creates, rotates and terminates (its
 * config checked by its cloud's schema, and against the cloud itself before it is saved).
 * Cross-field rules (one domain list at a time, a credential of the same project and provider)
 * are checked on the copy about to be saved, so an edit of one field cannot break a rule another
 * field keeps.
 */
import { and, asc, count, eq, ne, sql } from "drizzle-orm";
import type { Tx } from "../../db/client.ts";
import {
  connectors,
  credentials,
  proxies,
  type RateLimitConfig,
  type TrafficConfig,
} from "../../db/schema.ts";
import * as v from "valibot";
import {
  ConflictError,
  type FieldIssue,
  NotFoundError,
  ValidationError,
} from "../../shared/errors.ts";
import { callHost, CONNECTOR_CONFIG_KEYS } from "../../shared/vendors/descriptor.ts";
import { checkConnectorConfig } from "../../shared/vendors/fields.ts";
import type { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { ChangeKind, ConnectorKind, JobKind, ProxyStatus } from "../../shared/roles.ts";
import { fieldIssues } from "../model/validation.ts";
import {
  credentialKeysRead,
  fetchTemplateIssues,
  PROVIDER_API,
  ProviderApiConfigSchema,
  readProviderApiConfig,
} from "../provider-api/config.ts";
import { refreshCustom } from "../vendors/catalogue.ts";
import { CLOUD_CONNECTOR_SCHEMAS, CLOUD_PROVIDERS, isCloudProvider } from "../model/cloud.ts";
import { verifyCloudConnector } from "../cloud/verify.ts";
import { checkEgressHost } from "../egress/guard.ts";
import { isMasked, maskSecrets } from "../model/secrets.ts";
import { changedFields, definedOnly, sameValue } from "./diff.ts";
import { missingIn, requireProject } from "./scope.ts";
import { dropFromSequence } from "./sequences.ts";
import { read, type ServiceDeps, write } from "../core/store.ts";
import type { ConnectorRow } from "../model/connectors.ts";

export type { ConnectorRow };

export interface ConnectorFields {
  name: string;
  kind: ConnectorKind;
  credentialId: string | null;
  enabled: boolean;
  weight: number;
  /** Its escalation tier (shared/routing/tiers.ts); null: ranked by price alone. */
  tier: number | null;
  countries: string[];
  domainAllow: string[];
  domainDeny: string[];
  healthcheckUrl: string | null;
  rateLimitConfig: RateLimitConfig | null;
  trafficConfig: TrafficConfig | null;
}

/** A vendor connector's provider (fixed at creation) and config (checked against it). */
export interface ProviderFields {
  provider?: string;
  config?: Record<string, unknown>;
}

export type NewConnector =
  & Pick<ConnectorFields, "name" | "kind">
  & Partial<ConnectorFields>
  & ProviderFields;
/** The kind and provider are fixed at creation: another kind is another connector. */
export type ConnectorPatch =
  & Partial<Omit<ConnectorFields, "kind">>
  & Pick<ProviderFields, "config">;

/** What a connector's fields are when a create leaves them out. */
export const CONNECTOR_DEFAULTS: Readonly<Omit<ConnectorFields, "name" | "kind">> = {
  credentialId: null,
  enabled: true,
  weight: 1,
  tier: null,
  countries: [],
  domainAllow: [],
  domainDeny: [],
  healthcheckUrl: null,
  rateLimitConfig: null,
  trafficConfig: null,
};

const connectorChange = (id: string) => ({ kind: ChangeKind.connector, ref: id });

/**
 * A vendor connector's config as answers show it: its descriptor's secret connector fields
 * masked. A provider no descriptor has any more keeps every field hidden but the ones every
 * connector has.
 */
export function maskConnectorConfig(
  provider: string,
  config: Record<string, unknown>,
  registry: ProviderRegistry,
): Record<string, unknown> {
  // A provider_api or cloud config holds no secret: its secrets are its credential's.
  if (provider === PROVIDER_API || isCloudProvider(provider)) return { ...config };
  const entry = registry.get(provider);
  const secrets = entry === undefined
    ? Object.keys(config).filter((k) => !(CONNECTOR_CONFIG_KEYS as readonly string[]).includes(k))
    : entry.descriptor.connector_fields.filter((f) => f.secret).map((f) => f.key);
  return maskSecrets(config, secrets).config;
}

/** A body's issues under `body.config`. */
function configIssues(issues: readonly FieldIssue[]): FieldIssue[] {
  return issues.map((issue) => ({
    field: issue.field === "" ? "body.config" : `body.config.${issue.field}`,
    message: issue.message,
  }));
}

/**
 * A provider_api connector's config: its schema (defaults filled in), its templates' names, and
 * a URL whose host is visibly internal refused (the egress guard refuses the rest at call time).
 */
function providerApiConfig(deps: ServiceDeps, config: Record<string, unknown>) {
  const parsed = v.safeParse(ProviderApiConfigSchema, config, { abortEarly: false });
  if (!parsed.success) throw new ValidationError(configIssues(fieldIssues("", parsed.issues)));
  const issues = fetchTemplateIssues(parsed.output);
  const host = callHost(parsed.output.fetch.url);
  const refusal = host === undefined
    ? undefined
    : checkEgressHost(host, { allowLoopback: deps.settings.egressAllowLoopback });
  if (refusal !== undefined) {
    issues.push({ field: "fetch.url", message: `is refused: ${refusal}` });
  }
  if (issues.length > 0) throw new ValidationError(configIssues(issues));
  return parsed.output;
}

/** A cloud connector's config, checked by its cloud's schema (defaults filled in). */
function cloudConfig(provider: string, config: Record<string, unknown>): Record<string, unknown> {
  if (!isCloudProvider(provider)) {
    throw new ValidationError([{
      field: "body.provider",
      message: `a cloud connector's provider is one of ${CLOUD_PROVIDERS.join(", ")}`,
    }]);
  }
  const parsed = v.safeParse(CLOUD_CONNECTOR_SCHEMAS[provider], config, { abortEarly: false });
  if (!parsed.success) throw new ValidationError(configIssues(fieldIssues("", parsed.issues)));
  return parsed.output;
}

/**
 * A cloud connector about to be saved, checked against its cloud with its credential: outside
 * the write's transaction (an outbound call). Nothing to check for other kinds.
 */
async function verifyWithCloud(
  deps: ServiceDeps,
  projectId: string,
  kind: string,
  provider: string,
  credentialId: string | null | undefined,
  config: Record<string, unknown>,
): Promise<void> {
  if (kind !== ConnectorKind.cloud || !isCloudProvider(provider)) return;
  const stored = cloudConfig(provider, config);
  if (credentialId === null || credentialId === undefined) {
    throw new ValidationError([{
      field: "body.credential_id",
      message: `a cloud connector needs a ${provider} credential of this project`,
    }]);
  }
  const [credential] = await read(
    deps,
    (db) =>
      db.select({ provider: credentials.provider, config: credentials.config }).from(credentials)
        .where(and(eq(credentials.id, credentialId), eq(credentials.projectId, projectId))),
  );
  // Refused with its own message by the write's validation.
  if (!credential || credential.provider !== provider) return;
  await verifyCloudConnector(
    deps.settings,
    provider,
    credential.config,
    stored,
    "body.credential_id",
  );
}

/**
 * A connector's provider and config: a vendor connector's checked against its descriptor
 * (stored with the descriptor's defaults), a provider_api connector's against its schema
 * (stored with its defaults); a static one takes neither. Returns the config to store.
 */
async function providerConfig(
  deps: ServiceDeps,
  tx: Tx,
  kind: string,
  provider: string,
  config: Record<string, unknown>,
  /** An edit's stored config: a secret sent back as the mask keeps its stored value. */
  stored?: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  if (kind === ConnectorKind.cloud) return cloudConfig(provider, config);
  if (kind === ConnectorKind.providerApi) {
    if (provider !== PROVIDER_API) {
      throw new ValidationError([{
        field: "body.provider",
        message: `a provider_api connector's provider is ${PROVIDER_API}; leave it out`,
      }]);
    }
    return providerApiConfig(deps, config);
  }
  if (kind !== ConnectorKind.vendor) {
    if (provider !== "static") {
      throw new ValidationError([{
        field: "body.provider",
        message: "only vendor connectors name a provider",
      }]);
    }
    if (Object.keys(config).length > 0) {
      throw new ValidationError([{
        field: "body.config",
        message: "a static connector takes no config",
      }]);
    }
    return {};
  }
  await refreshCustom(tx, deps.providers);
  const entry = deps.providers.get(provider);
  if (entry === undefined) {
    throw new ValidationError([{
      field: "body.provider",
      message: provider === "static"
        ? "a vendor connector needs a provider from GET /api/v1/providers"
        : `no provider ${provider}: see GET /api/v1/providers`,
    }]);
  }
  if (stored !== undefined) {
    config = { ...config };
    for (const field of entry.descriptor.connector_fields) {
      if (field.secret && isMasked(config[field.key])) config[field.key] = stored[field.key];
    }
  }
  const checked = checkConnectorConfig(entry.descriptor, config);
  if (checked.issues.length > 0) {
    throw new ValidationError(
      checked.issues.map((issue) => ({
        field: `body.config.${issue.key}`,
        message: issue.message,
      })),
    );
  }
  return checked.config;
}

/**
 * A provider_api connector's credential: one of provider `provider_api` holding every key its
 * templates read, or none when they read none.
 */
async function checkProviderApiCredential(
  tx: Tx,
  projectId: string,
  credentialId: string | null,
  stored: Record<string, unknown>,
): Promise<void> {
  const config = readProviderApiConfig(stored);
  // Checked a moment ago by its schema; a stored one that no longer parses reads nothing.
  if (config === undefined) return;
  const reads = credentialKeysRead(config);
  if (credentialId === null) {
    if (reads.length === 0) return;
    throw new ValidationError([{
      field: "body.credential_id",
      message: `the templates read ${
        reads.map((key) => `{credential.${key}}`).join(", ")
      }: name a ${PROVIDER_API} credential of this project`,
    }]);
  }
  const [credential] = await tx.select({
    provider: credentials.provider,
    config: credentials.config,
  }).from(credentials)
    .where(and(eq(credentials.id, credentialId), eq(credentials.projectId, projectId)))
    .for("key share");
  if (!credential) {
    throw new ConflictError("credential_id: no credential with this id in this project");
  }
  if (credential.provider !== PROVIDER_API) {
    throw new ValidationError([{
      field: "body.credential_id",
      message: `the credential is for ${credential.provider}, not ${PROVIDER_API}`,
    }]);
  }
  const issues = fetchTemplateIssues(config, new Set(Object.keys(credential.config)));
  if (issues.length > 0) throw new ValidationError(configIssues(issues));
}

/** The rules of a connector about to be saved. `touched` names the fields the caller sent. */
async function validateConnector(
  tx: Tx,
  projectId: string,
  connector: ConnectorFields & { provider: string; config: Record<string, unknown> },
  touched: ReadonlySet<string>,
): Promise<void> {
  if (connector.kind === ConnectorKind.providerApi) {
    if (touched.has("credentialId") || touched.has("config")) {
      await checkProviderApiCredential(tx, projectId, connector.credentialId, connector.config);
    }
  }
  if (connector.kind === ConnectorKind.cloud && connector.credentialId === null) {
    throw new ValidationError([{
      field: "body.credential_id",
      message: `a cloud connector needs a ${connector.provider} credential of this project`,
    }]);
  }
  if (connector.kind === ConnectorKind.vendor && connector.credentialId === null) {
    throw new ValidationError([{
      field: "body.credential_id",
      message: `a vendor connector needs a ${connector.provider} credential of this project`,
    }]);
  }
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
    const [credential] = await tx.select({ id: credentials.id, provider: credentials.provider })
      .from(credentials)
      .where(and(
        eq(credentials.id, connector.credentialId),
        eq(credentials.projectId, projectId),
      )).for("key share");
    if (!credential) {
      throw new ConflictError("credential_id: no credential with this id in this project");
    }
    const ownProvider = connector.kind === ConnectorKind.vendor ||
      connector.kind === ConnectorKind.cloud;
    if (ownProvider && credential.provider !== connector.provider) {
      throw new ValidationError([{
        field: "body.credential_id",
        message: `the credential is for ${credential.provider}, not ${connector.provider}`,
      }]);
    }
    // A provider API's keys are for its calls, never a proxy's login.
    if (connector.kind === ConnectorKind.static && credential.provider === PROVIDER_API) {
      throw new ValidationError([{
        field: "body.credential_id",
        message: `a ${PROVIDER_API} credential serves ${PROVIDER_API} connectors only`,
      }]);
    }
    // A cloud account's keys launch instances, never log in to a proxy.
    if (connector.kind === ConnectorKind.static && isCloudProvider(credential.provider)) {
      throw new ValidationError([{
        field: "body.credential_id",
        message:
          `a ${credential.provider} credential serves ${credential.provider} cloud connectors only`,
      }]);
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

export async function createConnector(
  deps: ServiceDeps,
  projectId: string,
  input: NewConnector,
): Promise<ConnectorRow> {
  const {
    provider = input.kind === ConnectorKind.providerApi ? PROVIDER_API : "static",
    config = {},
    ...fields
  } = input;
  const connector: ConnectorFields = {
    ...CONNECTOR_DEFAULTS,
    ...definedOnly(fields),
    name: input.name,
    kind: input.kind,
  };
  await verifyWithCloud(deps, projectId, connector.kind, provider, connector.credentialId, config);
  const row = await write(deps, async (tx) => {
    await requireProject(tx, projectId, { lock: true });
    const stored = await providerConfig(deps, tx, connector.kind, provider, config);
    await validateConnector(
      tx,
      projectId,
      { ...connector, provider, config: stored },
      new Set(Object.keys(definedOnly(input))),
    );
    const [row] = await tx.insert(connectors).values({
      ...connector,
      projectId,
      provider,
      config: stored,
    }).returning();
    return { result: row, change: connectorChange(row.id) };
  });
  await askSync(deps, row);
  return row;
}

/**
 * A vendor connector created or edited is synced at once (its rows follow its config); a
 * provider_api connector's pool is looked after at once (its size and fetch follow its config).
 */
async function askSync(deps: ServiceDeps, row: ConnectorRow): Promise<void> {
  if (row.kind === ConnectorKind.vendor) await deps.jobs.request(JobKind.sync, [row.id]);
  if (row.kind === ConnectorKind.providerApi) await deps.jobs.request(JobKind.pool, [row.id]);
  if (row.kind === ConnectorKind.cloud) await deps.jobs.request(JobKind.scale, [row.id]);
}

export async function updateConnector(
  deps: ServiceDeps,
  projectId: string,
  id: string,
  patch: ConnectorPatch,
): Promise<{ row: ConnectorRow; previous: ConnectorRow }> {
  let changed = false;
  let previous: ConnectorRow | undefined;
  // A cloud connector's new config or credential is checked with the cloud first; the
  // transaction then refuses to save over what another write changed meanwhile.
  let checked: ConnectorRow | undefined;
  if (patch.config !== undefined || patch.credentialId !== undefined) {
    const current = await getConnector(deps, projectId, id);
    if (current.kind === ConnectorKind.cloud) {
      checked = current;
      await verifyWithCloud(
        deps,
        projectId,
        current.kind,
        current.provider,
        patch.credentialId === undefined ? current.credentialId : patch.credentialId,
        patch.config ?? current.config,
      );
    }
  }
  const row = await write(deps, async (tx) => {
    const [current] = await tx.select().from(connectors)
      .where(and(eq(connectors.projectId, projectId), eq(connectors.id, id))).for("update");
    if (!current) return missingIn(tx, projectId, "Connector");
    previous = current;
    if (current.pendingDeletion) {
      throw new ConflictError("The connector is being deleted: its instances are terminating");
    }
    if (
      checked !== undefined &&
      (!sameValue(checked.config, current.config) || checked.credentialId !== current.credentialId)
    ) {
      throw new ConflictError("The connector changed meanwhile; read it again and retry");
    }
    const next = { ...current, ...definedOnly(patch) } as ConnectorRow;
    const touched = new Set(Object.keys(definedOnly(patch)));
    const config = patch.config === undefined ? undefined : await providerConfig(
      deps,
      tx,
      current.kind,
      current.provider,
      patch.config,
      current.config,
    );
    await validateConnector(
      tx,
      projectId,
      { ...next, kind: next.kind as ConnectorKind, config: config ?? current.config },
      touched,
    );
    const changes = changedFields(current, { ...patch, config });
    if (!changes) return { result: current, change: null };
    changed = true;
    const [row] = await tx.update(connectors).set({ ...changes, updatedAt: sql`now()` })
      .where(eq(connectors.id, id)).returning();
    return { result: row, change: connectorChange(id) };
  });
  if (changed) await askSync(deps, row);
  return { row, previous: previous ?? row };
}

/**
 * Deletes a connector with its proxies and history (by cascade), in one transaction, and drops it
 * from its project's sequence in the same one (sequences.ts). A cloud connector's instances must
 * go first: its proxies are marked terminating, it is disabled and marked pending deletion, and
 * the scale job terminates the instances, then deletes it (a second delete asks it again).
 */
export async function deleteConnector(
  deps: ServiceDeps,
  projectId: string,
  id: string,
): Promise<string> {
  const kind = await write(deps, async (tx) => {
    const [current] = await tx.select({ kind: connectors.kind }).from(connectors)
      .where(and(eq(connectors.projectId, projectId), eq(connectors.id, id))).for("update");
    if (!current) return missingIn(tx, projectId, "Connector");
    if (current.kind === ConnectorKind.cloud) {
      await tx.update(proxies)
        .set({
          status: ProxyStatus.terminating,
          statusChangedAt: sql`now()`,
          updatedAt: sql`now()`,
        })
        .where(and(eq(proxies.connectorId, id), ne(proxies.status, ProxyStatus.terminating)));
      await tx.update(connectors)
        .set({ enabled: false, pendingDeletion: true, updatedAt: sql`now()` })
        .where(eq(connectors.id, id));
      await dropFromSequence(tx, projectId, [id]);
      return { result: current.kind, change: connectorChange(id) };
    }
    await tx.delete(connectors).where(eq(connectors.id, id));
    await dropFromSequence(tx, projectId, [id]);
    return { result: current.kind, change: connectorChange(id) };
  });
  // A provider-API connector's pool lives in Redis: its key's next run finds it gone and purges
  // the pool (entries, ownership, fetch bookkeeping).
  if (kind === ConnectorKind.providerApi) await deps.jobs.request(JobKind.pool, [id]);
  if (kind === ConnectorKind.cloud) await deps.jobs.request(JobKind.scale, [id]);
  return kind;
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

/**
 * A vendor sync's outcome on its connector: the vendor's error with one more in a row, or none.
 * Error bookkeeping is not in the feed, so nothing is announced.
 */
export async function recordConnectorError(
  deps: ServiceDeps,
  id: string,
  error: string | null,
  /** When it happened (a cloud connector backs off from it); now by default. */
  at?: Date,
): Promise<void> {
  await write(deps, async (tx) => {
    await tx.update(connectors).set(
      error === null ? { lastError: null, lastErrorAt: null, consecutiveErrors: 0 } : {
        lastError: error.slice(0, 2000),
        lastErrorAt: at ?? sql`now()`,
        consecutiveErrors: sql`${connectors.consecutiveErrors} + 1`,
      },
    ).where(
      error === null
        ? and(
          eq(connectors.id, id),
          sql`(${connectors.lastError} is not null or ${connectors.consecutiveErrors} <> 0)`,
        )
        : eq(connectors.id, id),
    );
    return { result: undefined, change: null };
  });
}
