/**
 * The PROXY protocol header reader (shared/proxy-protocol/proxy-header.ts): every form of
 * versions 1 and 2, what is absent, incomplete or refused, and tables over every truncation and
 * random damage of valid headers.
 */
import { describe, expect, it } from "vitest";
import {
  encodeProxyV1,
  encodeProxyV2,
  PROXY_V1_MAX_BYTES,
  PROXY_V2_MAX_BYTES,
  PROXY_V2_SIGNATURE,
  ProxyHeaderError,
  ProxyHeaderKind,
  type ProxyHeaderRead,
  readProxyHeader,
  startsProxyHeader,
} from "../../shared/proxy-protocol/proxy-header.ts";

const text = (s: string) => Uint8Array.from(Buffer.from(s, "latin1"));
const join = (...parts: Uint8Array[]) => Uint8Array.from(Buffer.concat(parts));

const V4_SOURCE = { address: "203.0.113.7", port: 51_000, family: 4 as const };
const V4_DEST = { address: "10.0.0.1", port: 8080, family: 4 as const };
const V6_SOURCE = { address: "2001:db8::7", port: 443, family: 6 as const };
const V6_DEST = { address: "2001:db8::1", port: 1080, family: 6 as const };

/** A v2 header by hand: command, family byte, the block after the fixed part. */
function v2(versionCommand: number, family: number, block: Uint8Array): Uint8Array {
  return join(
    PROXY_V2_SIGNATURE,
    Uint8Array.of(versionCommand, family, block.length >> 8, block.length & 0xff),
    block,
  );
}

const refused = (bytes: Uint8Array, message: RegExp) => {
  expect(() => readProxyHeader(bytes)).toThrow(ProxyHeaderError);
  expect(() => readProxyHeader(bytes)).toThrow(message);
};

describe("PROXY protocol version 1", () => {
  it("reads TCP4, with the client's bytes after the line left alone", () => {
    const bytes = text("PROXY TCP4 203.0.113.7 10.0.0.1 51000 8080\r\nGET / HTTP/1.1\r\n");
    expect(readProxyHeader(bytes)).toEqual({
      kind: ProxyHeaderKind.proxied,
      version: 1,
      consumed: 44,
      source: V4_SOURCE,
      destination: V4_DEST,
    });
  });

  it("reads TCP6, writing the addresses in their canonical form", () => {
    const bytes = text("PROXY TCP6 2001:DB8:0:0::7 2001:db8::1 443 1080\r\n");
    const read = readProxyHeader(bytes);
    expect(read).toEqual({
      kind: ProxyHeaderKind.proxied,
      version: 1,
      consumed: bytes.length,
      source: V6_SOURCE,
      destination: V6_DEST,
    });
  });

  it("reads UNKNOWN, bare or with anything after it, as the peer being the client", () => {
    for (const line of ["PROXY UNKNOWN\r\n", "PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n"]) {
      expect(readProxyHeader(text(`${line}\x05\x01\x00`))).toEqual({
        kind: ProxyHeaderKind.local,
        version: 1,
        consumed: line.length,
      });
    }
  });

  it("takes a line of exactly 107 bytes and refuses a longer one", () => {
    const longest = `PROXY UNKNOWN ${"x".repeat(PROXY_V1_MAX_BYTES - 16)}\r\n`;
    expect(longest.length).toBe(PROXY_V1_MAX_BYTES);
    expect(readProxyHeader(text(longest))).toMatchObject({ consumed: PROXY_V1_MAX_BYTES });
    refused(text(`PROXY UNKNOWN ${"x".repeat(PROXY_V1_MAX_BYTES - 15)}\r\n`), /longer than 107/);
    // Without its CRLF, once 106 bytes are in it can no longer end in time.
    refused(text(`PROXY TCP4 ${"1".repeat(95)}`), /longer than 107/);
  });

  it("refuses lines that can never be a header", () => {
    const cases: [string, RegExp][] = [
      ["PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", /TCP4, TCP6 or UNKNOWN/],
      ["PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", /PROXY TCP4\|TCP6/],
      ["PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n", /PROXY TCP4\|TCP6/],
      ["PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", /PROXY TCP4\|TCP6/],
      ["PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", /TCP4, TCP6 or UNKNOWN/],
      ["PROXY TCP4 ::1 5.6.7.8 1 2\r\n", /not IPv4/],
      ["PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", /not IPv4/],
      ["PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n", /not IPv4/],
      ["PROXY TCP6 1.2.3.4 ::1 1 2\r\n", /not IPv6/],
      ["PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n", /not IPv6/],
      ["PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", /0 to 65535/],
      ["PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n", /0 to 65535/],
      ["PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", /0 to 65535/],
      ["PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", /CR without LF/],
      ["PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", /not text/],
      ["PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n", /not text/],
      ["PROXY \xe9\r\n", /not text/],
    ];
    for (const [line, message] of cases) refused(text(line), message);
  });

  it("waits for the rest of a line", () => {
    for (const partial of ["P", "PROX", "PROXY ", "PROXY TCP4 1.2.3.4", "PROXY UNKNOWN\r"]) {
      expect(readProxyHeader(text(partial))).toEqual({ kind: ProxyHeaderKind.incomplete });
    }
  });
});

