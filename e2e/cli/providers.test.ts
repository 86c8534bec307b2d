/**
 * `octoprox providers` against a real api: the catalogue, a custom descriptor stored from a YAML
 * file (refused until its call host is confirmed), replaced, its audit log, and deleted.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Cluster } from "../../testkit/cluster.ts";
import { CliUser } from "./support.ts";

let cluster: Cluster;
const user = new CliUser();

const descriptor = (name: string) =>
  `id: acme
name: ${name}
credential_fields:
  - { key: api_key, label: API key, type: password, secret: true, required: true }
proxy_types:
  - id: list
    name: List
    mode: list
    call: { url: "https://api.acme.example/proxies", headers: { x-api-key: "{credential.api_key}" } }
    item: { host: "{item.host}", port: "{item.port}" }
`;

beforeAll(async () => {
  cluster = await Cluster.create();
  await cluster.start("all");
  await user.loginWithToken(cluster, "providers-test");
}, 120_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  user.remove();
  await cluster?.close();
});

describe("providers", () => {
  it("lists the shipped vendors and shows one's fields", async () => {
    const list = await user.json<{ id: string; source: string }[]>(["providers", "list"]);
    expect(list.filter((p) => p.source === "builtin").map((p) => p.id)).toEqual([
      "brightdata",
      "decodo",
      "iproyal",
      "netnut",
      "oxylabs",
      "soax",
      "webshare",
    ]);
    const shown = await user.run(["providers", "show", "oxylabs"]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain("pr.oxylabs.io:7777");
    // The password field: of the credential, required and secret.
    expect(shown.stdout).toMatch(/password\W+credential\W+password\W+yes\W+yes/);
  });

  it("stores a descriptor from YAML once its host is confirmed, replaces it, and deletes it", async () => {
    const file = join(user.configHome, "acme.yaml");
    writeFileSync(file, descriptor("Acme"));
    const refused = await user.run(["providers", "apply", "-f", file]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("api.acme.example");

    const stored = await user.run([
      "providers",
      "apply",
      "-f",
      file,
      "--confirm-host",
      "api.acme.example",
    ]);
    expect(stored.code, stored.stderr).toBe(0);
    expect(stored.stdout).toContain("Stored descriptor acme (version 1).");
    writeFileSync(file, descriptor("Acme Proxies"));
    const replaced = await user.json<{ version: number; name: string }>([
      "providers",
      "apply",
      "-f",
      file,
      "--confirm-host",
      "api.acme.example",
    ]);
    expect(replaced).toMatchObject({ version: 2, name: "Acme Proxies" });

    const history = await user.json<{ version: number; action: string }[]>([
      "providers",
      "history",
      "acme",
    ]);
    expect(history.map((h) => `${h.version} ${h.action}`)).toEqual(["2 updated", "1 created"]);
    const deleted = await user.run(["providers", "delete", "acme", "--yes"]);
    expect(deleted.code, deleted.stderr).toBe(0);
    const after = await user.json<{ id: string }[]>(["providers", "list"]);
    expect(after.map((p) => p.id)).not.toContain("acme");
  });
});
