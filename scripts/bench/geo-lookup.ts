/**
 * One run of IP database lookups, as the gateway and the workers make them: the shipped country
 * database (MaxMind DB), a 100,000-line geofeed, and the two stacked (the geofeed first). The
 * addresses are 100,000 random public IPv4 and IPv6 ones, looked up twice over to warm the code up
 * (a long-lived process is warm), then timed; prints the nanoseconds per lookup of each as one
 * JSON line, with the open times. The `geo` suite runs it under Deno, one fresh process per run:
 *
 *   DENO_NO_UPDATE_CHECK=1 npx deno run --allow-read scripts/bench/geo-lookup.ts
 *   npx tsx scripts/bench/geo-lookup.ts           # under Node
 */
import { openGeofeed } from "../../shared/geo/geofeed.ts";
import { openMmdb } from "../../shared/geo/mmdb.ts";
import { SHIPPED_COUNTRY_DATABASE } from "../../shared/geo/shipped.ts";
import { GeoStack } from "../../shared/geo/stack.ts";
import type { GeoDatabase } from "../../shared/geo/contract.ts";

export interface GeoLookupResult {
  runtime: string;
  addresses: number;
  mmdbOpenMs: number;
  geofeedOpenMs: number;
  mmdbNs: number;
  geofeedNs: number;
  stackNs: number;
  /** Of the addresses, how many the shipped database placed in a country. */
  placed: number;
  /**
   * Resident memory the shipped database added (MiB): read and opened, then every address
   * looked up three times (its decoded records cached), against the process before it.
   */
  shippedRssMb: number;
}

function rssBytes(): number {
  const deno = (globalThis as { Deno?: { memoryUsage(): { rss: number } } }).Deno;
  if (deno) return deno.memoryUsage().rss;
  return (globalThis as unknown as { process: { memoryUsage(): { rss: number } } }).process
    .memoryUsage().rss;
}

const ADDRESSES = 100_000;
const GEOFEED_LINES = 100_000;

/** A deterministic generator, so every run asks the same addresses. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function addresses(): string[] {
  const next = random(7);
  const out: string[] = [];
  for (let i = 0; i < ADDRESSES; i++) {
    if (i % 4 === 3) {
      const words = Array.from({ length: 8 }, () => Math.floor(next() * 65536).toString(16));
      words[0] = (0x2001 + Math.floor(next() * 0xd00)).toString(16);
      out.push(words.join(":"));
    } else {
      const octets = Array.from({ length: 4 }, () => Math.floor(next() * 256));
      octets[0] = 1 + Math.floor(next() * 222);
      out.push(octets.join("."));
    }
  }
  return out;
}

/** A geofeed of /24 blocks across the IPv4 space, a country each. */
function geofeed(): string {
  const countries = ["DE", "FR", "US", "GB", "NL", "JP", "BR", "PL"];
  const lines: string[] = [];
  for (let i = 0; i < GEOFEED_LINES; i++) {
    const block = i * 97;
    lines.push(
      `${1 + (block >> 16) % 222}.${(block >> 8) & 255}.${block & 255}.0/24,${
        countries[i % countries.length]
      }`,
    );
  }
  return lines.join("\n");
}

async function readBytes(url: URL): Promise<Uint8Array> {
  const deno = (globalThis as { Deno?: { readFile(u: URL): Promise<Uint8Array> } }).Deno;
  if (deno) return await deno.readFile(url);
  const { readFile } = await import("node:fs/promises");
  return new Uint8Array(await readFile(url));
}

function timeLookups(db: { lookup(a: string): unknown }, asked: readonly string[]): number {
  for (let round = 0; round < 2; round++) for (const a of asked) db.lookup(a);
  const started = performance.now();
  for (const a of asked) db.lookup(a);
  return ((performance.now() - started) * 1e6) / asked.length;
}

const asked = addresses();
const rssBefore = rssBytes();
let started = performance.now();
const mmdb: GeoDatabase = openMmdb(
  SHIPPED_COUNTRY_DATABASE.name,
  await readBytes(SHIPPED_COUNTRY_DATABASE.url),
);
const mmdbOpenMs = performance.now() - started;
const mmdbNs = timeLookups(mmdb, asked);
const shippedRssMb = (rssBytes() - rssBefore) / 2 ** 20;
started = performance.now();
const feed = openGeofeed("bench", geofeed());
const geofeedOpenMs = performance.now() - started;
const result: GeoLookupResult = {
  runtime: "Deno" in globalThis ? "Deno" : "Node",
  addresses: asked.length,
  mmdbOpenMs,
  geofeedOpenMs,
  mmdbNs,
  geofeedNs: timeLookups(feed, asked),
  stackNs: timeLookups(new GeoStack([feed, mmdb]), asked),
  placed: asked.filter((a) => mmdb.lookup(a)?.country != null).length,
  shippedRssMb,
};
console.log(JSON.stringify(result));
