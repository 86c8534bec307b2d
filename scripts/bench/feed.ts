/**
 * Suite `feed`: the routing feed's two ends.
 *
 * - **Compile** on the controller (Node, as the controller runs): 100,000 proxies in 20
 *   connectors of 5,000 over 10 projects, inserted by SQL into a fresh migrated database; the
 *   real `compile` (Postgres read, sections, digests). One compile warms up, then each run is
 *   one compile; the Postgres read alone is shown beside it. Budget: 1 s.
 * - **Decode** on the gateway (Deno, as the gateway runs): one 5,000-row connector section
 *   opened (AES-GCM + gunzip), digest-checked and parsed + validated, as the follower does it;
 *   each run a fresh Deno process (feed-decode.ts: 20 warm-up decodes, then the median of 30).
 *   Budget: 10 ms (docs/feed.md; DESIGN.md holds a one-connector update of 5,000 rows to
 *   10 ms, where Octoprox 6.0 takes 51 ms to decode them).
 *
 * BENCH_FEED_RUNTIME=node decodes under Node instead.
 */
import { createDatabase } from "../../db/client.ts";
import { migrate } from "../../db/migrate.ts";
import { compile } from "../../control/feed/compile.ts";
import { deriveFeedKeys, seal } from "../../shared/feed/codec.ts";
import { createTestDatabase } from "../../testkit/stores.ts";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import type { DecodeResult } from "./feed-decode.ts";
import { entryRuntime, runEntry } from "./runtime.ts";
import { formatNumber, MB, median, type Row, type Suite, type SuiteContext } from "./suite.ts";

const COMPILE_BUDGET_MS = 1000;
const DECODE_BUDGET_MS = 10;

/** Compile runs on one database (ms), the Postgres read alone, and the feed they made. */
export interface CompileTimes {
  count: number;
  compiles: number[];
  reads: number[];
  jsonBytes: number;
  sealMs: number;
}

/**
 * `proxies` rows (20 connectors over 10 projects) inserted by SQL into a fresh migrated
 * database; one compile warms up, then `runs` compiles are timed, each with the read alone
 * after it.
 */
export async function timeCompile(
  context: SuiteContext,
  proxies: number,
  runs: number,
): Promise<CompileTimes> {
  const perConnector = Math.ceil(proxies / 20);
  const keys = await deriveFeedKeys("bench-secret-bench-secret-bench-secret-0123456789");
  const test = await createTestDatabase();
  const database = createDatabase(test.url, { poolSize: 2 });
  try {
    await migrate(test.url);
    const sql = database.sql;
    context.log(`feed: inserting ${formatNumber(perConnector * 20, 0)} proxies`);
    // 20 connectors over 10 projects; every twentieth row has template placeholders filled
    // from its credential.
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
        generate_series(1, ${perConnector}::int) s(i),
        lateral (select (c.n * ${perConnector}::int + s.i)::int as g) x`;
    await sql`analyze`;
    const [{ count }] = await sql`select count(*)::int as count from proxies`;
    const options = {
      keys,
      defaultStrategy: "round_robin" as const,
      providers: new ProviderRegistry(),
    };
    let compiled = await compile(database, options); // warm-up
    const compiles: number[] = [];
    const reads: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      compiled = await compile(database, options);
      compiles.push(performance.now() - started);
      const readStarted = performance.now();
      await sql`select id, connector_id, scheme, host, port, username, password, country, status,
          metadata -> 'max_concurrency' as max_concurrency
        from proxies order by connector_id, created_at, id`;
      reads.push(performance.now() - readStarted);
      context.log(`feed: compile run ${i + 1}: ${compiles[i].toFixed(0)} ms`);
    }
    const jsonBytes = [...compiled.sections.values()].reduce((n, s) => n + s.json.length, 0);
    const sealStarted = performance.now();
    await Promise.all([...compiled.sections.values()].map((s) => seal(keys, s.json)));
    const sealMs = performance.now() - sealStarted;
    return { count, compiles, reads, jsonBytes, sealMs };
  } finally {
    await database.close();
    await test.drop();
  }
}

async function measureCompile(context: SuiteContext): Promise<Row[]> {
  const { count, compiles, reads, jsonBytes, sealMs } = await timeCompile(
    context,
    100_000,
    context.runs,
  );
  return [{
    figure: `feed compile, ${formatNumber(count, 0)} proxies in 20 connectors (Node)`,
    value: median(compiles),
    runs: compiles,
    unit: "ms",
    digits: 0,
    budget: { op: "<=", limit: COMPILE_BUDGET_MS },
    detail: `of which the Postgres read ${formatNumber(median(reads), 0)} ms; feed JSON ${
      formatNumber(jsonBytes / MB, 1)
    } MiB, sealing all of it (a first publish) ${formatNumber(sealMs, 0)} ms`,
  }];
}

async function measureDecode(context: SuiteContext): Promise<Row[]> {
  const runtime = entryRuntime("BENCH_FEED_RUNTIME");
  const results: DecodeResult[] = [];
  for (let i = 0; i < context.runs; i++) {
    results.push(await runEntry<DecodeResult>(runtime, "feed-decode.ts", ["5000"]));
    context.log(`feed: decode run ${i + 1}: ${results[i].totalMs.toFixed(2)} ms`);
  }
  const part = (pick: (r: DecodeResult) => number) => formatNumber(median(results.map(pick)), 2);
  return [{
    figure: `feed decode, one 5,000-row connector section (${results[0].runtime})`,
    value: median(results.map((r) => r.totalMs)),
    runs: results.map((r) => r.totalMs),
    unit: "ms",
    digits: 2,
    budget: { op: "<=", limit: DECODE_BUDGET_MS },
    detail: `open ${part((r) => r.openMs)} + digest ${part((r) => r.digestMs)} + parse ${
      part((r) => r.parseMs)
    } ms; ${formatNumber(results[0].sealedBytes / 1024, 0)} KiB sealed, ${
      formatNumber(results[0].jsonBytes / 1024, 0)
    } KiB JSON`,
  }];
}

export const feedSuite: Suite = {
  name: "feed",
  description: "feed compile of 100,000 proxies (Node) and a 5,000-row section decode (Deno)",
  async run(context) {
    return [...(await measureCompile(context)), ...(await measureDecode(context))];
  },
};
