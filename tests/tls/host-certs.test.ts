/**
 * Host certificates of an intercepting gateway (gateway/net/tls/host-certs.ts): one mint however
 * many tunnels ask for a new host at once, a hit served from the cache, the cache held to its
 * bound under a flood of distinct names (10,000), least recently used going first; the contexts
 * serve real handshakes that a client trusting the CA accepts for that name.
 */
import tls from "node:tls";
import net from "node:net";
import { beforeAll, expect, test } from "vitest";
import { createCa, loadCa, type MitmCa } from "../../shared/tls/ca.ts";
import { HostCertificates } from "../../gateway/net/tls/host-certs.ts";
import { alertName } from "../../gateway/net/tls/intercept-alerts.ts";

let ca: MitmCa;
let caPem: string;

beforeAll(async () => {
  const files = await createCa();
  caPem = files.certPem;
  ca = await loadCa(files);
});

test("concurrent asks for a new host mint once; later asks hit the cache", async () => {
  const certs = new HostCertificates(ca, 16);
  const asks = Array.from({ length: 50 }, () => certs.context("shop.example.com"));
  expect(certs.minting).toBe(1);
  const contexts = await Promise.all(asks);
  expect(new Set(contexts).size).toBe(1);
  expect(certs.minted).toBe(1);
  expect(certs.minting).toBe(0);
  const again = certs.context("shop.example.com");
  expect(again).toBe(contexts[0]);
  expect(certs.hits).toBe(1);
});

test("10,000 distinct names keep the cache at its bound, oldest out first", async () => {
  const certs = new HostCertificates(ca, 100);
  for (let batch = 0; batch < 100; batch++) {
    await Promise.all(
      Array.from({ length: 100 }, (_, i) => certs.context(`h${batch * 100 + i}.flood.test`)),
    );
    expect(certs.size).toBeLessThanOrEqual(100);
  }
  expect(certs.minted).toBe(10_000);
  expect(certs.evicted).toBe(9_900);
  // The last hundred are in; an early one is minted again.
  certs.context("h9999.flood.test");
  expect(certs.hits).toBe(1);
  await certs.context("h0.flood.test");
  expect(certs.minted).toBe(10_001);
}, 120_000);

test("a recently used name outlives older ones", async () => {
  const certs = new HostCertificates(ca, 2);
  await certs.context("a.test");
  await certs.context("b.test");
  certs.context("a.test"); // a is now the most recent
  await certs.context("c.test"); // evicts b
  const minted = certs.minted;
  certs.context("a.test");
  expect(certs.minted).toBe(minted);
  await certs.context("b.test");
  expect(certs.minted).toBe(minted + 1);
});

test("the context serves a handshake a client trusting the CA accepts for the name", async () => {
  const certs = new HostCertificates(ca, 4);
  const context = await certs.context("secure.example.com");
  const server = net.createServer((socket) => {
    const tlsSocket = new tls.TLSSocket(socket, { isServer: true, secureContext: context });
    tlsSocket.on("error", () => {});
    tlsSocket.on("secure", () => tlsSocket.end("ok"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  try {
    const answer = await new Promise<string>((resolve, reject) => {
      const client = tls.connect({
        host: "127.0.0.1",
        port,
        servername: "secure.example.com",
        ca: caPem,
      });
      let text = "";
      client.on("data", (chunk) => text += chunk);
      client.on("end", () => resolve(text));
      client.on("error", reject);
    });
    expect(answer).toBe("ok");
    const refused = await new Promise<string>((resolve) => {
      const client = tls.connect({
        host: "127.0.0.1",
        port,
        servername: "other.example.com",
        ca: caPem,
      });
      client.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      client.on("secureConnect", () => resolve("accepted"));
    });
    expect(refused).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
  } finally {
    server.close();
  }
});

test("client alerts are named as RFC 8446 names them, from either TLS engine", () => {
  expect(alertName(new Error("received fatal alert: UnknownCA"))).toBe("unknown_ca");
  expect(alertName(new Error("received fatal alert: BadCertificate"))).toBe("bad_certificate");
  expect(alertName(Object.assign(new Error("tlsv1 alert unknown ca"), {
    code: "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA",
  }))).toBe("unknown_ca");
  expect(alertName(new Error("sslv3 alert certificate unknown"))).toBe("certificate_unknown");
  expect(alertName(new Error("Connection reset by peer"))).toBeUndefined();
});
