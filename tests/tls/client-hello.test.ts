/**
 * The ClientHello reader of intercepted tunnels (gateway/net/tls/client-hello.ts), fed the bytes
 * real TLS clients send (Node's TLS, and curl through a listener that keeps what it reads): the
 * name and protocols a client asks for, its versions and ciphers; `more` until the hello is whole,
 * across records too; plain HTTP read as not TLS; cut, oversized and garbled hellos refused.
 */
import { execFile } from "node:child_process";
import net from "node:net";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  isGrease,
  MAX_CLIENT_HELLO_BYTES,
  scanClientHello,
} from "../../gateway/net/tls/client-hello.ts";
import { fingerprints } from "../../gateway/net/tls/fingerprints.ts";

let server: net.Server;
let port: number;
const received: Buffer[] = [];
let onFirst: ((bytes: Buffer) => void) | undefined;

/** The first bytes a client sends a listener that never answers. */
function firstBytes(send: () => void): Promise<Buffer> {
  return new Promise((resolve) => {
    onFirst = resolve;
    send();
  });
}

beforeAll(async () => {
  server = net.createServer((socket) => {
    let bytes = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      bytes = Buffer.concat([bytes, chunk]);
      const scan = scanClientHello(bytes);
      if (scan.kind !== "more") {
        received.push(bytes);
        onFirst?.(bytes);
        socket.destroy();
      }
    });
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

function nodeHello(options: tls.ConnectionOptions): Promise<Buffer> {
  return firstBytes(() => {
    const socket = tls.connect({ host: "127.0.0.1", port, ...options });
    socket.on("error", () => {});
  });
}

describe("a real client's hello", () => {
  test("Node's TLS: SNI, ALPN, TLS 1.3 offered, ciphers and groups", async () => {
    const bytes = await nodeHello({
      servername: "Shop.Example.com",
      ALPNProtocols: ["h2", "http/1.1"],
    });
    const scan = scanClientHello(bytes);
    expect(scan.kind).toBe("hello");
    if (scan.kind !== "hello") return;
    const hello = scan.hello;
    expect(hello.serverName).toBe("shop.example.com");
    expect(hello.alpn).toEqual(["h2", "http/1.1"]);
    expect(hello.version).toBe(0x0303);
    expect(hello.maxVersion).toBe(0x0304);
    expect(hello.ciphers).toContain(0x1301);
    expect(hello.groups.length).toBeGreaterThan(0);
    expect(hello.signatureAlgorithms.length).toBeGreaterThan(0);
    // server_name, ALPN and supported_versions, in the order sent.
    expect(hello.extensions).toEqual(expect.arrayContaining([0, 16, 43]));
  });

  test("no SNI for an address target", async () => {
    const bytes = await nodeHello({ ALPNProtocols: ["http/1.1"] });
    const scan = scanClientHello(bytes);
    expect(scan.kind === "hello" && scan.hello.serverName).toBeUndefined();
  });

  test("curl's hello names the host it was given", async () => {
    const hello = firstBytes(() => {
      execFile("curl", [
        "-s",
        "--max-time",
        "5",
        "--connect-to",
        `name.test:443:127.0.0.1:${port}`,
        "https://name.test/",
      ], () => {});
    });
    const scan = scanClientHello(await hello);
    expect(scan.kind).toBe("hello");
    expect(scan.kind === "hello" && scan.hello.serverName).toBe("name.test");
  });
});

describe("partial, split and foreign bytes", () => {
  test("every prefix of a hello asks for more, the whole of it reads", async () => {
    const bytes = await nodeHello({ servername: "a.test" });
    for (const cut of [1, 4, 5, 9, bytes.length - 1]) {
      expect(scanClientHello(bytes.subarray(0, cut)).kind).toBe("more");
    }
    expect(scanClientHello(bytes).kind).toBe("hello");
  });

  test("a hello split across two records reads as one", async () => {
    const bytes = await nodeHello({ servername: "split.test" });
    const body = bytes.subarray(5);
    const half = Math.floor(body.length / 2);
    const record = (part: Buffer) =>
      Buffer.concat([Buffer.from([0x16, 3, 1, part.length >> 8, part.length & 0xff]), part]);
    const split = Buffer.concat([record(body.subarray(0, half)), record(body.subarray(half))]);
    expect(scanClientHello(split.subarray(0, 5 + half + 3)).kind).toBe("more");
    const scan = scanClientHello(split);
    expect(scan.kind === "hello" && scan.hello.serverName).toBe("split.test");
  });

  test("plain HTTP and other protocols are not TLS", () => {
    expect(scanClientHello(Buffer.from("GET / HTTP/1.1\r\n")).kind).toBe("not_tls");
    expect(scanClientHello(Buffer.from("SSH-2.0-OpenSSH_9.2\r\n")).kind).toBe("not_tls");
    expect(scanClientHello(Buffer.alloc(0)).kind).toBe("more");
  });

  test("a handshake record that is not a ClientHello, or one too large, is malformed", () => {
    const serverHello = Buffer.from([0x16, 3, 3, 0, 4, 2, 0, 0, 0]);
    expect(scanClientHello(serverHello)).toEqual({
      kind: "malformed",
      reason: "the first handshake message is not a ClientHello",
    });
    const big = MAX_CLIENT_HELLO_BYTES + 10;
    const huge = Buffer.from([0x16, 3, 1, 0, 4, 1, big >> 16, (big >> 8) & 0xff, big & 0xff]);
    expect(scanClientHello(huge).kind).toBe("malformed");
  });

  test("a hello whose fields run past its end is malformed, not a crash", async () => {
    const bytes = Buffer.from(await nodeHello({ servername: "cut.test" }));
    // Claim a longer cipher list than the hello holds.
    const sessionIdLength = bytes[5 + 4 + 2 + 32];
    const at = 5 + 4 + 2 + 32 + 1 + sessionIdLength;
    bytes.writeUInt16BE(0xfff0, at);
    const scan = scanClientHello(bytes);
    expect(scan).toEqual({ kind: "malformed", reason: "the ClientHello is cut short" });
  });
});

test("GREASE values are told apart", () => {
  expect(isGrease(0x0a0a)).toBe(true);
  expect(isGrease(0xfafa)).toBe(true);
  expect(isGrease(0x1301)).toBe(false);
  expect(isGrease(0x0a1a)).toBe(false);
});

describe("fingerprints", () => {
  // The JA4 specification's own example ClientHello (FoxIO, README's "Example").
  const example = {
    version: 0x0303,
    maxVersion: 0x0304,
    ciphers: [
      0x1301,
      0x1302,
      0x1303,
      0xc02b,
      0xc02f,
      0xc02c,
      0xc030,
      0xcca9,
      0xcca8,
      0xc013,
      0xc014,
      0x009c,
      0x009d,
      0x002f,
      0x0035,
    ],
    extensions: [
      0x001b,
      0x0000,
      0x0033,
      0x0010,
      0x4469,
      0x0017,
      0x002d,
      0x000d,
      0x0005,
      0x0023,
      0x0012,
      0x002b,
      0xff01,
      0x000b,
      0x000a,
      0x0015,
    ],
    groups: [],
    pointFormats: [],
    signatureAlgorithms: [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601],
    supportedVersions: [0x0304, 0x0303],
    serverName: "example.com",
    alpn: ["h2", "http/1.1"],
  };

  test("JA4 of the specification's example hello is the one it gives", () => {
    expect(fingerprints(example).ja4).toBe("t13d1516h2_8daaf6152771_e5627efa2ab1");
  });

  test("GREASE is left out of both; JA3 is the MD5 of its text", async () => {
    const greased = {
      ...example,
      ciphers: [0x0a0a, ...example.ciphers],
      extensions: [0x1a1a, ...example.extensions, 0x2a2a],
    };
    expect(fingerprints(greased).ja4).toBe(fingerprints(example).ja4);
    const { ja3, ja3Text } = fingerprints(greased);
    expect(ja3Text.startsWith("771,4865-4866-4867-49195")).toBe(true);
    expect(ja3).toMatch(/^[0-9a-f]{32}$/);
    const { createHash } = await import("node:crypto");
    expect(ja3).toBe(createHash("md5").update(ja3Text).digest("hex"));
  });

  test("a real client's hello gives stable fingerprints, `i` without SNI", async () => {
    const withName = scanClientHello(
      await nodeHello({ servername: "fp.test", ALPNProtocols: ["http/1.1"] }),
    );
    const without = scanClientHello(await nodeHello({ ALPNProtocols: ["http/1.1"] }));
    if (withName.kind !== "hello" || without.kind !== "hello") throw new Error("no hello");
    const a = fingerprints(withName.hello);
    const b = fingerprints(without.hello);
    expect(a.ja4).toMatch(/^t13d\d{4}h1_[0-9a-f]{12}_[0-9a-f]{12}$/);
    expect(b.ja4.startsWith("t13i")).toBe(true);
  });
});
