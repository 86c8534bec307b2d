/**
 * Exit discovery for port pools whose vendor lists no exits: one GET of the descriptor's
 * discovery URL through each slot (the vendor's "where am I" page), at most `concurrency` at
 * once, its JSON read at `ip_path` (the exit) and `country_path`. The request goes through the
 * vendor's proxy, so it leaves from the vendor's network, not ours.
 *
 * A slot whose discovery fails keeps what it had (its stored exit and country), so a vendor's
 * hiccup moves nothing; only an answer moves an exit.
 */
import { search } from "@jmespath-community/jmespath";
import { normaliseCountry } from "../../shared/countries.ts";
import { fillPlaceholders } from "../../shared/feed/placeholders.ts";
import type { DescriptorProvider, ProviderRow } from "../../shared/vendors/provider.ts";
import type { UpstreamScheme } from "../../shared/proxy-protocol/types.ts";
import { Semaphore } from "../core/semaphore.ts";
import { probe } from "../upstream/probe.ts";
import type { StoredRow } from "./rows.ts";

export const DISCOVERY_TIMEOUT_MS = 15_000;

export interface DiscoveryOutcome {
  rows: ProviderRow[];
  /** Slots whose discovery answered. */
  discovered: number;
  failed: number;
}

function read(json: unknown, path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  try {
    const value = search(json as Parameters<typeof search>[0], path);
    return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
  } catch {
    return undefined;
  }
}

export async function discoverExits(
  provider: DescriptorProvider,
  rows: readonly ProviderRow[],
  stored: readonly StoredRow[],
  signal?: AbortSignal,
): Promise<DiscoveryOutcome> {
  const discovery = provider.type.discovery!;
  const bySlot = new Map(stored.map((row) => [String(row.metadata.slot ?? ""), row]));
  const sources = { connector: provider.config, credential: provider.credential };
  const gate = new Semaphore(discovery.concurrency);
  let discovered = 0;
  let failed = 0;
  const out = await Promise.all(rows.map(async (row) => {
    const before = bySlot.get(row.slot);
    const kept: ProviderRow = {
      ...row,
      country: before?.country ?? row.country,
      metadata: before?.metadata.exit === undefined
        ? row.metadata
        : { ...row.metadata, exit: before.metadata.exit },
    };
    await gate.acquire();
    try {
      const result = await probe({
        proxy: {
          scheme: row.scheme as UpstreamScheme,
          host: row.host,
          port: row.port,
          username: fillPlaceholders(row.username, sources) ?? undefined,
          password: fillPlaceholders(row.password, sources) ?? undefined,
        },
        url: discovery.url,
        timeoutMs: DISCOVERY_TIMEOUT_MS,
        signal,
      });
      const json = result.ok ? JSON.parse(new TextDecoder().decode(result.body)) : undefined;
      const exit = read(json, discovery.ip_path);
      if (exit === undefined) throw new Error(`no exit in the answer (${result.status})`);
      const country = read(json, discovery.country_path);
      discovered++;
      return {
        ...row,
        country: country === undefined ? kept.country : normaliseCountry(country) ?? kept.country,
        metadata: { ...row.metadata, exit },
      };
    } catch {
      failed++;
      return kept;
    } finally {
      gate.release();
    }
  }));
  return { rows: out, discovered, failed };
}
