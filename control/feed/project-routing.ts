/**
 * One project's routing as a gateway would hold it now, for the api's readers of "who would
 * serve" (the routing preview, the traffic split): the controller's own compile of that one
 * project, provider-API pools' routed entries and the runtime section (quarantines, traffic
 * blocks) read from Redis as a publish reads them, the sections parsed by the feed's models, and
 * a router of the gateway's code with that snapshot applied. Built here once so the two readers
 * cannot drift from each other, nor from what gateways do.
 *
 * Read-only: the compile is a read-only transaction, and the router is the caller's to throw
 * away with its counts. Without Redis the routing is answered without runtime state
 * (`runtimeIncluded: false`), as the other views are, and the pools' connectors without proxies.
 */
import { compile, readRuntimeSection, type SectionText } from "./compile.ts";
import { poolSections } from "./pool-sections.ts";
import { poolStoreOf } from "../provider-api/pool/store.ts";
import { redisDeadline } from "../core/redis.ts";
import type { ControlDeps } from "../core/deps.ts";
import { read } from "../core/store.ts";
import { deriveFeedKeys, type FeedKeys } from "../../shared/feed/codec.ts";
import {
  type ConnectorSection,
  connectorSectionName,
  type FeedSections,
  type GlobalSection,
  type RuntimeSection,
  SCHEMA_VERSION,
} from "../../shared/feed/models.ts";
import { parseSection } from "../../shared/feed/sections.ts";
import { NotFoundError } from "../../shared/errors.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import type { ProjectEntry, RoutingSnapshot } from "../../shared/routing/snapshot.ts";
import { RedisStickyStore } from "../../shared/routing/sticky/redis-store.ts";
import type { StickyStore } from "../../shared/routing/sticky/store.ts";

export type ProjectRoutingDeps = Pick<
  ControlDeps,
  "database" | "settings" | "providers" | "redis" | "keys" | "logger"
>;

/** The part of Redis a reading could not have: the pools' entries, or the runtime section. */
export type RoutingOutage = "pools" | "runtime";

export interface ProjectRoutingOptions {
  /**
   * Let sticky read a session's binding from Redis (never written). Only a reader that asks
   * the router to `acquire` needs it; it is left out when the runtime read failed.
   */
  stickyReads: boolean;
  /** Told of each part Redis did not give, so each reader logs an outage its own way. */
  unavailable(part: RoutingOutage, error: unknown): void;
}

export interface ProjectRouting {
  /** A router of the gateway's code holding `snapshot`; it has served nothing. */
  router: CoreRouter;
  snapshot: RoutingSnapshot;
  project: ProjectEntry;
  /** The router's clock: the moment pools and runtime state were read for. */
  nowMs: number;
  /** False when Redis did not answer: no quarantine, block or binding was seen. */
  runtimeIncluded: boolean;
  /** When the compile's snapshot of Postgres was taken. */
  compiledAt: number;
}

const feedKeysBySecret = new Map<string, Promise<FeedKeys>>();

/** The feed keys of this install (HKDF, once per process). */
function feedKeysOf(secret: string): Promise<FeedKeys> {
  let keys = feedKeysBySecret.get(secret);
  if (keys === undefined) {
    keys = deriveFeedKeys(secret);
    feedKeysBySecret.set(secret, keys);
  }
  return keys;
}

/** Sticky bindings read from Redis as a gateway reads them; a reader never binds a session. */
function readOnlyStickyStore(deps: ProjectRoutingDeps): StickyStore {
  const store = new RedisStickyStore(deps.redis, deps.keys);
  return {
    get: (projectId, sessionId, signal) => store.get(projectId, sessionId, signal),
    set: () => Promise.resolve(),
  };
}

const EMPTY_RUNTIME: RuntimeSection = Object.freeze({
  schema: SCHEMA_VERSION,
  quarantines: [],
  traffic_blocks: [],
  project_blocks: [],
});

/** The project's routing now; NotFoundError when the compile does not hold the project. */
export async function projectRouting(
  deps: ProjectRoutingDeps,
  projectId: string,
  options: ProjectRoutingOptions,
): Promise<ProjectRouting> {
  const settings = deps.settings;
  const compiled = await read(deps, async () =>
    compile(deps.database, {
      keys: await feedKeysOf(settings.internalSecret),
      defaultStrategy: settings.defaultStrategy,
      providers: deps.providers,
      projectId,
    }));
  if (!compiled.projectIds.has(projectId)) throw new NotFoundError("Project");

  const nowMs = Date.now();
  // Provider-API connectors' rows are their pools' routed entries, read as a publish reads them.
  let poolTexts = new Map<string, SectionText>();
  let poolProxyIds = new Set<string>();
  if (compiled.pools.size > 0) {
    try {
      const feedKeys = await feedKeysOf(settings.internalSecret);
      const found = await redisDeadline(
        settings.redisRequestTimeoutMs,
        () =>
          poolSections(
            compiled.pools,
            poolStoreOf(deps),
            feedKeys,
            nowMs,
            compiled.poolConcurrency,
          ),
      );
      poolTexts = found.sections;
      poolProxyIds = found.proxyIds;
    } catch (error) {
      options.unavailable("pools", error);
      for (const [id, section] of compiled.pools) {
        const json = JSON.stringify(section);
        poolTexts.set(connectorSectionName(id), { json, digest: "" });
      }
    }
  }

  let runtime = EMPTY_RUNTIME;
  let runtimeIncluded = true;
  try {
    runtime = await redisDeadline(
      settings.redisRequestTimeoutMs,
      () =>
        readRuntimeSection(deps.redis, deps.keys, {
          ...compiled,
          proxyIds: new Set([...compiled.proxyIds, ...poolProxyIds]),
        }, nowMs),
    );
  } catch (error) {
    runtimeIncluded = false;
    options.unavailable("runtime", error);
  }

  // The sections as a gateway's follower hands them over: parsed by the same models.
  let global: GlobalSection | undefined;
  const connectors = new Map<string, ConnectorSection>();
  for (const [name, text] of [...compiled.sections, ...poolTexts]) {
    const parsed = parseSection(name, text.json);
    if (parsed.kind === "global") global = parsed.section;
    else if (parsed.kind === "connector") connectors.set(parsed.connectorId, parsed.section);
  }
  if (global === undefined) throw new Error("The compile made no global section");
  const sections: FeedSections = { global, runtime, connectors };

  const router = new CoreRouter({
    // Nobody is authenticated here: a reader names the project by its id.
    verifyPassword: () => Promise.resolve(false),
    log: { warn: (message, fields) => deps.logger.warn({ ...fields }, message) },
    nowMs: () => nowMs,
    sticky: options.stickyReads && runtimeIncluded
      ? { store: readOnlyStickyStore(deps), requestTimeoutMs: settings.redisRequestTimeoutMs }
      : undefined,
  });
  const snapshot = router.apply(sections);
  const project = snapshot.projectsById.get(projectId);
  if (project === undefined) throw new NotFoundError("Project");
  return { router, snapshot, project, nowMs, runtimeIncluded, compiledAt: compiled.compiledAt };
}
