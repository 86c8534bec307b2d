/**
 * `octoprox geo` as a user runs it (the bin, a child process) against the admin API in process
 * on a real socket, with a local HTTPS publisher for a URL database: databases added from a file
 * and a URL (the secret read from a file, never shown), listed, refreshed, disabled, enabled and
 * deleted; the settings shown and changed; a lookup; a file that is not its format refused with
 * exit 1 and the API's reason.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../testkit/processes.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { type FileOrigin, startFileOrigin } from "../../testkit/upstreams/file-origin.ts";

const BIN = join(ROOT, "control/cli/octoprox.js");

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let origin: FileOrigin;
let dir: string;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `octoprox ...args` as the admin, without a stored login. */
function octoprox(args: string[], input = ""): Promise<Run> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("OCTOPROX_") && value !== undefined) env[key] = value;
  }
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: {
        ...env,
        NO_COLOR: "1",
        XDG_CONFIG_HOME: dir,
        OCTOPROX_URL: `http://127.0.0.1:${api.port}`,
        OCTOPROX_TOKEN: h.tokens.admin,
      },
      timeout: 60_000,
    }, (error, stdout, stderr) => {
      resolve({
        code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
        stdout,
        stderr,
      });
    });
    child.stdin?.end(input);
  });
}

async function json<T>(args: string[]): Promise<T> {
  const run = await octoprox([...args, "--json"]);
  if (run.code !== 0) {
    throw new Error(`octoprox ${args.join(" ")} exited ${run.code}: ${run.stderr}`);
  }
  return JSON.parse(run.stdout) as T;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-geo-cli-"));
  origin = await startFileOrigin();
  const caFile = join(dir, "ca.pem");
  await writeFile(caFile, origin.ca);
  h = await startHarness({
    env: { OCTOPROX_EGRESS_ALLOW_LOOPBACK: "true", OCTOPROX_EGRESS_CA_FILE: caFile },
  });
  api = await listen(h.app);
});

afterAll(async () => {
  await api?.close();
  await h?.close();
  await origin?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("octoprox geo", () => {
  it("adds a geofeed from a file, its format told by its name, and looks an address up", async () => {
    const file = join(dir, "exits.csv");
    await writeFile(file, "127.0.0.0/24,DE,DE-BE,Berlin,\n");
    const added = await octoprox(["geo", "databases", "add", file, "--name", "exits"]);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain("Added IP database exits (geofeed, 1 entry,");
    const lookup = await octoprox(["geo", "lookup", "127.0.0.7"]);
    expect(lookup.code, lookup.stderr).toBe(0);
    expect(lookup.stdout).toContain("127.0.0.7: DE, DE-BE, Berlin, from exits");
    expect(lookup.stdout).toContain("geo-whois-asn-country");
  });

  it("refuses a file that is not its format: exit 1 with the API's reason", async () => {
    const file = join(dir, "bad.csv");
    await writeFile(file, "# exits\n127.0.0.1/24,DE,,,\n");
    const refused = await octoprox(["geo", "databases", "add", file, "--name", "bad"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("422");
    expect(refused.stderr).toContain("is not a geofeed file");
    expect(refused.stderr).toContain("line 2:");
  });

  it("adds a URL database with basic auth from a secret file, refreshes, disables, deletes", async () => {
    origin.put("/city.csv", "127.0.1.0/24,FR,FR-IDF,Paris,\n");
    origin.require("/city.csv", `Basic ${Buffer.from("acct:k3y-secret").toString("base64")}`);
    const secret = join(dir, "key.txt");
    await writeFile(secret, "k3y-secret\n");
    const added = await octoprox([
      "geo",
      "databases",
      "add-url",
      `${origin.url}/city.csv`,
      "--name",
      "city",
      "--format",
      "geofeed",
      "--interval-hours",
      "12",
      "--auth",
      "basic",
      "--username",
      "acct",
      "--secret-file",
      secret,
    ]);
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain("Added IP database city");

    const list = await json<{ name: string; auth_type: string | null; enabled: boolean }[]>([
      "geo",
      "databases",
      "list",
    ]);
    expect(list.map((d) => d.name)).toEqual(["city", "exits"]);
    expect(list[0].auth_type).toBe("basic");
    const table = await octoprox(["geo", "databases", "list"]);
    expect(table.stdout).toContain("url, every 12 h");
    expect(table.stdout + added.stdout).not.toContain("k3y-secret");

    const refreshed = await json<{ outcome: string }>(["geo", "databases", "refresh", "city"]);
    expect(refreshed.outcome).toBe("unchanged");
    const disabled = await octoprox(["geo", "databases", "disable", "city"]);
    expect(disabled.stdout).toContain("Disabled IP database city.");
    expect((await json<{ enabled: boolean }[]>(["geo", "databases", "list"]))[0].enabled)
      .toBe(false);
    await octoprox(["geo", "databases", "enable", "city"]);
    const deleted = await octoprox(["geo", "databases", "delete", "city", "--yes"]);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await json<{ name: string }[]>(["geo", "databases", "list"])).map((d) => d.name))
      .toEqual(["exits"]);
  });

  it("shows the settings and changes the sources and the conflict rule", async () => {
    const shown = await octoprox(["geo", "settings"]);
    expect(shown.stdout).toMatch(/Sources\s+database, vendor, endpoint/);
    const changed = await json<{ location_sources: string[]; location_conflict_rule: string }>([
      "geo",
      "settings",
      "--sources",
      "vendor,database",
      "--conflict-rule",
      "first",
    ]);
    expect(changed).toMatchObject({
      location_sources: ["vendor", "database"],
      location_conflict_rule: "first",
    });
    const wrong = await octoprox(["geo", "settings", "--sources", "database,oracle"]);
    expect(wrong.code).toBe(2);
  });

  it("asks for every exit, or one project's, to be judged again (the API's ask queued)", async () => {
    const project = await h.request("POST", "/api/v1/projects", {
      token: h.tokens.admin,
      body: { name: "Judged", username: "judged" },
    });
    expect(project.status, project.text).toBe(201);
    const all = await octoprox(["geo", "reattribute"]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain("Every proxy's exit is being judged again.");
    const one = await json<{ scope: string }>(["geo", "reattribute", "--project", "Judged"]);
    expect(one).toEqual({ scope: `project:${project.body.id}` });
    const entries = await h.deps.redis.xrange(h.deps.keys.jobStream("reattribute"), "-", "+");
    expect(entries.map(([, fields]) => fields[1])).toEqual(
      expect.arrayContaining(["all", `project:${project.body.id}`]),
    );
    // Through the API: an unknown project is a 404, a malformed id a 422 naming it, a viewer 403.
    const unknown = await h.request("POST", "/api/v1/geo/reattribute", {
      token: h.tokens.admin,
      body: { project_id: "00000000-0000-4000-8000-000000000000" },
    });
    expect(unknown.status).toBe(404);
    const malformed = await h.request("POST", "/api/v1/geo/reattribute", {
      token: h.tokens.admin,
      body: { project_id: "shop" },
    });
    expect(malformed.status).toBe(422);
    expect(malformed.text).toContain("body.project_id");
    const viewer = await h.request("POST", "/api/v1/geo/reattribute", {
      token: h.tokens.viewer,
      body: {},
    });
    expect(viewer.status).toBe(403);
  });
});
