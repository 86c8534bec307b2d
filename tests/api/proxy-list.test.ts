/**
 * The proxies list as the dashboard pages it: sorted on the server (status, country, creation,
 * status change, each way, ties by creation), searched by part of the host, each row's last
 * health check from the soft health, every page served by an index; and the proxies' usage read
 * for exactly the rows a page shows (`ids`).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;
let connectorId: string;
let base: string;

interface Item {
  id: string;
  host: string;
  status: string;
  country: string | null;
  created_at: string;
  last_checked_at: string | null;
}

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Sorted", username: "sorted" },
  });
  projectId = project.body.id;
  base = `/api/v1/projects/${projectId}/proxies`;
  connectorId = (await h.request("POST", `${base.replace("/proxies", "")}/connectors`, {
    token: h.tokens.editor,
    body: { name: "static", kind: "static" },
  })).body.id;
  // Twelve proxies, three countries (and none), created one by one so creation orders them.
  const countries = ["de", "us", "fr", ""];
  for (let i = 0; i < 12; i++) {
    const answer = await h.request("POST", base, {
      token: h.tokens.editor,
      body: {
        connector_id: connectorId,
        url: `http://u:p@host-${String(i).padStart(2, "0")}.example:8080`,
        country: countries[i % 4],
      },
    });
    expect(answer.status, answer.text).toBe(201);
  }
  await h.deps.database.sql`
    update proxies set status = 'healthy', status_changed_at = now() - interval '1 hour'
    where project_id = ${projectId} and host in ('host-03.example', 'host-07.example')`;
  await h.deps.database.sql`
    update proxies set status = 'unhealthy', status_changed_at = now() - interval '2 hours'
    where project_id = ${projectId} and host = 'host-05.example'`;
});

afterAll(async () => {
  await h?.close();
});

async function list(query: string): Promise<{ items: Item[]; total: number }> {
  const answer = await h.request("GET", `${base}?${query}`, { token: h.tokens.viewer });
  expect(answer.status, answer.text).toBe(200);
  return answer.body;
}

const hosts = (items: Item[]) => items.map((item) => item.host.slice(5, 7));

describe("the proxies list's sort", () => {
  test("created is the default, asc or desc", async () => {
    expect(hosts((await list("page_size=3")).items)).toEqual(["00", "01", "02"]);
    expect(hosts((await list("sort=created&direction=desc&page_size=3")).items))
      .toEqual(["11", "10", "09"]);
  });

  test("status, ties by creation, in the sort's direction, paged", async () => {
    const asc = await list("sort=status&page_size=4");
    expect(asc.total).toBe(12);
    // healthy < initializing < unhealthy, as text.
    expect(hosts(asc.items)).toEqual(["03", "07", "00", "01"]);
    const second = await list("sort=status&page_size=4&page=2");
    expect(hosts(second.items)).toEqual(["02", "04", "06", "08"]);
    const desc = await list("sort=status&direction=desc&page_size=3");
    expect(hosts(desc.items)).toEqual(["05", "11", "10"]);
  });

  test("country puts proxies without one last going up, first going down", async () => {
    const asc = (await list("sort=country&page_size=12")).items;
    expect(asc.map((item) => item.country)).toEqual([
      "DE",
      "DE",
      "DE",
      "FR",
      "FR",
      "FR",
      "US",
      "US",
      "US",
      null,
      null,
      null,
    ]);
    const desc = (await list("sort=country&direction=desc&page_size=4")).items;
    expect(hosts(desc)).toEqual(["11", "07", "03", "09"]);
  });

  test("status_changed, oldest change first", async () => {
    expect(hosts((await list("sort=status_changed&page_size=3")).items))
      .toEqual(["05", "03", "07"]);
  });

  test("combines with filters and the host search", async () => {
    const found = await list("search=HOST-1&sort=created&direction=desc");
    expect(hosts(found.items)).toEqual(["11", "10"]);
    expect(found.total).toBe(2);
    // LIKE's wildcards are taken as they are typed.
    expect((await list("search=%25")).total).toBe(0);
    expect((await list("search=_")).total).toBe(0);
    expect((await list("search=st-0&status=healthy")).total).toBe(2);
  });

  test("refuses an unknown sort or direction, naming the query field", async () => {
    const sort = await h.request("GET", `${base}?sort=password`, { token: h.tokens.viewer });
    expect(sort.status).toBe(422);
    expect(sort.body.detail).toEqual([
      { field: "query.sort", message: "must be one of created, status, country, status_changed" },
    ]);
    const direction = await h.request("GET", `${base}?direction=up`, { token: h.tokens.viewer });
    expect(direction.status).toBe(422);
    expect(direction.body.detail[0]).toMatchObject({ field: "query.direction" });
  });

  test("each sort pages by an index, not by sorting the project's rows", async () => {
    // A dozen rows are cheaper scanned: forbid the scan, so only an index that gives the
    // order avoids a sort.
    for (const sort of ["created_at", "status", "country", "status_changed_at"]) {
      for (const direction of ["asc", "desc"]) {
        const lead = sort === "created_at" ? "" : `${sort} ${direction}, `;
        const plan = await h.deps.database.sql.begin(async (tx) => {
          await tx`set local enable_seqscan = off`;
          await tx`set local enable_bitmapscan = off`;
          return await tx.unsafe(
            `explain select * from proxies where project_id = $1
             order by ${lead}created_at ${direction}, id ${direction} limit 50 offset 50`,
            [projectId],
          );
        });
        const text = plan.map((row) => Object.values(row)[0]).join("\n");
        expect(text, `${sort} ${direction}`).toMatch(/Index Scan/);
        expect(text, `${sort} ${direction}`).not.toMatch(/Sort/);
      }
    }
  });

  test("answers each row's last health check from the soft health", async () => {
    const [first] = (await list("page_size=1")).items;
    expect(first.last_checked_at).toBeNull();
    const at = Date.parse("2030-01-02T03:04:05.000Z");
    await h.deps.redis.hset(h.deps.keys.proxyHealth(first.id), { failures: 0, checked_at: at });
    const [again] = (await list("page_size=1")).items;
    expect(again.last_checked_at).toBe("2030-01-02T03:04:05.000Z");
    const one = await h.request("GET", `${base}/${first.id}`, { token: h.tokens.viewer });
    expect(one.body.last_checked_at).toBe("2030-01-02T03:04:05.000Z");
  });
});

describe("the proxies' usage for a page's rows", () => {
  test("ids limits the usage rows to those proxies", async () => {
    const page = (await list("page_size=3&page=2")).items;
    const ids = page.map((item) => item.id);
    const answer = await h.request(
      "GET",
      `/api/v1/projects/${projectId}/metrics/proxies?ids=${ids.join(",")}`,
      { token: h.tokens.viewer },
    );
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.total).toBe(3);
    expect(answer.body.items.map((row: { proxy_id: string }) => row.proxy_id).sort())
      .toEqual([...ids].sort());
    expect(answer.body.items[0].usage).toMatchObject({ requests: 0, success_rate: null });
  });

  test("refuses an id that is not one", async () => {
    const answer = await h.request(
      "GET",
      `/api/v1/projects/${projectId}/metrics/proxies?ids=abc`,
      { token: h.tokens.viewer },
    );
    expect(answer.status).toBe(422);
    expect(answer.body.detail[0]).toMatchObject({
      field: "query.ids",
      message: "must be proxy ids (uuids), comma-separated",
    });
  });
});
