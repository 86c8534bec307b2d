/**
 * Configuration as code through the CLI against a real api: `apply` of a file with three
 * errors changes nothing and names each path with its line; the API's own refusals are mapped
 * back to the file's lines; `apply` then `diff` is empty and a second `apply` changes nothing;
 * an apply whose base moved while it asked is refused with the fresh diff (exit 1); `export`
 * then `apply` of the export is a no-op; `--prune` deletes what the file leaves out.
 */
import { writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster } from "../../testkit/cluster.ts";
import { CliUser, Terminal } from "./support.ts";

let cluster: Cluster;
const user = new CliUser({ SHOP_PROXY_PASSWORD: "shop-secret-1", UPSTREAM_PASSWORD: "up@pw" });
const terminals: Terminal[] = [];

beforeAll(async () => {
  cluster = await Cluster.create();
  await cluster.start("all");
  await user.loginWithToken(cluster, "config-test");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const terminal of terminals) terminal.close();
  user.remove();
  await cluster?.close();
});

function file(name: string, text: string): string {
  const path = join(user.configHome, name);
  writeFileSync(path, text);
  return path;
}

const GOOD = `version: 1
projects:
  - name: shop
    username: shop
    password: \${SHOP_PROXY_PASSWORD}
    strategy: round_robin
    connectors:
      - name: main
        kind: static
        weight: 2
        proxies:
          - http://203.0.113.7:3128
          - url: socks5://u:\${UPSTREAM_PASSWORD}@203.0.113.8:1080
            country: de
`;

async function projectNames(): Promise<string[]> {
  const answer = await cluster.request("GET", "/api/v1/projects");
  return answer.body.map((project: { name: string }) => project.name);
}

