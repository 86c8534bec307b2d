/**
 * `octoprox proxies import` against a real api: a generated 100,000-line list, run in a real
 * terminal, shows a progress bar of the bytes sent and ends with 100,000 added; a list with bad
 * lines reports each with its line number and reason, and a second import of the same file
 * counts duplicates. Also `proxies list` and `usage` over what the import added.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster } from "../../testkit/cluster.ts";
import { CliUser, Terminal } from "./support.ts";

let cluster: Cluster;
const user = new CliUser();
const terminals: Terminal[] = [];

beforeAll(async () => {
  cluster = await Cluster.create();
  await cluster.start("all");
  await user.loginWithToken(cluster, "import-test");
  await user.json(["projects", "create", "bulk"]);
  await user.json(["connectors", "create", "main", "--project", "bulk"]);
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  for (const terminal of terminals) terminal.close();
  user.remove();
  await cluster?.close();
});

/** `count` distinct proxies: 10.a.b.c:port, a country on every other line. */
function proxyList(count: number): string {
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    const host = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    lines.push(`http://u${i % 7}:pw@${host}:${3000 + (i % 5000)}${i % 2 ? " de" : ""}`);
  }
  return `${lines.join("\n")}\n`;
}

describe("proxies import", () => {
  it(
    "uploads 100,000 lines with a progress bar in a terminal and ends with the counts",
    async () => {
      const file = join(user.configHome, "big.txt");
      writeFileSync(file, proxyList(100_000));
      const terminal = new Terminal();
      terminals.push(terminal);
      terminal.start(user, ["proxies", "import", file, "--project", "bulk", "--connector", "main"]);
      expect(await terminal.exitCode(50_000)).toBe(0);
      const screen = terminal.screen();
      expect(screen).toMatch(/Uploading big\.txt \[█+\] 100% \| \d+\.\d MB of \d+\.\d MB/);
      expect(screen).toContain("100,000 lines read: 100,000 added, 0 duplicates, 0 refused");

      const page = await user.json<{ total: number; items: { country: string | null }[] }>([
        "proxies",
        "list",
        "-p",
        "bulk",
        "-c",
        "main",
        "--country",
        "de",
        "--page-size",
        "5",
      ]);
      expect(page.total).toBe(50_000);
      expect(page.items).toHaveLength(5);
    },
    60_000,
  );

  it("lists refused lines with their reasons, and counts what the connector has as duplicates", async () => {
    const file = join(user.configHome, "mixed.txt");
    writeFileSync(
      file,
      [
        "http://203.0.113.7:3128",
        "ftp://203.0.113.8:21",
        "http://203.0.113.9",
        "",
        "socks5://u:secret@203.0.113.10:1080 us",
        "http://203.0.113.7:3128",
      ].join("\n"),
    );
    const run = await user.run(["proxies", "import", file, "-p", "bulk", "-c", "main"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("6 lines read: 2 added, 1 duplicates, 2 refused");
    expect(run.stdout).toMatch(/│ 2\s+│ .*scheme/);
    expect(run.stdout).toMatch(/│ 3\s+│ .*port/);
    // Without a terminal the progress is plain lines on stderr.
    expect(run.stderr).toContain("Uploading mixed.txt: 100%");

    const again = await user.json<{ added: number; duplicates: number; duplicate_lines: number[] }>(
      ["proxies", "import", file, "-p", "bulk", "-c", "main"],
    );
    expect(again).toMatchObject({ added: 0, duplicates: 3 });
  });

  it("shows the project's usage with a chart of its requests", async () => {
    const run = await user.run(["usage", "--project", "bulk", "--range", "1h"]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("Requests");
    expect(run.stdout).toMatch(/Proxies\s+100,002/);
    expect(run.stdout).toMatch(/[▁▂▃▄▅▆▇█]{20,}/);
    const json = await user.json<{ history: { points: unknown[] } }>(["usage", "-p", "bulk"]);
    expect(json.history.points.length).toBeGreaterThan(0);
    const failures = await user.run(["failures", "-p", "bulk"]);
    expect(failures.code, failures.stderr).toBe(0);
    expect(failures.stdout).toContain("0 failures over 24h");
  });
});
