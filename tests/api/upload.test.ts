/**
 * The upload: 100,000 lines land whole in one transaction with one change entry, and an upload
 * with bad lines lands the good ones and reports each bad line with its number and reason.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let projectId: string;

beforeAll(async () => {
  h = await startHarness();
  const project = await h.request("POST", "/api/v1/projects", {
    token: h.tokens.editor,
    body: { name: "Upload", username: "upload" },
  });
  projectId = project.body.id;
});

afterAll(async () => {
  await h?.close();
});

async function newConnector(name: string): Promise<string> {
  const answer = await h.request("POST", `/api/v1/projects/${projectId}/connectors`, {
    token: h.tokens.editor,
    body: { name, kind: "static" },
  });
  return answer.body.id;
}

const uploadPath = (connectorId: string) =>
  `/api/v1/projects/${projectId}/proxies/upload?connector_id=${connectorId}`;

async function countRows(connectorId: string): Promise<number> {
  const [{ n }] = await h.deps.database.sql`
    select count(*)::int as n from proxies where connector_id = ${connectorId}`;
  return n;
}

test("100,000 lines land whole, in one request, with one change entry", async () => {
  const connectorId = await newConnector("Big");
  const schemes = ["http", "https", "socks4", "socks5"];
  const lines: string[] = [];
  for (let i = 0; i < 100_000; i++) {
    const host = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    const country = i % 3 === 0 ? " us" : "";
    lines.push(`${schemes[i % 4]}://user${i}:pass${i}@${host}:${1024 + (i % 50_000)}${country}`);
  }
  const text = lines.join("\n") + "\n";
  const before = (await h.changes()).length;
  const startedMs = performance.now();
  const answer = await h.request("POST", uploadPath(connectorId), {
    token: h.tokens.editor,
    text,
  });
  const seconds = (performance.now() - startedMs) / 1000;
  console.log(
    `upload of 100,000 lines (${(text.length / 1e6).toFixed(1)} MB): ${seconds.toFixed(2)} s`,
  );
  expect(answer.status, answer.text.slice(0, 500)).toBe(200);
  expect(answer.body).toMatchObject({
    total_lines: 100_000,
    added: 100_000,
    duplicates: 0,
    refused: 0,
    errors: [],
    duplicate_lines: [],
  });
  expect(await countRows(connectorId)).toBe(100_000);
  const entries = (await h.changes()).slice(before);
  expect(entries).toEqual([{ kind: "proxy", ref: connectorId }]);
  const [sample] = await h.deps.database.sql`
    select scheme, host, port, username, password, country, country_source, status
    from proxies where connector_id = ${connectorId} and username = 'user3'`;
  expect(sample).toEqual({
    scheme: "socks5",
    host: "10.0.0.3",
    port: 1027,
    username: "user3",
    password: "pass3",
    country: "US",
    country_source: "manual",
    status: "initializing",
  });
  expect(seconds).toBeLessThan(30);

  // The same list again adds nothing and reports every line a duplicate.
  const again = await h.request("POST", uploadPath(connectorId), { token: h.tokens.editor, text });
  expect(again.body).toMatchObject({ added: 0, duplicates: 100_000, refused: 0 });
  expect((await h.changes()).length).toBe(before + 1);
}, 120_000);

test("bad lines are reported with their number and reason; the good ones land", async () => {
  const connectorId = await newConnector("Mixed");
  await h.request("POST", `/api/v1/projects/${projectId}/proxies`, {
    token: h.tokens.editor,
    body: { connector_id: connectorId, url: "http://old:pw@already.example:8080" },
  });
  const text = [
    "# a comment", // 1
    "http://u:p@good1.example:8080", // 2
    "", // 3
    "socks5://u:p@good2.example:1080 de", // 4
    "ftp://u:p@bad-scheme.example:21", // 5
    "http://u:p@no-port.example", // 6
    "http://u:p@good3.example:8080   UK", // 7
    "http://u:p@good1.example:8080", // 8: repeats line 2
    "http://u:p@bad-country.example:8080 XX", // 9
    "   ", // 10
    "http://old:other@ALREADY.example:8080", // 11: the connector has it
    "http://u:p@toomany.example:8080 us extra", // 12
    "socks5://u:p@[::1]:1080", // 13
    "http://u:p@host.example:99999", // 14
    "socks4://10.0.0.300:1080", // 15
    "\tsocks4://10.0.0.30:1080\t", // 16
  ].join("\r\n");
  const before = (await h.changes()).length;
  const answer = await h.request("POST", uploadPath(connectorId), { token: h.tokens.editor, text });
  expect(answer.status).toBe(200);
  expect(answer.body).toMatchObject({
    total_lines: 16,
    added: 5,
    duplicates: 2,
    refused: 6,
    duplicate_lines: [8, 11],
  });
  expect(answer.body.errors.map((e: { line: number }) => e.line)).toEqual([5, 6, 9, 12, 14, 15]);
  const reasons = Object.fromEntries(
    answer.body.errors.map((e: { line: number; reason: string }) => [e.line, e.reason]),
  );
  expect(reasons[5]).toMatch(/scheme/);
  expect(reasons[6]).toMatch(/port/);
  expect(reasons[9]).toMatch(/country/);
  expect(reasons[12]).toMatch(/unexpected/);
  expect(reasons[14]).toMatch(/port/);
  expect(reasons[15]).toMatch(/IPv4/);
  // Reasons never repeat credentials.
  expect(JSON.stringify(answer.body.errors)).not.toMatch(/u:p/);

  const rows = await h.deps.database.sql`
    select host, country from proxies where connector_id = ${connectorId} order by host`;
  expect(rows.map((r) => [r.host, r.country])).toEqual([
    ["10.0.0.30", null],
    ["::1", null],
    ["already.example", null],
    ["good1.example", null],
    ["good2.example", "DE"],
    ["good3.example", "GB"],
  ]);
  expect((await h.changes()).slice(before)).toEqual([{ kind: "proxy", ref: connectorId }]);
});

test("an upload with nothing new announces nothing; a bad connector is refused", async () => {
  const connectorId = await newConnector("Quiet");
  const before = (await h.changes()).length;
  const answer = await h.request("POST", uploadPath(connectorId), {
    token: h.tokens.editor,
    text: "# nothing\n\nnot a proxy\n",
  });
  expect(answer.body).toMatchObject({ total_lines: 3, added: 0, refused: 1 });
  expect((await h.changes()).length).toBe(before);

  const unknown = await h.request(
    "POST",
    uploadPath("00000000-0000-4000-8000-000000000000"),
    { token: h.tokens.editor, text: "http://h:1" },
  );
  expect(unknown.status).toBe(400);
  expect(unknown.body.error).toMatch(/connector_id/);
});

test("a body over the upload bound is refused with 413", async () => {
  const connectorId = await newConnector("Huge");
  const answer = await h.request("POST", uploadPath(connectorId), {
    token: h.tokens.editor,
    text: "#".repeat(33 * 1024 * 1024),
  });
  expect(answer.status).toBe(413);
  expect(await countRows(connectorId)).toBe(0);
});
