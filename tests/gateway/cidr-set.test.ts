/**
 * Client address rules (shared/net/cidr-set.ts): IPv4-mapped addresses and blocks read as IPv4,
 * the most specific block winning, masked network names, and what counts as open to anyone.
 */
import { describe, expect, it } from "vitest";
import {
  CidrSet,
  CidrTable,
  clientIp,
  coversFamily,
  formatCidr,
  openToAnyone,
  parseCidrs,
} from "../../shared/net/cidr-set.ts";
import { parseCidr } from "../../shared/net/ip.ts";

const ip = (text: string) => {
  const parsed = clientIp(text);
  if (parsed === undefined) throw new Error(`not an address: ${text}`);
  return parsed;
};
const set = (...texts: string[]) => CidrSet.parse(texts);

describe("matching a client's address", () => {
  it("reads an IPv4-mapped address as IPv4, against IPv4 blocks", () => {
    expect(clientIp("::ffff:127.0.0.5")).toEqual({ family: 4, value: 0x7f000005 });
    expect(clientIp("::FFFF:7f00:5")).toEqual({ family: 4, value: 0x7f000005 });
    const allowed = set("127.0.0.5/32", "10.0.0.0/8");
    expect(allowed.has(ip("::ffff:127.0.0.5"))).toBe(true);
    expect(allowed.has(ip("127.0.0.5"))).toBe(true);
    expect(allowed.has(ip("::ffff:10.200.0.1"))).toBe(true);
    expect(allowed.has(ip("127.0.0.6"))).toBe(false);
    expect(allowed.has(ip("::ffff:127.0.0.6"))).toBe(false);
  });

  it("reads a block inside ::ffff:0:0/96 as the IPv4 block it names", () => {
    const allowed = set("::ffff:10.0.0.0/104", "::ffff:192.0.2.1");
    expect(allowed.has(ip("10.1.2.3"))).toBe(true);
    expect(allowed.has(ip("192.0.2.1"))).toBe(true);
    expect(allowed.has(ip("192.0.2.2"))).toBe(false);
    expect(allowed.has(ip("11.0.0.1"))).toBe(false);
  });

  it("lets an IPv6 block such as ::/0 cover IPv6 clients only", () => {
    const allowed = set("::/0");
    expect(allowed.has(ip("2001:db8::1"))).toBe(true);
    expect(allowed.has(ip("::1"))).toBe(true);
    expect(allowed.has(ip("203.0.113.9"))).toBe(false);
    expect(allowed.has(ip("::ffff:203.0.113.9"))).toBe(false);
    expect(set("2001:db8::/32").has(ip("2001:db9::1"))).toBe(false);
    expect(set("2001:db8:8000::/33").has(ip("2001:db8:8000::1"))).toBe(true);
    expect(set("2001:db8:8000::/33").has(ip("2001:db8:7fff::1"))).toBe(false);
  });

  it("ignores host bits, and covers every prefix length from 0 to the full address", () => {
    expect(set("10.9.9.9/8").has(ip("10.0.0.1"))).toBe(true);
    expect(set("0.0.0.0/0").has(ip("255.255.255.255"))).toBe(true);
    expect(set("198.51.100.1/31").has(ip("198.51.100.0"))).toBe(true);
    expect(set("198.51.100.1/31").has(ip("198.51.100.2"))).toBe(false);
    expect(set("2001:db8::1/128").has(ip("2001:db8::1"))).toBe(true);
    expect(set("2001:db8::1/128").has(ip("2001:db8::2"))).toBe(false);
    expect(set("2001:db8::1/127").has(ip("2001:db8::0"))).toBe(true);
  });

  it("is empty when given nothing, and refuses a text that is no block", () => {
    expect(set().has(ip("127.0.0.1"))).toBe(false);
    expect(() => set("10.0.0.0/33")).toThrow(/Bad CIDR/);
    const bad: string[] = [];
    expect(parseCidrs(["10.0.0.0/8", "nonsense", "::/129"], (text) => bad.push(text)))
      .toHaveLength(1);
    expect(bad).toEqual(["nonsense", "::/129"]);
  });
});

