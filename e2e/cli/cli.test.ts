/**
 * The `octoprox` CLI against a real system (a control process of role all and a gateway): a
 * login in a real terminal keeps an API token in a 0600 file without echoing the password,
 * `status` names the controller leading, `--json` prints JSON alone, projects are created,
 * listed and deleted by name, and exit statuses say failed (1) from used wrong (2).
 */
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { CliUser, Terminal } from "./support.ts";

let cluster: Cluster;
let gateway: Gateway;
/** Logged in through the terminal; the other tests use its token. */
const user = new CliUser();
const terminals: Terminal[] = [];

beforeAll(async () => {
  cluster = await Cluster.create();
  await cluster.start("all");
  gateway = await cluster.startGateway();
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const terminal of terminals) terminal.close();
  user.remove();
  await cluster?.close();
});

describe("octoprox login", () => {
  it("asks for a username and a password it does not echo, and keeps an API token in a 0600 file", async () => {
    const terminal = new Terminal();
    terminals.push(terminal);
    terminal.start(user, ["login", cluster.api.url]);
    await terminal.until("Username:");
    terminal.type(cluster.adminLogin.username);
    await terminal.until("Password:");
    terminal.type(cluster.adminLogin.password);
    expect(await terminal.exitCode()).toBe(0);
    const screen = terminal.screen();
    expect(screen).toContain(`Logged in to ${cluster.api.url} as admin (admin)`);
    expect(screen).not.toContain(cluster.adminLogin.password);

    expect(statSync(user.configFile).mode & 0o777).toBe(0o600);
    expect(statSync(user.configHome + "/octoprox").mode & 0o777).toBe(0o700);
    const stored = JSON.parse(await readFile(user.configFile, "utf8"));
    expect(stored.url).toBe(cluster.api.url);
    expect(stored.token).toMatch(/^oxp_/);
    // A long-lived API token, named for this machine, not the login's JWT.
    const tokens = await cluster.request("GET", "/api/v1/tokens");
    expect(tokens.body.map((t: { name: string }) => t.name)).toContainEqual(
      expect.stringMatching(/^cli@/),
    );
  });

  it("takes a token instead, checked before it is kept", async () => {
    const other = new CliUser();
    try {
      const made = await cluster.request("POST", "/api/v1/tokens", { name: "script" });
      const login = await other.run(["login", cluster.api.url, "--token", made.body.token]);
      expect(login.code, login.stderr).toBe(0);
      expect(login.stdout).toContain("as admin");
      const whoami = await other.json<{ username: string; via: string }>(["whoami"]);
      expect(whoami).toMatchObject({ username: "admin", via: "api_token" });

      const bad = await other.run(["login", cluster.api.url, "--token", "oxp_wrong"]);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toContain("401");
      // The good login is still the stored one.
      expect((await other.run(["whoami"])).code).toBe(0);
    } finally {
      other.remove();
    }
  });
});

describe("octoprox status", () => {
  it("shows the processes, the controller leading and the gateway against the feed", async () => {
    // The gateway has applied the feed once it is ready; its heartbeat says so within 0.2 s.
    const status = await cluster.until(async () => {
      const run = await user.run(["status"]);
      return run.code === 0 && run.stdout.includes("Every gateway has applied it.") ? run : null;
    }, { message: "status to show the gateway current" });
    expect(status.stdout).toContain("Controller leading");
    expect(status.stdout).toContain(`${cluster.api.instance} (leader)`);
    expect(status.stdout).toContain(gateway.instance);
    expect(status.stdout).toContain("Work streams");

    const json = await user.json<{ leader: { data: { instance: string } } }>(["status"]);
    expect(json.leader.data.instance.startsWith(cluster.api.instance)).toBe(true);
  });
});

