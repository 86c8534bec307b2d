/**
 * Provider-API connectors in the routing feed: each one's section is the compile's connector
 * with the pool's routed entries as its proxies, read from Redis at every publish (the pool
 * changes without Postgres). Rows carry `usable_until_ms`, so a gateway stops allocating a proxy
 * then by itself, and their credentials opened: the section is sealed like every other.
 * The order is stable (fetch time, then id), so an unchanged pool publishes nothing.
 */
import { type FeedKeys, sectionDigest } from "../../shared/feed/codec.ts";
import {
  type ConnectorSection,
  connectorSectionName,
  type FeedProxy,
} from "../../shared/feed/models.ts";
import { type ProxyScheme, ProxyStatus } from "../../shared/roles.ts";
import type { SectionText } from "./compile.ts";
import type { EntryRecord } from "../provider-api/pool/contract.ts";
import type { RedisPoolStore } from "../provider-api/pool/store.ts";

export interface PoolSections {
  /** One section per provider-API connector, by section name. */
  sections: Map<string, SectionText>;
  /** The ids of every routed entry: what the runtime section's quarantines are filtered to. */
  proxyIds: Set<string>;
}

/** A routed entry as a feed row; `maxConcurrency` is its connector's `pool.max_concurrency`. */
export function feedRow(
  entry: EntryRecord,
  store: RedisPoolStore,
  maxConcurrency: number | null = null,
): FeedProxy {
  const { username, password } = store.credentials(entry);
  return {
    id: entry.id,
    scheme: entry.scheme as ProxyScheme,
    host: entry.host,
    port: entry.port,
    username,
    password,
    country: entry.country,
    status: ProxyStatus.healthy,
    max_concurrency: maxConcurrency,
    usable_until_ms: entry.usable_until,
  };
}

/** The sections of the compile's provider-API connectors, with their routed entries now. */
export async function poolSections(
  pools: ReadonlyMap<string, ConnectorSection>,
  store: RedisPoolStore,
  feedKeys: FeedKeys,
  nowMs: number,
  concurrency: ReadonlyMap<string, number | null> = new Map(),
): Promise<PoolSections> {
  const sections = new Map<string, SectionText>();
  const proxyIds = new Set<string>();
  const built = await Promise.all([...pools].map(async ([id, base]) => {
    const entries = await store.routed(id, nowMs);
    const limit = concurrency.get(id) ?? null;
    const proxies = entries.map((entry) => feedRow(entry, store, limit));
    const section: ConnectorSection = { ...base, proxies };
    const json = JSON.stringify(section);
    return { id, json, proxies, digest: await sectionDigest(feedKeys, json) };
  }));
  for (const { id, json, proxies, digest } of built) {
    sections.set(connectorSectionName(id), { json, digest });
    for (const proxy of proxies) proxyIds.add(proxy.id);
  }
  return { sections, proxyIds };
}
