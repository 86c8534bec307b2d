/**
 * Suite `attribution`: judging 100,000 new exits, as enrich and the sighting ingest hand them
 * to the attributor (control/geo/attribution.ts), on real Postgres with the shipped country
 * database in force. Budget: at most 10 s of worker CPU for the 100,000 (the worker process's
 * user and system time; Postgres' own time is the database's, shown beside it as wall time).
 *
 * Each run gives every row an exit it has not had (random public IPv4 addresses, three in four
 * placed in a country by the shipped file), in batches of 500 (the sighting ingest's batch), so
 * every row is judged, written forward only and announced.
 */
import { sql } from "drizzle-orm";
import { Attributor, type SeenExit } from "../../control/geo/attribution.ts";
import { GeoDefinitions } from "../../control/geo/definitions.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";
import { formatNumber, median, type Row, type Suite, type SuiteContext } from "./suite.ts";

const EXITS = 100_000;
const BATCH = 500;
const CPU_BUDGET_S = 10;

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

async function seed(h: ApiHarness): Promise<string[]> {
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.admin,
    body: { name: "bench", username: "bench" },
  });
  const connector = await h.request("POST", `/api/v1/projects/${project.body.id}/connectors`, {
    token: h.tokens.admin,
    body: { name: "static", kind: "static" },
  });
  const rows = await h.deps.database.db.execute<{ id: string }>(sql`
    insert into proxies (project_id, connector_id, scheme, host, port, status)
    select ${project.body.id}::uuid, ${connector.body.id}::uuid, 'http',
      '10.' || (i / 65536) || '.' || ((i / 256) % 256) || '.' || (i % 256), 3128, 'healthy'
    from generate_series(1, ${EXITS}) as i
    returning id`);
  return rows.map((row) => row.id).sort();
}

async function run(context: SuiteContext): Promise<Row[]> {
  const h = await startHarness({ noUsers: false });
  try {
    const ids = await seed(h);
    const geo = new GeoDefinitions({ deps: h.deps, logger: h.deps.logger });
    const attributor = new Attributor({ deps: h.deps, geo });
    await geo.current(); // the shipped file opened once, as a worker's first batch does
    const cpu: number[] = [];
    const wall: number[] = [];
    let placed = 0;
    for (let r = 0; r < context.runs; r++) {
      const next = random(11 + r);
      const seenAt = new Date(Date.now() + r * 1000);
      const exits: SeenExit[] = ids.map((proxyId) => ({
        proxyId,
        ip: `${1 + Math.floor(next() * 222)}.${Math.floor(next() * 256)}.${
          Math.floor(next() * 256)
        }.${1 + Math.floor(next() * 254)}`,
        seenAt,
      }));
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      placed = 0;
      for (let start = 0; start < exits.length; start += BATCH) {
        const judged = await attributor.apply(exits.slice(start, start + BATCH));
        for (const entry of judged) if (entry.attribution.country !== null) placed++;
      }
      const used = process.cpuUsage(cpuBefore);
      cpu.push((used.user + used.system) / 1e6);
      wall.push((performance.now() - started) / 1000);
      context.log(
        `attribution: run ${r + 1}: ${cpu[r].toFixed(2)} s CPU, ${wall[r].toFixed(2)} s wall`,
      );
    }
    return [{
      figure: `Attribution of ${
        formatNumber(EXITS, 0)
      } new exits (worker CPU, batches of ${BATCH})`,
      key: "attribution-100k-cpu",
      value: median(cpu),
      runs: cpu,
      unit: "s",
      digits: 2,
      budget: { op: "<=", limit: CPU_BUDGET_S },
      detail: `wall ${formatNumber(median(wall), 1)} s with Postgres' writes; ${
        formatNumber((100 * placed) / EXITS, 0)
      }% placed by the shipped file`,
    }];
  } finally {
    await h.close();
  }
}

export const attributionSuite: Suite = {
  name: "attribution",
  description: "Judging and writing 100,000 new exits through the attributor (worker CPU)",
  run,
};
