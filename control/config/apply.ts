/**
 * Diff and apply of a configuration document. Both read the stored configuration in one
 * transaction under one advisory lock, so two applies run one after the other and the second
 * sees what the first wrote; an apply that names the fingerprint its diff was made against is
 * refused when the configuration moved since (someone else applied or edited meanwhile), with the
 * fresh diff. Everything an apply writes lands in one transaction and is announced by one `all`
 * change entry; an apply that changes nothing writes and announces nothing.
 */
import { and, eq, inArray, sql } from "drizzle-orm";
import { READ_SNAPSHOT, type Tx } from "../../db/client.ts";
import { configRevision, connectors, credentials, projects, proxies } from "../../db/schema.ts";
import { errorText, StaleError, ValidationError } from "../../shared/errors.ts";
import { ChangeKind, JobKind } from "../../shared/roles.ts";
import { connectorSubject, projectSubject } from "../../shared/traffic-subjects.ts";
import type { ControlDeps } from "../core/deps.ts";
import { insertProxies, MANUAL } from "../services/proxies.ts";
import { checkPasswordlessBlocks } from "../services/projects.ts";
import { dropFromSequence } from "../services/sequences.ts";
import { read, write } from "../core/store.ts";
import { askPending } from "../traffic/asks.ts";
import { liftConnectorQuarantines } from "../services/quarantines.ts";
import {
  clearProjectState,
  EMPTY_FOOTPRINT,
  type ProjectFootprint,
  readFootprint,
} from "../services/project-state.ts";
import type { ConfigDocument } from "./document.ts";
import { type ConfigChange, type ConfigPlan, planConfig } from "./plan.ts";
import { configFingerprint, exportConfig, readConfigState } from "./state.ts";

/** Serialises diffs and applies (and keeps them from reading a half-written apply's state). */
export const CONFIG_LOCK = "octoprox.configuration";

export interface ConfigOutcome {
  /** The configuration's fingerprint: before for a diff, after for an apply. */
  fingerprint: string;
  changes: ConfigChange[];
  unchanged: number;
}

/** An apply's outcome; not applied: the base moved, and this is the fresh diff against it. */
export type ApplyOutcome = ConfigOutcome & { applied: boolean };

export interface ApplyOptions {
  prune?: boolean;
  /** The fingerprint the caller's diff saw; omitted: apply over whatever is stored. */
  baseFingerprint?: string;
}

type ConfigDeps = Pick<
  ControlDeps,
  "database" | "changes" | "settings" | "jobs" | "redis" | "keys" | "logger" | "providers"
>;

