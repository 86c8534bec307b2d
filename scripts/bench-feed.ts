/**
 * Feed timings for the notes (a measurement, not a test):
 * - compile of 100,000 proxies on the controller (Postgres read, sections, digests), and the
 *   seal of the whole feed a first publish does;
 * - a one-connector update of 5,000 rows on the gateway: open (AES-GCM + gunzip), digest check
 *   and parse/validate, as the follower does it.
 *
 *   npx tsx scripts/bench-feed.ts                  # both (the compile needs Postgres)
 *   npx tsx scripts/bench-feed.ts --decode-only    # decode under Node
 *   DENO_NO_UPDATE_CHECK=1 npx deno run -A scripts/bench-feed.ts --decode-only   # under Deno
 *
 * The compile creates a scratch database (OCTOPROX_BENCH_DATABASE_URL names the admin database,
 * postgres://postgres@127.0.0.1:5432/postgres by default) and drops it afterwards.
 */
import { deriveFeedKeys, type FeedKeys, open, seal, sectionDigest } from "../shared/feed/codec.ts";
import { SCHEMA_VERSION } from "../shared/feed/models.ts";
import { parseSection } from "../shared/feed/sections.ts";

const RUNS = 7;

function summary(label: string, samplesMs: number[]): void {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  console.log(
    `${label}: median ${median.toFixed(2)} ms, min ${sorted[0].toFixed(2)} ms, max ${
      sorted[sorted.length - 1].toFixed(2)
    } ms (${sorted.length} runs)`,
  );
}

async function time<T>(run: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const value = await run();
  return [performance.now() - started, value];
}

// ---------------------------------------------------------------------------------------------

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

async function benchDecode(keys: FeedKeys): Promise<void> {
  const json = connectorSection(5000);
  const digest = await sectionDigest(keys, json);
  const sealed = await seal(keys, json);
  const name = "connector:7c0a0d4e-2f4b-4c59-9d38-5d1f7c1e0001";
  console.log(
    `5,000-row connector section: ${(json.length / 1024).toFixed(0)} KiB JSON, ${
      (sealed.length / 1024).toFixed(0)
    } KiB sealed`,
  );
  // Warm up the JIT the way a long-lived gateway is.
  for (let i = 0; i < 20; i++) parseSection(name, await open(keys, sealed));
  const total: number[] = [];
  const opening: number[] = [];
  const digesting: number[] = [];
  const parsing: number[] = [];
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
  summary("  open (AES-GCM + gunzip)", opening);
  summary("  digest check (HMAC)", digesting);
  summary("  parse + validate", parsing);
  summary("decode of one 5,000-row connector (open + digest + parse + validate)", total);
}

// ---------------------------------------------------------------------------------------------

async function benchCompile(keys: FeedKeys): Promise<void> {
  const { default: postgres } = await import("postgres");
  const { createDatabase } = await import("../db/client.ts");
  const { migrate } = await import("../db/migrate.ts");
  const { compile } = await import("../control/controller/compile.ts");
  const adminUrl = process.env.OCTOPROX_BENCH_DATABASE_URL ??
    "postgres://postgres@127.0.0.1:5432/postgres";
  const name = `ox_bench_${Date.now()}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const database = createDatabase(url.toString(), { poolSize: 2 });
  try {
    await migrate(url.toString());
    const sql = database.sql;
    // 100,000 proxies: 19 connectors of 5,000 and one of 5,000 with template placeholders,
    // over 10 projects.
    await sql`insert into projects (name, username, password)
      select 'project ' || g, 'user' || g, 'password-' || g from generate_series(1, 10) g`;
    await sql`insert into credentials (project_id, name, provider, config)
      select id, 'cred', 'static', '{"user": "acct", "pass": "secret"}'::jsonb from projects`;
    await sql`insert into connectors (project_id, credential_id, name, kind, countries)
      select p.id, c.id, 'conn ' || g, 'static', '["DE","FR"]'::jsonb
      from projects p join credentials c on c.project_id = p.id, generate_series(1, 2) g`;
    await sql`insert into proxies (project_id, connector_id, scheme, host, port, username,
        password, country, status, metadata)
      select c.project_id, c.id, 'http',
        '10.' || (g / 65536) || '.' || ((g / 256) % 256) || '.' || (g % 256),
        3128 + (g % 100),
        case when g % 20 = 0 then '{user}-zone-x' else 'user-' || g end,
        case when g % 20 = 0 then '{pass}' else 'pw-' || md5(g::text) end,
        case when g % 2 = 0 then 'DE' else 'FR' end,
        case when g % 17 = 0 then 'unhealthy' else 'healthy' end,
        case when g % 5 = 0 then '{"max_concurrency": 8}'::jsonb else '{}'::jsonb end
      from (select id, project_id, row_number() over (order by id) - 1 as n from connectors) c,
        generate_series(1, 5000) s(i),
        lateral (select (c.n * 5000 + s.i)::int as g) x`;
    await sql`analyze`;
    const [{ count }] = await sql`select count(*)::int as count from proxies`;
    console.log(`compile of ${count} proxies in 20 connectors:`);
    const options = { keys, defaultStrategy: "round_robin" as const };
    await compile(database.db, options); // warm-up
    const samples: number[] = [];
    let last: Awaited<ReturnType<typeof compile>> | undefined;
    for (let i = 0; i < RUNS; i++) {
      const [ms, compiled] = await time(() => compile(database.db, options));
      samples.push(ms);
      last = compiled;
    }
    summary("  compile (read + sections + digests)", samples);
    const reads: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const [ms] = await time(() =>
        sql`select id, connector_id, scheme, host, port, username, password, country, status,
            metadata -> 'max_concurrency' as max_concurrency
          from proxies order by connector_id, created_at, id`
      );
      reads.push(ms);
    }
    summary("  of which the proxies read alone", reads);
    const bytes = [...last!.sections.values()].reduce((n, s) => n + s.json.length, 0);
    const [sealMs] = await time(() =>
      Promise.all([...last!.sections.values()].map((s) => seal(keys, s.json)))
    );
    console.log(
      `  feed JSON ${(bytes / 1048576).toFixed(1)} MiB; sealing all of it (a first publish): ${
        sealMs.toFixed(0)
      } ms`,
    );
  } finally {
    await database.close();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

const keys = await deriveFeedKeys("bench-secret-bench-secret-bench-secret-0123456789");
const decodeOnly = (globalThis as { process?: { argv: string[] } }).process?.argv.includes(
  "--decode-only",
) ?? true;
const runtime = "Deno" in globalThis ? "Deno" : "Node";
console.log(`runtime: ${runtime}`);
await benchDecode(keys);
if (!decodeOnly) await benchCompile(keys);
