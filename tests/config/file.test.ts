/**
 * Reading a configuration file: secret references resolved from the environment and from
 * files, secrets in clear refused, and every problem reported with its path and line.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { formatConfigFile, parseConfigFile } from "../../control/config/file.ts";

const FILE = `version: 1
projects:
  - name: shop
    username: shop
    password: \${SHOP_PASSWORD}
    description: costs $\${HALF} of \${REGION}
    credentials:
      - name: login
        provider: static
        config: { username: bob, password: "file:secret.txt" }
    connectors:
      - name: main
        credential: login
        proxies:
          - http://203.0.113.7:3128
          - url: socks5://u:\${PROXY_PASSWORD}@203.0.113.8:1080
            country: de
`;

test("references are read from the environment and from files next to the file", () => {
  const dir = mkdtempSync(join(tmpdir(), "octoprox-config-"));
  writeFileSync(join(dir, "secret.txt"), "from-a-file\n");
  const read = parseConfigFile(FILE, {
    env: { SHOP_PASSWORD: "shop-pass-1", REGION: "eu", PROXY_PASSWORD: "p@ss:/word" },
    baseDir: dir,
  });
  if (!read.ok) throw new Error(JSON.stringify(read.issues));
  const [project] = read.config.projects;
  expect(project.password).toBe("shop-pass-1");
  expect(project.description).toBe("costs ${HALF} of eu");
  expect(project.credentials[0].config).toEqual({ username: "bob", password: "from-a-file" });
  const proxy = project.connectors[0].proxies[1];
  expect(proxy.address).toMatchObject({ username: "u", password: "p@ss:/word", port: 1080 });
  expect(proxy.country).toBe("DE");
});

test("secrets in clear, unset variables and unreadable files are each named with their line", () => {
  const text = FILE.replace("${SHOP_PASSWORD}", "in-clear-123")
    .replace("u:${PROXY_PASSWORD}@", "u:clear@");
  const read = parseConfigFile(text, { env: { REGION: "eu" }, baseDir: "/nonexistent" });
  expect(read.ok).toBe(false);
  if (read.ok) return;
  expect(read.issues.map((issue) => [issue.field, issue.line])).toEqual([
    ["projects.0.password", 5],
    ["projects.0.credentials.0.config.password", 10],
    ["projects.0.connectors.0.proxies.1.url", 16],
  ]);
  expect(read.issues[0].message).toMatch(/secret written in clear/);
  expect(read.issues[1].message).toMatch(/cannot read file:secret\.txt/);
  expect(JSON.stringify(read.issues)).not.toContain("in-clear-123");
});

test("the API's rules name every field at fault, and YAML errors name their line", () => {
  const bad = `version: 1
projects:
  - name: shop
    username: shop
    strategy: fastest
    connectors:
      - name: a
        weight: 500
      - name: A
`;
  const read = parseConfigFile(bad);
  expect(read.ok).toBe(false);
  if (read.ok) return;
  expect(read.issues.map((issue) => [issue.field, issue.line])).toEqual([
    ["projects.0.strategy", 5],
    ["projects.0.connectors.0.weight", 8],
    ["projects.0.connectors.1.name", 9],
  ]);
  const broken = parseConfigFile("version: 1\nprojects:\n  - name: [unclosed\n");
  expect(broken.ok).toBe(false);
  if (!broken.ok) expect(broken.issues[0].line).toBeGreaterThan(0);
});

test("an exported document reads back as the same document", () => {
  const config = {
    version: 1 as const,
    projects: [{
      name: "shop",
      username: "shop",
      credentials: [],
      connectors: [{ name: "main", kind: "static" as const, proxies: ["http://203.0.113.7:3128"] }],
    }],
  };
  for (const format of ["yaml", "json"] as const) {
    const read = parseConfigFile(formatConfigFile(config, format), { env: {} });
    expect(read.ok && read.input).toEqual(config);
  }
});