async function lockConfig(tx: Tx): Promise<void> {
  await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${CONFIG_LOCK}))`);
}

function fingerprintOf(deps: ConfigDeps, state: Awaited<ReturnType<typeof readConfigState>>) {
  return configFingerprint(state, {
    defaultStrategy: deps.settings.defaultStrategy,
    key: deps.settings.internalSecret,
  });
}

/**
 * The revision fence: a document with a revision lower than the last one applied is refused, so
 * a replica still holding an older file cannot undo a newer one. Answers the stored revision.
 */
async function checkRevision(tx: Tx, document: ConfigDocument): Promise<number | null> {
  const [row] = await tx.select({ revision: configRevision.revision }).from(configRevision);
  const stored = row?.revision ?? null;
  if (document.revision !== undefined && stored !== null && document.revision < stored) {
    throw new StaleError(
      `This configuration is revision ${document.revision}, older than revision ${stored} ` +
        "already applied: nothing was applied. Apply a file of revision " + stored +
        " or higher.",
    );
  }
  return stored;
}

async function recordRevision(tx: Tx, revision: number | undefined): Promise<void> {
  if (revision === undefined) return;
  await tx.insert(configRevision).values({ id: 1, revision })
    .onConflictDoUpdate({
      target: configRevision.id,
      set: {
        revision: sql`greatest(${configRevision.revision}, excluded.revision)`,
        appliedAt: sql`now()`,
      },
    });
}

function throwIssues(plan: ConfigPlan): void {
  if (plan.issues.length > 0) throw new ValidationError(plan.issues);
}

/** What an apply of `document` would change, and the fingerprint to apply it against. */
export function diffConfig(
  deps: ConfigDeps,
  document: ConfigDocument,
  options: { prune?: boolean } = {},
): Promise<ConfigOutcome> {
  return read(deps, () =>
    deps.database.transaction(async (tx) => {
      await lockConfig(tx);
      await checkRevision(tx, document);
      const state = await readConfigState(tx);
      const plan = planConfig(state, document, {
        prune: options.prune === true,
        defaultStrategy: deps.settings.defaultStrategy,
      });
      throwIssues(plan);
      return {
        fingerprint: fingerprintOf(deps, state),
        changes: plan.changes,
        unchanged: plan.unchanged,
      };
    }, READ_SNAPSHOT));
}

/** The stored configuration as a document (secrets left out), with its fingerprint. */
export function exportStoredConfig(deps: ConfigDeps) {
  return read(deps, () =>
    deps.database.transaction(async (tx) => {
      const state = await readConfigState(tx);
      const [row] = await tx.select({ revision: configRevision.revision }).from(configRevision);
      return {
        fingerprint: fingerprintOf(deps, state),
        /** The last revision a document applied with one carried; null when none did. */
        revision: row?.revision ?? null,
        config: exportConfig(state, { defaultStrategy: deps.settings.defaultStrategy }),
      };
    }, READ_SNAPSHOT));
}

interface Written {
  outcome: ApplyOutcome;
  addedProxies: string[];
  trafficSubjects: string[];
  /** Connectors whose rate limits changed: the quarantines they tripped are lifted. */
  limitsEdited: string[];
  /** Projects the apply pruned: what they left in Redis is removed. */
  pruned: ProjectFootprint;
}

/** Applies `document` in one transaction; refused (applied false) when the base moved. */
export async function applyConfig(
  deps: ConfigDeps,
  document: ConfigDocument,
  options: ApplyOptions = {},
): Promise<ApplyOutcome> {
  const written = await write<Written>(deps, async (tx) => {
    await lockConfig(tx);
    await checkRevision(tx, document);
    const state = await readConfigState(tx);
    const before = fingerprintOf(deps, state);
    const plan = planConfig(state, document, {
      prune: options.prune === true,
      defaultStrategy: deps.settings.defaultStrategy,
    });
    throwIssues(plan);
    const summary = { changes: plan.changes, unchanged: plan.unchanged };
    if (options.baseFingerprint !== undefined && options.baseFingerprint !== before) {
      return {
        result: {
          outcome: { applied: false, fingerprint: before, ...summary },
          addedProxies: [],
          trafficSubjects: [],
          limitsEdited: [],
          pruned: EMPTY_FOOTPRINT,
        },
        change: null,
      };
    }
    if (plan.changes.length === 0) {
      await recordRevision(tx, document.revision);
      return {
        result: {
          outcome: { applied: true, fingerprint: before, ...summary },
          addedProxies: [],
          trafficSubjects: [],
          limitsEdited: [],
          pruned: EMPTY_FOOTPRINT,
        },
        change: null,
      };
    }
    const done = await runPlan(tx, plan);
    await recordRevision(tx, document.revision);
    const after = fingerprintOf(deps, await readConfigState(tx));
    return {
      result: { outcome: { applied: true, fingerprint: after, ...summary }, ...done },
      change: { kind: ChangeKind.all, ref: "*" },
    };
  });
  // New proxies are checked at once, not at their slot second; new limits decided.
  await deps.jobs.request(JobKind.health, written.addedProxies, { first: true });
  if (written.trafficSubjects.length > 0) {
    try {
      await askPending(deps, written.trafficSubjects, deps.settings.redisRequestTimeoutMs);
    } catch (error) {
      deps.logger.warn(
        { error: errorText(error) },
        "Traffic decision not asked; the next metered bytes or index hygiene ask again",
      );
    }
  }
  for (const connectorId of written.limitsEdited) await liftConnectorQuarantines(deps, connectorId);
  await clearProjectState(deps, written.pruned);
  return written.outcome;
}

/** Runs a plan's writes: deletes first, then projects, credentials, connectors and proxies. */
async function runPlan(
  tx: Tx,
  plan: ConfigPlan,
): Promise<Omit<Written, "outcome">> {
  const addedProxies: string[] = [];
  const trafficSubjects: string[] = [];
  const limitsEdited: string[] = [];
  const pruned = await readFootprint(tx, plan.deleteProjects);
  if (plan.deleteProjects.length > 0) {
    await tx.delete(projects).where(inArray(projects.id, plan.deleteProjects));
  }
  for (const project of plan.projects) {
    const toDelete = [...project.connectors.flatMap((c) => c.deleteProxies)];
    if (toDelete.length > 0) await tx.delete(proxies).where(inArray(proxies.id, toDelete));
    if (project.deleteConnectors.length > 0) {
      await tx.delete(connectors).where(inArray(connectors.id, project.deleteConnectors));
      if (project.id !== undefined) {
        await dropFromSequence(tx, project.id, project.deleteConnectors);
      }
    }
    if (project.deleteCredentials.length > 0) {
      await tx.delete(credentials).where(inArray(credentials.id, project.deleteCredentials));
    }
  }
  for (const project of plan.projects) {
    let projectId = project.id;
    if (project.fields) {
      await checkPasswordlessBlocks(tx, projectId, project.fields.passwordlessCidrs);
      if (projectId === undefined) {
        const [row] = await tx.insert(projects).values(project.fields)
          .returning({ id: projects.id });
        projectId = row.id;
      } else {
        await tx.update(projects).set({ ...project.fields, updatedAt: sql`now()` })
          .where(eq(projects.id, projectId));
      }
      if (project.trafficChanged) trafficSubjects.push(projectSubject(projectId));
    }
    const id = projectId as string;
    for (const credential of project.updateCredentials) {
      await tx.update(credentials).set({
        name: credential.name,
        config: credential.config,
        updatedAt: sql`now()`,
      }).where(eq(credentials.id, credential.id));
    }
    if (project.createCredentials.length > 0) {
      await tx.insert(credentials).values(
        project.createCredentials.map((credential) => ({ ...credential, projectId: id })),
      );
    }
    const credentialIds = new Map(
      (await tx.select({ id: credentials.id, name: credentials.name }).from(credentials)
        .where(eq(credentials.projectId, id)))
        .map((row) => [row.name.toLowerCase(), row.id]),
    );
    for (const connector of project.connectors) {
      let connectorId = connector.id;
      if (connector.fields) {
        const credentialId = connector.credential === null
          ? null
          : credentialIds.get(connector.credential.toLowerCase()) ?? null;
        const values = { ...connector.fields, credentialId };
        if (connectorId === undefined) {
          const [row] = await tx.insert(connectors).values({
            ...values,
            projectId: id,
            provider: "static",
            config: {},
          }).returning({ id: connectors.id });
          connectorId = row.id;
        } else {
          await tx.update(connectors).set({ ...values, updatedAt: sql`now()` })
            .where(and(eq(connectors.id, connectorId), eq(connectors.projectId, id)));
        }
        if (connector.trafficChanged) trafficSubjects.push(connectorSubject(connectorId));
        if (connector.rateLimitChanged) limitsEdited.push(connectorId);
      }
      const cid = connectorId as string;
      for (const proxy of connector.updateProxies) {
        await tx.update(proxies).set({
          password: proxy.password,
          country: proxy.country,
          countrySource: proxy.country === null ? null : MANUAL,
          updatedAt: sql`now()`,
        }).where(eq(proxies.id, proxy.id));
      }
      addedProxies.push(...await insertProxies(tx, id, cid, connector.createProxies));
    }
  }
  return { addedProxies, trafficSubjects, limitsEdited, pruned };
}