describe("PROXY protocol version 2", () => {
  it("reads PROXY over TCP and IPv4, then the client's bytes", () => {
    const header = encodeProxyV2(V4_SOURCE, V4_DEST);
    expect(header.length).toBe(16 + 12);
    expect(readProxyHeader(join(header, text("\x05\x01\x00")))).toEqual({
      kind: ProxyHeaderKind.proxied,
      version: 2,
      consumed: 28,
      source: V4_SOURCE,
      destination: V4_DEST,
    });
  });

  it("reads PROXY over TCP and IPv6", () => {
    const header = encodeProxyV2(V6_SOURCE, V6_DEST);
    expect(header.length).toBe(16 + 36);
    expect(readProxyHeader(header)).toEqual({
      kind: ProxyHeaderKind.proxied,
      version: 2,
      consumed: 52,
      source: V6_SOURCE,
      destination: V6_DEST,
    });
  });

  it("skips the TLVs after the addresses", () => {
    // PP2_TYPE_UNIQUE_ID (0x05), 4 bytes, then PP2_TYPE_NOOP (0x04) with 2.
    const tlvs = Uint8Array.of(0x05, 0, 4, 1, 2, 3, 4, 0x04, 0, 2, 0, 0);
    const header = encodeProxyV2(V4_SOURCE, V4_DEST, tlvs);
    expect(readProxyHeader(join(header, text("GET")))).toMatchObject({
      kind: ProxyHeaderKind.proxied,
      consumed: 16 + 12 + tlvs.length,
      source: V4_SOURCE,
    });
  });

  it("reads LOCAL (a balancer's health check) as the peer being the client, block and all", () => {
    expect(readProxyHeader(encodeProxyV2())).toEqual({
      kind: ProxyHeaderKind.local,
      version: 2,
      consumed: 16,
    });
    // LOCAL with an address block, even of a family it would refuse for PROXY: ignored.
    for (const family of [0x11, 0x12, 0x99]) {
      expect(readProxyHeader(v2(0x20, family, new Uint8Array(12)))).toEqual({
        kind: ProxyHeaderKind.local,
        version: 2,
        consumed: 28,
      });
    }
  });

  it("reads PROXY without an IP address (unspecified, a UNIX socket) as the peer", () => {
    expect(readProxyHeader(v2(0x21, 0x00, new Uint8Array(0)))).toMatchObject({
      kind: ProxyHeaderKind.local,
      consumed: 16,
    });
    expect(readProxyHeader(v2(0x21, 0x31, new Uint8Array(216)))).toMatchObject({
      kind: ProxyHeaderKind.local,
      consumed: 16 + 216,
    });
  });

  it("refuses what can never be a header", () => {
    const block = new Uint8Array(12);
    refused(v2(0x11, 0x11, block), /another version/);
    refused(v2(0x31, 0x11, block), /another version/);
    refused(v2(0x22, 0x11, block), /LOCAL or PROXY/);
    refused(v2(0x21, 0x12, block), /datagram/);
    refused(v2(0x21, 0x22, new Uint8Array(36)), /datagram/);
    refused(v2(0x21, 0x32, new Uint8Array(216)), /datagram/);
    refused(v2(0x21, 0x41, block), /unknown/);
    refused(v2(0x21, 0x13, block), /unknown/);
    refused(v2(0x21, 0x11, new Uint8Array(11)), /shorter/);
    refused(v2(0x21, 0x21, new Uint8Array(12)), /shorter/);
    refused(v2(0x21, 0x31, new Uint8Array(100)), /shorter/);
  });

  it("refuses an oversized header as soon as its length says so", () => {
    const fixed = join(PROXY_V2_SIGNATURE, Uint8Array.of(0x21, 0x11, 0x04, 0x00));
    const length = PROXY_V2_MAX_BYTES - 16 + 1;
    refused(
      join(PROXY_V2_SIGNATURE, Uint8Array.of(0x21, 0x11, length >> 8, length & 0xff)),
      /longer/,
    );
    refused(fixed, /longer than 1024/);
    const largest = encodeProxyV2(V4_SOURCE, V4_DEST, new Uint8Array(PROXY_V2_MAX_BYTES - 28));
    expect(readProxyHeader(largest)).toMatchObject({ consumed: PROXY_V2_MAX_BYTES });
  });

  it("refuses a bad family before the whole header arrived", () => {
    refused(join(PROXY_V2_SIGNATURE, Uint8Array.of(0x21, 0x12, 0, 12)), /datagram/);
  });
});

