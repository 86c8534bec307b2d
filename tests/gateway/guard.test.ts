/** The destination guard: internal addresses refused by literal and by resolution, unless allowed. */
import { describe, expect, it } from "vitest";
import { createDestinationGuard } from "../../shared/routing/destination-guard.ts";
import { parseCidr, parseIPv4, parseIPv6 } from "../../shared/net/ip.ts";

const check = (host: string, options: Parameters<typeof createDestinationGuard>[0] = {}) =>
  createDestinationGuard(options).check({ host, port: 443 });

describe("address parsing", () => {
  it.each([
    ["127.0.0.1", 0x7f000001],
    ["127.1", 0x7f000001],
    ["0x7f.0.0.1", 0x7f000001],
    ["0177.0.0.1", 0x7f000001],
    ["2130706433", 0x7f000001],
    ["10.1.258", 0x0a010102],
    ["255.255.255.255", 0xffffffff],
  ])("%s reads as inet_aton reads it", (text, value) => expect(parseIPv4(text)).toBe(value));

  it.each(["example.com", "1.2.3.4.5", "256.0.0.1", "08.0.0.1", "1..1", "", "4294967296"])(
    "%s is no IPv4 literal",
    (text) => expect(parseIPv4(text)).toBeUndefined(),
  );

  it.each([
    ["::1", [0, 0, 0, 0, 0, 0, 0, 1]],
    ["::", [0, 0, 0, 0, 0, 0, 0, 0]],
    ["fe80::1%eth0", [0xfe80, 0, 0, 0, 0, 0, 0, 1]],
    ["[2001:db8::1]", [0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]],
    ["::ffff:10.0.0.1", [0, 0, 0, 0, 0, 0xffff, 0x0a00, 1]],
    ["1:2:3:4:5:6:7:8", [1, 2, 3, 4, 5, 6, 7, 8]],
  ])("%s reads as IPv6", (text, words) => expect(parseIPv6(text)).toEqual(words));

  it.each(["1:2:3", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "::1.2.3"])(
    "%s is no IPv6 literal",
    (text) => expect(parseIPv6(text)).toBeUndefined(),
  );

  it("refuses a bad CIDR", () => {
    expect(() => parseCidr("127.0.0.0/33")).toThrow();
    expect(() => parseCidr("example.com/8")).toThrow();
    expect(parseCidr("127.0.0.0/8")).toEqual({ family: 4, value: 0x7f000000, bits: 8 });
  });
});

describe("destination guard", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.1", "loopback"],
    ["2130706433", "loopback"],
    ["::1", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["fc00::1", "private"],
    ["fd12:3456::1", "private"],
    ["169.254.1.1", "link-local"],
    ["fe80::1", "link-local"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["100.64.0.1", "shared (carrier-grade NAT)"],
    ["169.254.169.254", "cloud metadata"],
    ["fd00:ec2::254", "cloud metadata"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:169.254.169.254", "cloud metadata"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:0:192.168.0.1", "private"],
    ["64:ff9b::10.0.0.1", "private"],
    ["2002:c0a8:0101::1", "private"],
    ["[::1]", "loopback"],
    ["224.0.0.1", "multicast"],
  ])("refuses the literal %s (%s)", async (host, kind) => {
    const refusal = await check(host);
    expect(refusal).toMatchObject({ status: 403, proxyStatus: "destination_ip_prohibited" });
    expect(refusal?.reason).toMatch(
      new RegExp(`^Destination not allowed: .* an? ${kind.replace(/[()]/g, "\\$&")} address$`),
    );
  });

  it.each([
    "8.8.8.8",
    "172.32.0.1",
    "100.128.0.1",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8",
    "example.com",
  ])(
    "lets %s through",
    async (host) => expect(await check(host)).toBeUndefined(),
  );

  it("names the host and the address it resolved to", async () => {
    const refusal = await check("internal.example", {
      resolve: () => Promise.resolve(["93.184.216.34", "10.0.0.7"]),
    });
    expect(refusal?.reason).toBe(
      "Destination not allowed: internal.example resolves to 10.0.0.7, a private address",
    );
    expect(await check("public.example", { resolve: () => Promise.resolve(["93.184.216.34"]) }))
      .toBeUndefined();
  });

  it("refuses a name resolving to an IPv4-mapped internal address", async () => {
    const refusal = await check("mapped.example", {
      resolve: () => Promise.resolve(["::ffff:127.0.0.1"]),
    });
    expect(refusal?.status).toBe(403);
  });

  it("lets a name through when it does not resolve here (the upstream resolves names)", async () => {
    const failing = () => Promise.reject(new Error("NXDOMAIN"));
    expect(await check("only-upstream-knows.example", { resolve: failing })).toBeUndefined();
  });

  it("takes localhost names as loopback without a lookup", async () => {
    let lookups = 0;
    const resolve = () => {
      lookups++;
      return Promise.resolve(["93.184.216.34"]);
    };
    expect((await check("localhost", { resolve }))?.status).toBe(403);
    expect((await check("api.localhost.", { resolve }))?.status).toBe(403);
    expect(lookups).toBe(0);
    expect(await check("localhost", { allowCidrs: ["127.0.0.0/8"] })).toBeUndefined();
  });

  it("an allow-listed CIDR lets its addresses through, in every form, and nothing else", async () => {
    const options = {
      allowCidrs: ["127.0.0.0/8", "fd00::/8"],
      resolve: () => Promise.resolve(["127.0.0.5"]),
    };
    expect(await check("127.0.0.1", options)).toBeUndefined();
    expect(await check("::ffff:127.0.0.1", options)).toBeUndefined();
    expect(await check("origin.test", options)).toBeUndefined();
    expect(await check("fd00::1", options)).toBeUndefined();
    expect((await check("::1", options))?.status).toBe(403);
    expect((await check("10.0.0.1", options))?.status).toBe(403);
  });

  it("caches a name's verdict and shares one lookup between concurrent checks", async () => {
    let lookups = 0;
    let now = 0;
    const guard = createDestinationGuard({
      resolve: () => {
        lookups++;
        return Promise.resolve(["10.0.0.1"]);
      },
      cacheMs: 1000,
      nowMs: () => now,
    });
    const t = { host: "cached.example", port: 80 };
    const [a, b] = await Promise.all([guard.check(t), guard.check(t)]);
    expect(a?.status).toBe(403);
    expect(b?.status).toBe(403);
    expect((await guard.check(t))?.status).toBe(403);
    expect(lookups).toBe(1);
    now = 2000;
    await guard.check(t);
    expect(lookups).toBe(2);
  });

  it("refuses a bad allow-list CIDR at construction", () => {
    expect(() => createDestinationGuard({ allowCidrs: ["10.0.0.0/40"] })).toThrow(/Bad CIDR/);
  });
});