describe("projects", () => {
  // Some twenty CLI processes, each about 2 s of CPU on a 2-core machine the suite shares: 40 s
  // alone, over the default 60 s under the full suite's load.
  it(
    "creates, lists, shows and deletes a project by name, with --json alone on stdout",
    async () => {
      const created = await user.json<{ id: string; name: string; password: string }>([
        "projects",
        "create",
        "shop",
        "--strategy",
        "round_robin",
        "--set",
        "max_retries=2",
      ]);
      expect(created).toMatchObject({ name: "shop", max_retries: 2, strategy: "round_robin" });

      const listed = await user.run(["projects", "list"]);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toMatch(/shop\s+│\s+shop\s+│\s+round_robin/);
      const list = await user.json<{ id: string }[]>(["projects", "list"]);
      expect(list.map((p) => p.id)).toEqual([created.id]);

      const shown = await user.json<{ id: string }>(["projects", "get", "SHOP"]);
      expect(shown.id).toBe(created.id);

      const connector = await user.json<{ name: string; weight: number }>([
        "connectors",
        "create",
        "main",
        "--project",
        "shop",
        "--weight",
        "3",
      ]);
      expect(connector).toMatchObject({ name: "main", weight: 3 });
      const connectors = await user.run(["connectors", "list", "-p", "shop"]);
      expect(connectors.stdout).toContain("main");

      // A proxy is named by its id, its URL or host:port.
      const proxy = await user.json<{ id: string }>(
        ["proxies", "create", "http://bob@203.0.113.7:3128", "-p", "shop", "-c", "main"],
      );
      await user.json([
        "proxies",
        "create",
        "socks5://203.0.113.7:3128",
        "-p",
        "shop",
        "-c",
        "main",
      ]);
      const byUrl = await user.json<{ id: string }>(
        ["proxies", "get", "http://bob:any@203.0.113.7:3128", "-p", "shop"],
      );
      expect(byUrl.id).toBe(proxy.id);
      const ambiguous = await user.run(["proxies", "get", "203.0.113.7:3128", "-p", "shop"]);
      expect(ambiguous.code).toBe(1);
      expect(ambiguous.stderr).toContain("2 proxies are at 203.0.113.7:3128");
      const missing = await user.run([
        "proxies",
        "delete",
        "203.0.113.9:80",
        "-p",
        "shop",
        "--yes",
      ]);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain("No proxy of this project is at 203.0.113.9:80");
      const gone = await user.run(
        ["proxies", "delete", "http://bob@203.0.113.7:3128", "-p", "shop", "--yes"],
      );
      expect(gone.code, gone.stderr).toBe(0);
      const left = await user.json<{ items: { url: string }[] }>(["proxies", "list", "-p", "shop"]);
      expect(left.items.map((item) => item.url)).toEqual(["socks5://203.0.113.7:3128"]);

      // Without a terminal, a delete needs --yes rather than acting unasked.
      const unasked = await user.run(["projects", "delete", "shop"]);
      expect(unasked.code).toBe(2);
      expect(unasked.stderr).toContain("--yes");
      const deleted = await user.run(["projects", "delete", "shop", "--yes"]);
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(deleted.stdout).toContain("Deleted project shop");
      expect(await user.json(["projects", "list"])).toEqual([]);
    },
    120_000,
  );
});

describe("exit status", () => {
  it("is 2 for an unknown command, an unknown option or a missing argument", async () => {
    for (
      const args of [
        ["frobnicate"],
        ["projects", "list", "--colour"],
        ["projects", "get"],
        ["connectors", "list"],
        ["projects"],
      ]
    ) {
      const run = await user.run(args);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr, args.join(" ")).toMatch(/error|Usage/);
      expect(run.stdout).toBe("");
    }
  });

  it("is 1 when the API refuses, with every field it named, and when it cannot be reached", async () => {
    await user.json(["projects", "create", "dup"]);
    const duplicate = await user.run(["projects", "create", "dup", "--json"]);
    expect(duplicate.code).toBe(1);
    expect(duplicate.stdout).toBe("");
    expect(duplicate.stderr).toContain("POST /api/v1/projects: 400");
    expect(duplicate.stderr).toContain("body.name");

    const invalid = await user.run(["projects", "create", "x", "--set", "max_retries=99"]);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain("422");
    expect(invalid.stderr).toContain("body.max_retries");

    const missing = await user.run(["projects", "get", "nothing-here"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('No project "nothing-here"');

    const unreachable = await user.run(["projects", "list"], {
      env: { OCTOPROX_URL: "http://127.0.0.1:9" },
    });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toContain("Cannot reach the Octoprox API at http://127.0.0.1:9");

    const stranger = new CliUser();
    try {
      const notLoggedIn = await stranger.run(["projects", "list"]);
      expect(notLoggedIn.code).toBe(1);
      expect(notLoggedIn.stderr).toContain("octoprox login");
    } finally {
      stranger.remove();
    }
  });

  it("is 0 for --help, which shows examples on every command", async () => {
    for (const args of [["--help"], ["proxies", "import", "--help"], ["status", "--help"]]) {
      const run = await user.run(args);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain("Examples:");
    }
  });
});

describe("octoprox logout", () => {
  it("revokes the stored token and removes the file", async () => {
    const other = new CliUser();
    try {
      const made = await cluster.request("POST", "/api/v1/tokens", { name: "to-revoke" });
      expect((await other.run(["login", cluster.api.url, "--token", made.body.token])).code)
        .toBe(0);
      const out = await other.run(["logout"]);
      expect(out.code, out.stderr).toBe(0);
      expect(out.stdout).toContain("Token revoked");
      const after = await other.run(["whoami"], {
        env: { OCTOPROX_URL: cluster.api.url, OCTOPROX_TOKEN: made.body.token },
      });
      expect(after.code).toBe(1);
      expect(after.stderr).toContain("401");
      expect((await other.run(["whoami"])).stderr).toContain("Not logged in");
    } finally {
      other.remove();
    }
  });
});
