/**
 * A project's interception bypass list (shared/tls/bypass.ts): what an entry is stored as, what
 * is refused and why, and which tunnel hosts a list keeps raw: exact names, names under a
 * `.suffix` (not the bare name), IP addresses exactly, any case, a root dot ignored.
 */
import { describe, expect, it } from "vitest";
import {
  BYPASS_MAX_NAME_CHARS,
  bypassIndex,
  BypassMessage,
  isBypassed,
  readBypassEntry,
} from "../../shared/tls/bypass.ts";

describe("a bypass entry", () => {
  it.each([
    ["example.com", "example.com"],
    ["  Bank.EXAMPLE.com. ", "bank.example.com"],
    [".Example.com", ".example.com"],
    [".example.com.", ".example.com"],
    ["_dmarc.example.com", "_dmarc.example.com"],
    ["localhost", "localhost"],
    ["bücher.example", "xn--bcher-kva.example"],
    [".BÜCHER.example", ".xn--bcher-kva.example"],
    ["xn--bcher-kva.example", "xn--bcher-kva.example"],
    ["203.0.113.9", "203.0.113.9"],
    ["127.1", "127.0.0.1"],
    ["2001:DB8:0:0::1", "2001:db8::1"],
    ["[2001:db8::1]", "2001:db8::1"],
    ["::ffff:192.0.2.1", "::ffff:c000:201"],
  ])("%s is stored as %s", (raw, entry) => {
    expect(readBypassEntry(raw)).toEqual({ ok: true, entry });
  });

  it.each([
    ["", BypassMessage.empty],
    ["  ", BypassMessage.empty],
    [".", BypassMessage.empty],
    ["*.example.com", BypassMessage.wildcard],
    ["ex*ample.com", BypassMessage.wildcard],
    ["*", BypassMessage.wildcard],
    ["example.com:443", BypassMessage.port],
    [".example.com:8443", BypassMessage.port],
    ["203.0.113.9:443", BypassMessage.port],
    ["[2001:db8::1]:443", BypassMessage.port],
    [".203.0.113.9", BypassMessage.suffixOfAddress],
    [".2001:db8::1", BypassMessage.suffixOfAddress],
    ["..example.com", BypassMessage.label],
    ["a..example.com", BypassMessage.label],
    [`${"a".repeat(64)}.example`, BypassMessage.label],
    [`${"a.".repeat(127)}ab`, BypassMessage.length],
    ["example.com/path", BypassMessage.shape],
    ["user@example.com", BypassMessage.shape],
    ["exa mple.com", BypassMessage.shape],
    ["example.123", BypassMessage.shape],
    ["999.1.1.1", BypassMessage.shape],
    ["fe80::1%eth0", BypassMessage.shape],
    ["https://example.com", BypassMessage.shape],
  ])("%j is refused: %s", (raw, message) => {
    expect(readBypassEntry(raw)).toEqual({ ok: false, message });
  });

  it(`takes a name of ${BYPASS_MAX_NAME_CHARS} characters, and a suffix of as many`, () => {
    const name = `${"a".repeat(61)}.${"b".repeat(61)}.${"c".repeat(61)}.${"d".repeat(61)}.ex`;
    expect(name.length).toBe(BYPASS_MAX_NAME_CHARS - 3);
    expect(readBypassEntry(`x.${name}`)).toEqual({ ok: true, entry: `x.${name}` });
    expect(readBypassEntry(`.${name}`)).toEqual({ ok: true, entry: `.${name}` });
  });
});

describe("isBypassed", () => {
  const list = Object.freeze([
    "pinned.example",
    ".bank.example",
    "203.0.113.9",
    "2001:db8::1",
    "xn--bcher-kva.example",
  ]);

  it.each([
    ["pinned.example", true],
    ["PINNED.Example.", true],
    ["www.pinned.example", false],
    ["bank.example", false],
    ["www.bank.example", true],
    ["a.b.BANK.example", true],
    ["notbank.example", false],
    ["bank.example.evil", false],
    ["203.0.113.9", true],
    ["203.0.113.10", false],
    ["3405803785", true],
    ["[2001:db8::1]", true],
    ["2001:0db8:0000::0001", true],
    ["2001:db8::2", false],
    ["::ffff:203.0.113.9", false],
    ["bücher.example", true],
    ["xn--bcher-kva.example", true],
    ["example.com", false],
    ["", false],
  ])("%s: %s", (host, bypassed) => {
    expect(isBypassed(list, host)).toBe(bypassed);
  });

  it("bypasses nothing with an empty list", () => {
    expect(isBypassed([], "pinned.example")).toBe(false);
  });

  it("indexes a list once, by its identity, and skips entries that do not read", () => {
    const stored = Object.freeze(["a.example", ".b.example", "*.bad", "c.example:1"]);
    const index = bypassIndex(stored);
    expect(bypassIndex(stored)).toBe(index);
    expect([...index.names]).toEqual(["a.example"]);
    expect([...index.suffixes]).toEqual(["b.example"]);
    // An entry of another form (a feed of another release) is read as the api would store it.
    expect(isBypassed(["Pinned.Example."], "pinned.example")).toBe(true);
  });
});