describe("what is no PROXY header", () => {
  it("tells the client's own protocol apart from the first bytes that differ", () => {
    const cases = [
      "GET http://example.com/ HTTP/1.1\r\n",
      "POST http://example.com/ HTTP/1.1\r\n",
      "PROPFIND http://example.com/ HTTP/1.1\r\n",
      "PUT",
      "\r\nGET / HTTP/1.1\r\n",
      "\x05\x01\x00",
      "\x05\x02\x00\x02",
      "PROXY\r\n",
    ];
    for (const bytes of cases) {
      expect(readProxyHeader(text(bytes)), JSON.stringify(bytes)).toEqual({
        kind: ProxyHeaderKind.absent,
      });
      expect(startsProxyHeader(text(bytes))).toBe(false);
    }
  });

  it("a signature damaged anywhere is no header", () => {
    for (let index = 0; index < PROXY_V2_SIGNATURE.length; index++) {
      const damaged = join(encodeProxyV2(V4_SOURCE, V4_DEST));
      damaged[index] ^= 0x40;
      expect(readProxyHeader(damaged).kind, `byte ${index}`).toBe(ProxyHeaderKind.absent);
    }
  });

  it("says so once the prefix of either signature is complete, valid or not", () => {
    expect(startsProxyHeader(new Uint8Array(0))).toBeUndefined();
    expect(startsProxyHeader(text("PROXY"))).toBeUndefined();
    expect(startsProxyHeader(text("PROXY "))).toBe(true);
    expect(startsProxyHeader(PROXY_V2_SIGNATURE.subarray(0, 11))).toBeUndefined();
    expect(startsProxyHeader(PROXY_V2_SIGNATURE)).toBe(true);
  });
});

describe("tables over valid headers", () => {
  const valid: [string, Uint8Array][] = [
    ["v1 TCP4", encodeProxyV1(V4_SOURCE, V4_DEST)],
    ["v1 TCP6", encodeProxyV1(V6_SOURCE, V6_DEST)],
    ["v1 UNKNOWN", encodeProxyV1()],
    ["v2 TCP4", encodeProxyV2(V4_SOURCE, V4_DEST)],
    ["v2 TCP6", encodeProxyV2(V6_SOURCE, V6_DEST, Uint8Array.of(0x04, 0, 1, 0))],
    ["v2 LOCAL", encodeProxyV2()],
  ];

  it("every truncation is incomplete, never a header or an error", () => {
    for (const [name, header] of valid) {
      for (let length = 0; length < header.length; length++) {
        expect(readProxyHeader(header.subarray(0, length)), `${name} at ${length}`).toEqual({
          kind: ProxyHeaderKind.incomplete,
        });
      }
      expect(readProxyHeader(header).kind, name).not.toBe(ProxyHeaderKind.incomplete);
    }
  });

  it("endpoints come back as they were encoded, whatever follows", () => {
    const random = seeded(7);
    for (let round = 0; round < 300; round++) {
      const family = random() < 0.5 ? 4 : 6;
      const address = family === 4
        ? Array.from({ length: 4 }, () => Math.floor(random() * 256)).join(".")
        : Array.from({ length: 8 }, () => Math.floor(random() * 65536).toString(16)).join(":");
      const source = { address, port: Math.floor(random() * 65536), family } as const;
      const destination = { ...(family === 4 ? V4_DEST : V6_DEST) };
      const tail = Uint8Array.from({ length: Math.floor(random() * 40) }, () => random() * 256);
      for (const encode of [encodeProxyV1, encodeProxyV2]) {
        const header = encode(source, destination);
        const read = readProxyHeader(join(header, tail)) as Extract<
          ProxyHeaderRead,
          { kind: "proxied" }
        >;
        expect(read.kind).toBe(ProxyHeaderKind.proxied);
        expect(read.consumed).toBe(header.length);
        expect(read.source.port).toBe(source.port);
        expect(readProxyHeader(encode(read.source, read.destination))).toEqual({
          ...read,
          consumed: header.length,
        });
      }
    }
  });

  it("random damage gives a header within the bytes, incomplete, absent or ProxyHeaderError", () => {
    const random = seeded(11);
    for (let round = 0; round < 5000; round++) {
      const [, header] = valid[Math.floor(random() * valid.length)];
      const bytes = join(header, text("GET / HTTP/1.1\r\n"));
      const flips = 1 + Math.floor(random() * 3);
      for (let i = 0; i < flips; i++) {
        bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256);
      }
      const cut = bytes.subarray(0, Math.floor(random() * (bytes.length + 1)));
      let read: ProxyHeaderRead;
      try {
        read = readProxyHeader(cut);
      } catch (error) {
        expect(error).toBeInstanceOf(ProxyHeaderError);
        continue;
      }
      if (read.kind === ProxyHeaderKind.local || read.kind === ProxyHeaderKind.proxied) {
        expect(read.consumed).toBeLessThanOrEqual(cut.length);
      }
    }
  });
});

/** A small deterministic generator, so a failure replays. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}
