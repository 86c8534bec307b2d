/**
 * GeoDefinitions over real Postgres: the databases in force in stack order (position, then
 * name, the shipped one last), each file opened once per process however often it is asked,
 * only a changed file opened again, a disabled database left out, and the same stack answered
 * while nothing changed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GeoDefinitions } from "../../control/geo/definitions.ts";
import { type ApiHarness, startHarness } from "../../testkit/api-harness.ts";

let h: ApiHarness;
let definitions: GeoDefinitions;

async function upload(name: string, text: string, position: number): Promise<string> {
  const answer = await h.request(
    "POST",
    `/api/v1/geo/databases?name=${name}&format=geofeed&position=${position}`,
    { token: h.tokens.admin, text },
  );
  expect(answer.status, answer.text).toBe(201);
  return answer.body.id;
}

beforeAll(async () => {
  h = await startHarness();
  definitions = new GeoDefinitions({ deps: h.deps, logger: h.deps.logger });
});

afterAll(async () => {
  await h?.close();
});

describe("GeoDefinitions", () => {
  let berlin: string;
  let paris: string;

  it("answers the shipped database alone on a fresh install", async () => {
    const current = await definitions.current();
    expect(current.databases.map((d) => d.name)).toEqual(["geo-whois-asn-country"]);
    expect(current.settings.locationConflictRule).toBe("consensus");
    expect(current.stack.lookup("8.8.8.8")?.country).toBe("US");
    expect(definitions.opened).toBe(1);
  });

  it("lists the admin's databases by position then name, the shipped one last", async () => {
    paris = await upload("paris", "127.0.0.0/24,FR,,Paris,", 1);
    berlin = await upload("berlin", "127.0.0.0/25,DE,,Berlin,", 1);
    await upload("first", "127.0.1.0/24,NL,,,", 0);
    const current = await definitions.current();
    expect(current.databases.map((d) => d.name)).toEqual([
      "first",
      "berlin",
      "paris",
      "geo-whois-asn-country",
    ]);
    expect(current.stack.lookup("127.0.0.5")).toMatchObject({ country: "DE", source: "berlin" });
    expect(current.stack.lookup("127.0.0.200")).toMatchObject({ country: "FR", source: "paris" });
    // Three new files opened; the shipped one is not opened again.
    expect(definitions.opened).toBe(4);
  });

  it("answers the same stack while nothing changed, opening nothing", async () => {
    const a = await definitions.current();
    const b = await definitions.current();
    expect(b.stack).toBe(a.stack);
    expect(definitions.opened).toBe(4);
  });

  it("opens only the file that changed, keeps the others' readers, and drops a disabled one", async () => {
    const before = await definitions.current();
    const parisBefore = before.databases.find((d) => d.name === "paris")!.database;
    const replaced = await h.request("PUT", `/api/v1/geo/databases/${berlin}/file`, {
      token: h.tokens.admin,
      text: "127.0.0.0/25,AT,,Vienna,",
    });
    expect(replaced.status, replaced.text).toBe(200);
    const after = await definitions.current();
    expect(definitions.opened).toBe(5);
    expect(after.stack).not.toBe(before.stack);
    expect(after.databases.find((d) => d.name === "paris")!.database).toBe(parisBefore);
    expect(after.stack.lookup("127.0.0.5")).toMatchObject({ country: "AT", source: "berlin" });

    await h.request("PATCH", `/api/v1/geo/databases/${paris}`, {
      token: h.tokens.admin,
      body: { enabled: false, name: "paris-off" },
    });
    const disabled = await definitions.current();
    expect(disabled.databases.map((d) => d.name)).not.toContain("paris-off");
    expect(disabled.stack.lookup("127.0.0.200")?.source).not.toBe("paris");
    expect(definitions.opened).toBe(5);
  });

  it("renames without opening again: the file's reader answers under the new name", async () => {
    await h.request("PATCH", `/api/v1/geo/databases/${berlin}`, {
      token: h.tokens.admin,
      body: { name: "vienna" },
    });
    const judging = await definitions.judging();
    expect(judging.stack?.lookup("127.0.0.5")).toMatchObject({ source: "vienna" });
    expect(judging.policy).toEqual({
      sources: ["database", "vendor", "endpoint"],
      conflictRule: "consensus",
    });
    expect(definitions.opened).toBe(5);
  });
});