describe("the most specific block", () => {
  it("wins, with every value listed under it", () => {
    const table = new CidrTable<string>();
    table.add(parseCidr("10.0.0.0/8"), "wide");
    table.add(parseCidr("10.1.0.0/16"), "narrow");
    table.add(parseCidr("10.1.2.0/24"), "a");
    table.add(parseCidr("10.1.2.99/24"), "b");
    table.add(parseCidr("::ffff:10.1.2.0/120"), "b");
    expect(table.match(ip("10.1.2.3"))).toEqual({ bits: 24, values: ["a", "b"] });
    expect(table.match(ip("10.1.3.3"))).toEqual({ bits: 16, values: ["narrow"] });
    expect(table.match(ip("10.2.0.1"))).toEqual({ bits: 8, values: ["wide"] });
    expect(table.match(ip("11.0.0.1"))).toBeUndefined();
    expect(table.match(ip("2001:db8::1"))).toBeUndefined();
  });
});

describe("network names", () => {
  it("are masked and canonical, so equal networks read the same", () => {
    expect(formatCidr(parseCidr("10.1.2.3/8"))).toBe("10.0.0.0/8");
    expect(formatCidr(parseCidr("::ffff:10.1.2.3/104"))).toBe("10.0.0.0/8");
    expect(formatCidr(parseCidr("0.0.0.0/0"))).toBe("0.0.0.0/0");
    expect(formatCidr(parseCidr("203.0.113.7"))).toBe("203.0.113.7/32");
    expect(formatCidr(parseCidr("2001:DB8:1:2::9/33"))).toBe("2001:db8::/33");
    expect(formatCidr(parseCidr("::/0"))).toBe("::/0");
    expect(formatCidr(parseCidr("2001:db8::1"))).toBe("2001:db8::1/128");
  });
});

describe("open to anyone", () => {
  const cidrs = (...texts: string[]) => texts.map((text) => parseCidr(text));

  it("is a family covered whole, by one block or several", () => {
    expect(coversFamily(cidrs("0.0.0.0/0"), 4)).toBe(true);
    expect(coversFamily(cidrs("0.0.0.0/1", "128.0.0.0/1"), 4)).toBe(true);
    expect(coversFamily(cidrs("128.0.0.0/1", "0.0.0.0/2", "64.0.0.0/2"), 4)).toBe(true);
    expect(coversFamily(cidrs("0.0.0.0/1", "128.0.0.0/2"), 4)).toBe(false);
    expect(coversFamily(cidrs("::ffff:0:0/96"), 4)).toBe(true);
    expect(coversFamily(cidrs("::/0"), 4)).toBe(false);
    expect(coversFamily(cidrs("::/0"), 6)).toBe(true);
    expect(coversFamily(cidrs("::/1", "8000::/1"), 6)).toBe(true);
    expect(coversFamily(cidrs("::/1"), 6)).toBe(false);
    expect(coversFamily([], 4)).toBe(false);
  });

  it("holds when the password-less blocks cover a family the allowed ones let in whole", () => {
    expect(openToAnyone(cidrs("0.0.0.0/0"), undefined)).toBe(true);
    expect(openToAnyone(cidrs("::/0"), undefined)).toBe(true);
    expect(openToAnyone(cidrs("0.0.0.0/0"), cidrs("0.0.0.0/0"))).toBe(true);
    // An allowed list narrows who gets in at all: then not anyone.
    expect(openToAnyone(cidrs("0.0.0.0/0"), cidrs("10.0.0.0/8"))).toBe(false);
    expect(openToAnyone(cidrs("0.0.0.0/0"), cidrs("::/0"))).toBe(false);
    // An allowed list whose blocks all failed to parse lets nobody in.
    expect(openToAnyone(cidrs("0.0.0.0/0"), [])).toBe(false);
    expect(openToAnyone(cidrs("10.0.0.0/8", "192.168.0.0/16"), undefined)).toBe(false);
    expect(openToAnyone([], undefined)).toBe(false);
  });
});
