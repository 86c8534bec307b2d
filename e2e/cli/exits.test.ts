/**
 * `octoprox exits` as a user runs it (the bin, a child process) against the admin API in process
 * on a real socket, over exits the observation ingest wrote (real Postgres and Redis): the table
 * with where each exit is and an exit seen elsewhere than claimed marked; `--project`,
 * `--connector` (by name within the project) and `--country` narrowing it on the server;
 * `--json` as the API answers; a connector named without a project refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ingestObservations } from "../../control/geo/observation-ingest.ts";
import type { Observation } from "../../shared/geo/observation-wire.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { CliUser } from "./support.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let user: CliUser;
const projects: Record<string, string> = {};
const BASE = Date.UTC(2026, 10, 3, 9);

async function made(path: string, body: Record<string, unknown>): Promise<string> {
  const answer = await h.request("POST", path, { token: h.tokens.editor, body });
  expect(answer.status, answer.text).toBe(201);
  return answer.body.id;
}

beforeAll(async () => {
  h = await startHarness();
  api = await listen(h.app);
  user = new CliUser({
    OCTOPROX_URL: `http://127.0.0.1:${api.port}`,
    OCTOPROX_TOKEN: h.tokens.viewer,
  });
  const seen: Observation[] = [];
  for (const name of ["shop", "crawl"]) {
    const projectId = await made("/api/v1/projects", { name, username: name });
    projects[name] = projectId;
    const connectorId = await made(`/api/v1/projects/${projectId}/connectors`, {
      name: "residential",
      kind: "static",
    });
    const at = (seconds: number) => BASE + seconds * 1000;
    const exit = (ip: string, seconds: number, more: Partial<Observation>): Observation => ({
      observedAt: at(seconds),
      ip,
      projectId,
      connectorId,
      proxyId: null,
      source: "health",
      country: null,
      region: null,
      city: null,
      asn: null,
      claimedCountry: null,
      sources: [],
      ...more,
    });
    const net = name === "shop" ? "203.0.113" : "198.51.100";
    seen.push(
      exit(`${net}.1`, 1, {
        country: "DE",
        region: "DE-BE",
        city: "Berlin",
        asn: 3320,
        claimedCountry: "DE",
        sources: ["our-exits", "endpoint"],
      }),
      exit(`${net}.2`, 2, { country: "US", claimedCountry: "FR", sources: ["shipped"] }),
    );
  }
  await ingestObservations(h.deps, seen);
});

afterAll(async () => {
  user?.remove();
  await api?.close();
  await h?.close();
});

describe("octoprox exits", () => {
  it("prints a project's exits with where each is, marking one seen elsewhere than claimed", async () => {
    const run = await user.run(["exits", "--project", "shop"]);
    expect(run.code, run.stderr).toBe(0);
    const rows = run.stdout.split("\n");
    const berlin = rows.find((row) => row.includes("203.0.113.1"));
    expect(berlin).toMatch(/residential.*DE.*DE-BE.*Berlin.*AS3320.*our-exits, endpoint/);
    const elsewhere = rows.find((row) => row.includes("203.0.113.2"));
    expect(elsewhere).toContain("FR (seen elsewhere)");
    expect(run.stdout).not.toContain("198.51.100.");
    expect(run.stdout).toContain("Page 1 of 1, 2 exits.");
  });

  it("narrows to a connector and a country on the server, and answers JSON", async () => {
    const page = await user.json<{ total: number; items: { ip: string; project_id: string }[] }>(
      ["exits", "--project", "crawl", "--connector", "residential", "--country", "de"],
    );
    expect(page.total).toBe(1);
    expect(page.items).toMatchObject([{ ip: "198.51.100.1", project_id: projects.crawl }]);
    // Every project's, in the country asked.
    const everywhere = await user.json<{ items: { ip: string }[] }>(["exits", "--country", "US"]);
    expect(everywhere.items.map((e) => e.ip).sort()).toEqual(["198.51.100.2", "203.0.113.2"]);
    const none = await user.run(["exits", "--country", "JP"]);
    expect(none.stdout).toContain("No exit matches.");
  });

  it("refuses a connector by name without a project, and a country that is not one", async () => {
    const named = await user.run(["exits", "--connector", "residential"]);
    expect(named.code).toBe(1);
    expect(named.stderr).toContain("needs --project");
    const country = await user.run(["exits", "--country", "Germany"]);
    expect(country.code).toBe(2);
    expect(country.stderr).toContain("must be a country code");
  });
});