describe("apply", () => {
  it("refuses a file with three errors, naming each path and line, and changes nothing", async () => {
    const path = file(
      "bad.yaml",
      `version: 1
projects:
  - name: shop
    username: shop
    password: in-clear-secret
    connectors:
      - name: main
        weight: -4
        proxies:
          - ftp://203.0.113.7:21
`,
    );
    const run = await user.run(["apply", "-f", path, "--yes"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toContain("has 3 problems; nothing was sent");
    expect(run.stderr).toContain(`${path}:5: projects.0.password:`);
    expect(run.stderr).toContain(`${path}:8: projects.0.connectors.0.weight:`);
    expect(run.stderr).toContain(`${path}:10: projects.0.connectors.0.proxies.0:`);
    expect(await projectNames()).toEqual([]);
  });

  it("applies a file once: a second apply and a diff find nothing to change", async () => {
    const path = file("good.yaml", GOOD);
    const diff = await user.run(["diff", "-f", path]);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("+ create project shop");
    expect(diff.stdout).toContain("+ create connector shop/connectors/main");
    expect(diff.stdout).toContain("+ create proxy shop/connectors/main/proxies/");

    const first = await user.run(["apply", "-f", path, "--yes"]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/Applied \d+ changes/);
    expect(await projectNames()).toEqual(["shop"]);
    // The password came from this machine's environment.
    const project = (await cluster.request("GET", "/api/v1/projects")).body[0];
    expect(project.password).toBe("shop-secret-1");

    const second = await user.json<{ applied: boolean; changes: unknown[] }>([
      "apply",
      "-f",
      path,
      "--yes",
    ]);
    expect(second).toMatchObject({ applied: false, changes: [] });
    const empty = await user.run(["diff", "-f", path]);
    expect(empty.stdout).toContain("No changes");

    // A change shows with its fields.
    const heavier = file("heavier.yaml", GOOD.replace("weight: 2", "weight: 5"));
    const changed = await user.run(["diff", "-f", heavier]);
    expect(changed.stdout).toContain("~ update connector shop/connectors/main (weight)");
  });

  it("maps the API's refusals back to the file's lines", async () => {
    // Another project holds the username; the file does not name it, so it is kept.
    await cluster.request("POST", "/api/v1/projects", { name: "other", username: "taken" });
    const path = file(
      "clash.yaml",
      `version: 1
projects:
  - name: clash
    username: taken
`,
    );
    const run = await user.run(["apply", "-f", path, "--yes"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("The API refused");
    expect(run.stderr).toContain(
      `${path}:4: projects.0.username: is the proxy username of project other`,
    );
    expect(await projectNames()).not.toContain("clash");
  });

  it("refuses an apply whose base moved while it asked, with the fresh diff", async () => {
    const path = file("moved.yaml", GOOD.replace("weight: 2", "weight: 3"));
    const terminal = new Terminal();
    terminals.push(terminal);
    terminal.start(user, ["apply", "-f", path]);
    await terminal.until("Apply 1 changes? [y/N]");
    // Someone else changes the connector meanwhile.
    const [shop] = (await cluster.request("GET", "/api/v1/projects")).body.filter(
      (p: { name: string }) => p.name === "shop",
    );
    const [main] = (await cluster.request("GET", `/api/v1/projects/${shop.id}/connectors`)).body;
    const patched = await cluster.request(
      "PATCH",
      `/api/v1/projects/${shop.id}/connectors/${main.id}`,
      { weight: 7 },
    );
    expect(patched.status).toBe(200);
    terminal.type("y");
    expect(await terminal.exitCode()).toBe(1);
    const screen = terminal.screen();
    expect(screen).toContain("changed since this diff; nothing was applied");
    expect(screen).toContain("~ update connector shop/connectors/main (weight)");
    const after = await cluster.request("GET", `/api/v1/projects/${shop.id}/connectors/${main.id}`);
    expect(after.body.weight).toBe(7);

    // Two applies from the same base: the second is refused.
    const config = { version: 1, projects: [{ name: "shop", username: "shop" }] };
    const base = await cluster.request("POST", "/api/v1/config/diff", { config });
    const applied = await user.run(["apply", "-f", path, "--yes"]);
    expect(applied.code, applied.stderr).toBe(0);
    const stale = await cluster.request("POST", "/api/v1/config/apply", {
      config,
      base_fingerprint: base.body.fingerprint,
    });
    expect(stale.status).toBe(409);
  });

  it("exports a file that applies as a no-op, and prunes what a file leaves out", async () => {
    const exported = join(user.configHome, "export.yaml");
    const run = await user.run(["export", "-o", exported]);
    expect(run.code, run.stderr).toBe(0);
    const text = await readFile(exported, "utf8");
    expect(text).toContain("name: shop");
    expect(text).not.toContain("shop-secret-1");
    const again = await user.run(["apply", "-f", exported, "--yes"]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("No changes");
    const json = await user.run(["export", "--format", "json"]);
    const names = JSON.parse(json.stdout).projects.map((p: { name: string }) => p.name);
    expect(names.sort()).toEqual(["other", "shop"]);

    const onlyShop = file("only-shop.yaml", GOOD.replace("weight: 2", "weight: 3"));
    const kept = await user.run(["diff", "-f", onlyShop]);
    expect(kept.stdout).toContain("No changes");
    const pruned = await user.run(["diff", "-f", onlyShop, "--prune"]);
    expect(pruned.stdout).toContain("- delete project other");
    const applied = await user.run(["apply", "-f", onlyShop, "--prune", "--yes"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(await projectNames()).toEqual(["shop"]);
  });

  it("refuses a file older than the revision applied, in the API's words", async () => {
    const newer = file("rev5.yaml", GOOD.replace("version: 1\n", "version: 1\nrevision: 5\n"));
    expect((await user.run(["apply", "-f", newer, "--yes"])).code).toBe(0);
    const older = file("rev3.yaml", GOOD.replace("version: 1\n", "version: 1\nrevision: 3\n"));
    const run = await user.run(["apply", "-f", older, "--yes"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("409");
    expect(run.stderr).toContain("older than revision 5");
  });
});
