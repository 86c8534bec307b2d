/**
 * The DNS wire format as the tunnel resolver reads and writes it: a query's question read back
 * whatever its case, compression pointers followed and their loops caught, malformed queries
 * refused with a reason rather than thrown, and answers laid out at the RFC's offsets (a real
 * stub reads them in tests/tunnel-plane/dns-server.test.ts).
 */
import { describe, expect, it } from "vitest";
import { DnsRcode, isHostName, readQuery, writeAnswer } from "../../shared/dns/message.ts";

function query(name: string, type = 1, options: { id?: number; flags?: number; qd?: number } = {}) {
  const labels = name === "" ? [] : name.split(".");
  const nameBytes = labels.flatMap((label) => [label.length, ...Buffer.from(label, "latin1")]);
  const bytes = Buffer.alloc(12 + nameBytes.length + 1 + 4);
  bytes.writeUInt16BE(options.id ?? 0x1234, 0);
  bytes.writeUInt16BE(options.flags ?? 0x0100, 2);
  bytes.writeUInt16BE(options.qd ?? 1, 4);
  Buffer.from(nameBytes).copy(bytes, 12);
  const end = 12 + nameBytes.length + 1;
  bytes.writeUInt16BE(type, end);
  bytes.writeUInt16BE(1, end + 2);
  return new Uint8Array(bytes);
}

describe("reading a query", () => {
  it("reads the id, flags and question, the name in lower case", () => {
    const read = readQuery(query("WWW.Example.COM", 28, { id: 7 }));
    expect(read).toMatchObject({
      ok: true,
      header: { id: 7, flags: 0x0100, questions: 1 },
      question: { name: "www.example.com", type: 28, class: 1 },
    });
  });

  it("reads the root as the empty name", () => {
    expect(readQuery(query(""))).toMatchObject({ ok: true, question: { name: "" } });
  });

  it("follows a compression pointer and stops at a loop", () => {
    // Header, then a question whose name is a pointer to itself.
    const looped = new Uint8Array([0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1]);
    expect(readQuery(looped)).toMatchObject({ ok: false, reason: "too many compression pointers" });
    // A pointer into the message that leads to a real name.
    const pointed = new Uint8Array([
      0,
      2,
      1,
      0,
      0,
      1,
      0,
      0,
      0,
      0,
      0,
      0,
      0xc0,
      18,
      0,
      1,
      0,
      1,
      1,
      0x61,
      2,
      0x62,
      0x63,
      0,
    ]);
    expect(readQuery(pointed)).toMatchObject({ ok: true, question: { name: "a.bc", type: 1 } });
  });

  it("refuses what is not one well-formed question, keeping the header to answer", () => {
    expect(readQuery(new Uint8Array(5))).toEqual({ ok: false, reason: "shorter than a header" });
    expect(readQuery(query("a.example", 1, { qd: 2 }))).toMatchObject({
      ok: false,
      header: { id: 0x1234 },
      reason: "not one question",
    });
    const cut = query("a.example").subarray(0, 20);
    expect(readQuery(cut)).toMatchObject({ ok: false, reason: "label runs past the message" });
    const long = query(`${"a".repeat(64)}.example`);
    expect(readQuery(long)).toMatchObject({ ok: false, reason: "reserved label type" });
    const huge = query(Array.from({ length: 5 }, () => "b".repeat(60)).join("."));
    expect(readQuery(huge)).toMatchObject({ ok: false, reason: "name longer than 255 bytes" });
  });
});

describe("writing an answer", () => {
  it("answers an A record for the question's name, echoing id, question, opcode and RD", () => {
    const asked = readQuery(query("shop.example", 1, { id: 0xbeef }));
    if (!asked.ok) throw new Error(asked.reason);
    const bytes = Buffer.from(writeAnswer({
      id: asked.header.id,
      queryFlags: asked.header.flags,
      rcode: DnsRcode.noError,
      questionBytes: asked.questionBytes,
      a: { address: (198 << 24 >>> 0) + (18 << 16) + 5, ttlSeconds: 1 },
    }));
    expect(bytes.readUInt16BE(0)).toBe(0xbeef);
    expect(bytes.readUInt16BE(2)).toBe(0x8000 | 0x0400 | 0x0100 | 0x0080);
    expect([bytes.readUInt16BE(4), bytes.readUInt16BE(6)]).toEqual([1, 1]);
    const answerAt = 12 + asked.questionBytes.length;
    expect(bytes.subarray(12, answerAt)).toEqual(Buffer.from(asked.questionBytes));
    expect(bytes.readUInt16BE(answerAt)).toBe(0xc00c);
    expect(bytes.readUInt32BE(answerAt + 6)).toBe(1);
    expect([...bytes.subarray(answerAt + 12, answerAt + 16)]).toEqual([198, 18, 0, 5]);
  });

  it("answers a malformed query with its id and FORMERR, and no question", () => {
    const bytes = Buffer.from(writeAnswer({ id: 9, queryFlags: 0x0100, rcode: DnsRcode.formErr }));
    expect(bytes.length).toBe(12);
    expect(bytes.readUInt16BE(2) & 0xf).toBe(1);
    expect(bytes.readUInt16BE(4)).toBe(0);
  });
});

describe("names a tunnel can connect to", () => {
  it("takes host names and refuses the rest", () => {
    for (
      const name of ["example.com", "a", "_dmarc.example.org", "xn--bcher-kva.example", "1.2.3.4"]
    ) {
      expect(isHostName(name), name).toBe(true);
    }
    for (
      const name of [
        "",
        "a..b",
        "-a.example",
        "a-.example",
        "a b.example",
        "a/b",
        "ex\u00e4mple.com",
      ]
    ) {
      expect(isHostName(name), name).toBe(false);
    }
  });
});
