/**
 * One run of the gateway's decode of a 5,000-row connector section, as the feed follower does
 * it: open (AES-GCM + gunzip), digest check (HMAC) and parse + validate. 20 decodes warm the
 * code up (a long-lived gateway is warm), then 30 are timed; prints their medians as one JSON
 * line. The `feed` suite runs it under Deno, one fresh process per run:
 *
 *   DENO_NO_UPDATE_CHECK=1 npx deno run scripts/bench/feed-decode.ts [rows]
 *   npx tsx scripts/bench/feed-decode.ts [rows]           # under Node
 */
import { deriveFeedKeys, open, seal, sectionDigest } from "../../shared/feed/codec.ts";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import { parseSection } from "../../shared/feed/sections.ts";
import { entryArguments } from "./entry-args.ts";

export interface DecodeResult {
  runtime: string;
  rows: number;
  jsonBytes: number;
  sealedBytes: number;
  openMs: number;
  digestMs: number;
  parseMs: number;
  totalMs: number;
}

function connectorSection(rows: number): string {
  const id = "7c0a0d4e-2f4b-4c59-9d38-5d1f7c1e0001";
  return JSON.stringify({
    schema: SCHEMA_VERSION,
    connector: {
      id,
      project_id: "7c0a0d4e-2f4b-4c59-9d38-5d1f7c1e0000",
      name: "residential-eu",
      kind: "static",
      provider: "static",
      enabled: true,
      pending_deletion: false,
      weight: 10,
      countries: ["DE", "FR", "GB", "NL"],
      domain_allow: [],
      domain_deny: [],
      rate_limit: null,
      traffic: null,
    },
    proxies: Array.from({ length: rows }, (_, i) => ({
      id: crypto.randomUUID(),
      scheme: "http",
      host: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      port: 3128 + (i % 100),
      username: `user-${i}-zone-resi`,
      password: `p${(i * 7919).toString(36)}x${(i * 104729).toString(36)}`,
      country: ["DE", "FR", "GB", "NL"][i % 4],
      status: i % 17 === 0 ? "unhealthy" : "healthy",
      max_concurrency: i % 5 === 0 ? 8 : null,
    })),
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const rows = Number(entryArguments()[0] ?? 5000);
const keys = await deriveFeedKeys("bench-secret-bench-secret-bench-secret-0123456789");
const json = connectorSection(rows);
const digest = await sectionDigest(keys, json);
const sealed = await seal(keys, json);
const name = "connector:7c0a0d4e-2f4b-4c59-9d38-5d1f7c1e0001";
for (let i = 0; i < 20; i++) parseSection(name, await open(keys, sealed));
const opening: number[] = [];
const digesting: number[] = [];
const parsing: number[] = [];
const total: number[] = [];
for (let i = 0; i < 30; i++) {
  const t0 = performance.now();
  const opened = await open(keys, sealed);
  const t1 = performance.now();
  if ((await sectionDigest(keys, opened)) !== digest) throw new Error("digest mismatch");
  const t2 = performance.now();
  parseSection(name, opened);
  const t3 = performance.now();
  opening.push(t1 - t0);
  digesting.push(t2 - t1);
  parsing.push(t3 - t2);
  total.push(t3 - t0);
}
const result: DecodeResult = {
  runtime: "Deno" in globalThis ? "Deno" : "Node",
  rows,
  jsonBytes: json.length,
  sealedBytes: sealed.length,
  openMs: median(opening),
  digestMs: median(digesting),
  parseMs: median(parsing),
  totalMs: median(total),
};
console.log(JSON.stringify(result));
