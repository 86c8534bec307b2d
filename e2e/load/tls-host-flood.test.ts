/**
 * A load run, outside `npm test` (`npm run test:load`): 10,000 distinct host names through an
 * intercepting gateway whose certificate cache holds 64. Each name gets a CONNECT and a TLS
 * handshake the client verifies against the install's CA, 25 at a time: every name is minted
 * once, the cache stays at its bound, and the process's size levels off once warm, where an
 * unbounded cache would keep a TLS context per name for good.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import net from "node:net";
import tls from "node:tls";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { Cluster, type Gateway } from "../../testkit/cluster.ts";
import { testMitmCa } from "../../testkit/mitm-ca.ts";
import { createRoutedProject, type RoutedProject } from "../../testkit/routing.ts";
import { startTinyproxy, type Tinyproxy } from "../../testkit/upstreams/tinyproxy.ts";

const run = promisify(execFile);
const CACHE_SIZE = 64;

let cluster: Cluster;
let gateway: Gateway;
let exit: Tinyproxy;
let project: RoutedProject;

beforeAll(async () => {
  exit = await startTinyproxy();
  cluster = await Cluster.create();
  await cluster.start("all");
  gateway = await cluster.startGateway({
    env: { OCTOPROX_TLS_MITM_CERT_CACHE_SIZE: String(CACHE_SIZE) },
  });
  project = await createRoutedProject(cluster, [exit.url], {
    project: { tls_mitm_mode: "plain" },
  });
}, 180_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") cluster.dump();
});

afterAll(async () => {
  await cluster?.close();
  await exit?.close();
});

it("10,000 distinct host names keep the certificate cache, and memory, within bounds", async () => {
  const rssOf = async () => {
    const { stdout } = await run("ps", ["-o", "rss=", "-p", String(gateway.child.pid)]);
    return Number(stdout.trim()) * 1024;
  };
  const minted = "octoprox_gateway_mitm_certificates_minted_total";
  const before = await gateway.metric(minted);
  const ca = await readFile(testMitmCa().certPath, "utf8");
  // Ten rounds of a thousand new names each (under .localhost: the guard places them on
  // loopback without asking DNS); the process's size after each.
  const sizes: number[] = [];
  for (let round = 0; round < 10; round++) {
    for (let at = 0; at < 1_000; at += 25) {
      await Promise.all(
        Array.from(
          { length: 25 },
          (_, i) => handshake(`r${round}n${at + i}.flood.localhost`, ca),
        ),
      );
    }
    sizes.push(await rssOf());
  }
  expect(await gateway.metric(minted)).toBe(before + 10_000);
  expect(await gateway.metric("octoprox_gateway_mitm_certificates")).toBeLessThanOrEqual(
    CACHE_SIZE,
  );
  // The heap grows in steps while it warms up, then levels off: the last three thousand
  // names add little, where an unbounded cache would add a context per name for good.
  expect(sizes[9] - sizes[6], `sizes ${sizes.map((size) => size >> 20).join(", ")} MiB`)
    .toBeLessThan(24 * 1024 * 1024);
}, 300_000);

/** A CONNECT to `name:443` and a TLS handshake inside, verified against the CA; then closed. */
function handshake(name: string, ca: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(gateway.proxyPort, "127.0.0.1");
    const auth = Buffer.from(
      `${project.credentials.username}:${project.credentials.password}`,
    ).toString("base64");
    socket.once("connect", () => {
      socket.write(`CONNECT ${name}:443 HTTP/1.1\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`);
    });
    socket.once("data", (chunk) => {
      if (!chunk.toString("latin1").startsWith("HTTP/1.1 200")) {
        reject(new Error(`CONNECT ${name}: ${chunk.toString("latin1")}`));
        return;
      }
      const secure = tls.connect({ socket, servername: name, ca }, () => {
        secure.destroy();
        resolve();
      });
      secure.once("error", reject);
    });
    socket.once("error", reject);
    socket.once("close", () => reject(new Error(`CONNECT ${name}: closed`)));
    socket.setTimeout(10_000, () => socket.destroy(new Error(`CONNECT ${name}: no answer`)));
  });
}
