/**
 * `octoprox alerts` as an admin runs it (the bin, a child process) against the admin API in
 * process on a real socket: a channel added prints its secret once, a rule names it by name,
 * a test delivery shows in the delivery log with its try, and both are removed.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AlertDeliverer } from "../../control/alerts/deliverer.ts";
import { type ApiHarness, listen, startHarness } from "../../testkit/api-harness.ts";
import { runCli } from "../../testkit/cli.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../../testkit/webhook-receiver.ts";

let h: ApiHarness;
let api: { port: number; close(): Promise<void> };
let receiver: WebhookReceiver;
let dir: string;

function octoprox(args: string[]) {
  return runCli({ port: api.port, token: h.tokens.admin, configHome: dir }, args);
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ox-alerts-cli-"));
  await chmod(dir, 0o755);
  receiver = await startWebhookReceiver();
  h = await startHarness();
  api = await listen(h.app);
  await h.request("POST", "/api/v1/projects", {
    token: h.tokens.admin,
    body: { name: "Shop", username: "shop" },
  });
}, 120_000);

afterAll(async () => {
  await api?.close();
  await h?.close();
  await receiver?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("octoprox alerts", () => {
  it("adds a channel and a rule, sends a test, shows the log, and removes both", async () => {
    const added = await octoprox([
      "alerts",
      "channels",
      "add",
      "ops",
      "--url",
      receiver.url,
      "--allow-private-address",
    ]);
    expect(added.code, added.stderr).toBe(0);
    const secret = added.stdout.trim().split("\n").at(-1)!;
    expect(secret).toMatch(/^whsec_/);
    const channels = await octoprox(["alerts", "channels", "list"]);
    expect(channels.stdout).toContain("ops");
    expect(channels.stdout).not.toContain(secret);

    const rule = await octoprox([
      "alerts",
      "rules",
      "add",
      "shop-limit",
      "--kind",
      "traffic_limit",
      "-p",
      "shop",
      "--channel",
      "ops",
      "--json",
    ]);
    expect(rule.code, rule.stderr).toBe(0);
    expect(JSON.parse(rule.stdout)).toMatchObject({
      kind: "traffic_limit",
      channel_ids: [
        expect.any(String),
      ],
    });
    const refused = await octoprox(["alerts", "rules", "add", "x", "--kind", "weather"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("body.kind");

    const test = await octoprox(["alerts", "channels", "test", "ops"]);
    expect(test.code, test.stderr).toBe(0);
    await new AlertDeliverer({
      database: h.deps.database,
      settings: h.deps.settings,
      logger: h.deps.logger,
      pollMs: 50,
    }).deliverDue();
    expect(receiver.received).toHaveLength(1);
    const log = await octoprox(["alerts", "deliveries"]);
    expect(log.stdout).toMatch(/ops\s+│?\s*test\s+│?\s*delivered\s+│?\s*200/);
    const events = await octoprox(["alerts", "events"]);
    expect(events.stdout).toContain("No event.");

    expect((await octoprox(["alerts", "rules", "remove", "shop-limit", "--yes"])).code).toBe(0);
    expect((await octoprox(["alerts", "channels", "remove", "ops", "--yes"])).code).toBe(0);
    expect((await octoprox(["alerts", "rules", "list"])).stdout).toContain("No rule.");
  });
});
