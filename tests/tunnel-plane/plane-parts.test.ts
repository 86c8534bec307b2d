/**
 * The tunnel plane's parts that need no tunnel: the original destination read from a real
 * conntrack table's lines (and several lookups sharing one read), the nftables table checked by
 * the kernel's own nft (`nft -c`, in a namespace of the test's), the WireGuard config text and
 * peer dump, the name sniffed from a ClientHello and a request head, which connections count as
 * encrypted DNS, and the device directory's clients.
 */
import { execFile } from "node:child_process";
import { connect as tlsConnect } from "node:tls";
import net from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ConntrackEvents,
  ConntrackTable,
  findOriginals,
} from "../../gateway/tunnel-plane/conntrack.ts";
import { tunnelRuleset } from "../../gateway/tunnel-plane/nftables.ts";
import {
  gatewayAddress,
  isWireguardKey,
  parsePeerDump,
  wireguardConfig,
} from "../../gateway/tunnel-plane/wireguard-config.ts";
import { nameIn } from "../../gateway/net/tunnel/sniff.ts";
import { isEncryptedDns } from "../../gateway/tunnel-plane/encrypted-dns.ts";
import { DeviceDirectory, deviceOptions } from "../../gateway/tunnel-plane/devices.ts";
import type { FeedTunnelDevice } from "../../shared/feed/models.ts";
import type { ProjectEntry } from "../../shared/routing/snapshot.ts";
import { Netns, netnsAvailable } from "../../testkit/netns.ts";

const exec = promisify(execFile);

const TABLE = [
  "ipv4     2 tcp      6 431999 ESTABLISHED src=10.66.0.2 dst=198.18.0.7 sport=41690 dport=443 " +
  "src=10.66.0.1 dst=10.66.0.2 sport=8082 dport=41690 [ASSURED] mark=0 zone=0 use=2",
  "ipv4     2 udp      17 29 src=10.66.0.2 dst=10.66.0.1 sport=41691 dport=53 src=10.66.0.1 " +
  "dst=10.66.0.2 sport=5353 dport=41691 mark=0 zone=0 use=2",
  "ipv4     2 tcp      6 431999 ESTABLISHED src=10.66.0.3 dst=93.184.215.14 sport=5000 " +
  "dport=8443 src=10.66.0.1 dst=10.66.0.3 sport=8082 dport=5000 [ASSURED] mark=0 zone=0 use=2",
  "ipv6     10 tcp      6 20 TIME_WAIT src=fd00::2 dst=fd00::1 sport=41690 dport=80 src=fd00::1 " +
  "dst=fd00::2 sport=80 dport=41690 [ASSURED] mark=0 zone=0 use=2",
].join("\n") + "\n";

describe("the original destination", () => {
  it("reads each connection's original tuple, TCP over IPv4 only", () => {
    const wanted = new Map([["10.66.0.2 41690", 1], ["10.66.0.3 5000", 1], ["10.66.0.2 41691", 1]]);
    expect(Object.fromEntries(findOriginals(TABLE, wanted))).toEqual({
      "10.66.0.2 41690": { address: "198.18.0.7", port: 443 },
      "10.66.0.3 5000": { address: "93.184.215.14", port: 8443 },
    });
  });

  it("answers lookups made together from one read, and undefined for one not there", async () => {
    let reads = 0;
    const table = new ConntrackTable(async () => {
      reads++;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return TABLE;
    });
    const found = await Promise.all([
      table.lookup("10.66.0.2", 41690),
      table.lookup("10.66.0.3", 5000),
      table.lookup("10.66.0.9", 1),
    ]);
    expect(found).toEqual([
      { address: "198.18.0.7", port: 443 },
      { address: "93.184.215.14", port: 8443 },
      undefined,
    ]);
    expect(reads).toBe(1);
    const unreadable = new ConntrackTable(() => Promise.reject(new Error("EACCES")));
    expect(await unreadable.lookup("10.66.0.2", 41690)).toBeUndefined();
  });
});

describe("the kernel's connection events", () => {
  const event = (sport: number, dst: string, dport: number) =>
    `    [NEW] tcp      6 120 SYN_SENT src=10.66.0.2 dst=${dst} sport=${sport} dport=${dport} ` +
    `[UNREPLIED] src=10.66.0.1 dst=10.66.0.2 sport=8082 dport=${sport}`;

  it("answer a lookup from the event that came first, or that comes while it waits", async () => {
    const fallback: string[] = [];
    const events = new ConntrackEvents({
      fallback: (address, port) => {
        fallback.push(`${address} ${port}`);
        return Promise.resolve(undefined);
      },
      waitMs: 200,
    });
    events.feed(event(40000, "198.18.0.7", 443));
    events.feed("conntrack v1.4.7 (conntrack-tools): 0 flow events have been shown.");
    expect(await events.lookup("10.66.0.2", 40000)).toEqual({ address: "198.18.0.7", port: 443 });
    const waiting = events.lookup("10.66.0.2", 40001);
    events.feed(event(40001, "198.18.0.9", 80));
    expect(await waiting).toEqual({ address: "198.18.0.9", port: 80 });
    expect(fallback).toEqual([]);
    expect(events.counts).toEqual({ events: 2, fallback: 0 });
  });

  it("ask the listing for a connection whose event did not come", async () => {
    const events = new ConntrackEvents({
      fallback: (address, port) =>
        Promise.resolve(
          findOriginals(TABLE, new Map([[`${address} ${port}`, 1]])).get(`${address} ${port}`),
        ),
      waitMs: 10,
    });
    expect(await events.lookup("10.66.0.3", 5000)).toEqual({
      address: "93.184.215.14",
      port: 8443,
    });
    expect(await events.lookup("10.66.0.3", 5001)).toBeUndefined();
    expect(events.counts).toEqual({ events: 0, fallback: 2 });
  });
});

describe("the nftables table", () => {
  let ns: Netns | undefined;
  let unavailable: string | undefined;

  beforeAll(async () => {
    unavailable = await netnsAvailable();
    if (unavailable === undefined) ns = await Netns.create("nft");
  });

  afterAll(async () => {
    await ns?.close();
  });

  it("is taken by the kernel's nft, applied twice over (a replace), and redirects what it says", async () => {
    if (unavailable !== undefined) throw new Error(`This machine cannot: ${unavailable}`);
    const rules = tunnelRuleset({ interface: "wgox0", dnsPort: 5353, transparentPort: 8082 });
    await ns!.exec("nft", ["-f", "-"], rules);
    await ns!.exec("nft", ["-f", "-"], rules);
    const listed = await ns!.exec("nft", ["list", "table", "inet", "octoprox_wgox0"]);
    expect(listed).toContain('iifname "wgox0" udp dport 53 redirect to :5353');
    expect(listed).toContain('iifname "wgox0" meta l4proto tcp redirect to :8082');
    expect(listed).toContain('iifname "wgox0" meta l4proto udp reject');
    expect(listed.match(/table inet/g)).toHaveLength(1);
  });
});

describe("the WireGuard endpoint's text", () => {
  const key = (fill: string) => `${fill.repeat(42)}A=`;
  const device = (overrides: Partial<FeedTunnelDevice> = {}): FeedTunnelDevice => ({
    id: "d1",
    project_id: "p1",
    protocol: "wireguard",
    name: "phone",
    address: "10.66.0.2",
    enabled: true,
    public_key: key("b"),
    preshared_key: key("c"),
    country: null,
    state: null,
    city: null,
    session_id: null,
    certificate_serial: null,
    ...overrides,
  });

  it("takes keys `wg genkey` makes and refuses anything else", async () => {
    const { stdout } = await exec("wg", ["genkey"]);
    expect(isWireguardKey(stdout.trim())).toBe(true);
    for (const bad of ["", "abc", `${"a".repeat(43)}=\n[Peer]`, `${"a".repeat(42)}B=`]) {
      expect(isWireguardKey(bad), bad).toBe(false);
    }
  });

  it("writes the identity and a peer per device, leaving out one whose key is not a key", () => {
    const identity = {
      private_key: key("a"),
      public_key: key("d"),
      subnet: "10.66.0.0/16",
      listen_port: 51820,
      mtu: 1420,
      persistent_keepalive_seconds: 25,
    };
    const text = wireguardConfig(identity, 51999, [
      device(),
      device({ id: "d2", address: "10.66.0.3", public_key: "not a key\n[Interface]" }),
    ]);
    expect(text).toBe(
      `[Interface]\nPrivateKey = ${key("a")}\nListenPort = 51999\n\n[Peer]\nPublicKey = ${
        key("b")
      }\nPresharedKey = ${key("c")}\nAllowedIPs = 10.66.0.2/32\n`,
    );
    expect(gatewayAddress("10.66.0.0/16")).toEqual({ address: "10.66.0.1", bits: 16 });
    expect(gatewayAddress("10.70.3.9/24")).toEqual({ address: "10.70.3.1", bits: 24 });
  });

  it("reads `wg show dump`'s peers", () => {
    const dump = `${key("a")}\t${key("d")}\t51820\toff\n` +
      `${key("b")}\t${key("c")}\t192.0.2.2:58686\t10.66.0.2/32\t1796551865\t180\t92\toff\n`;
    expect(parsePeerDump(dump)).toEqual([{
      publicKey: key("b"),
      latestHandshakeMs: 1796551865000,
      receivedBytes: 180,
      sentBytes: 92,
    }]);
  });
});

describe("the name in a connection's first bytes", () => {
  it("reads a real ClientHello's server name, more until it is whole", async () => {
    const hello = await firstBytes((port) =>
      tlsConnect({ host: "127.0.0.1", port, servername: "Shop.Example.test" }).on("error", () => {})
    );
    expect(nameIn(hello)).toBe("shop.example.test");
    expect(nameIn(hello.subarray(0, 20))).toBe("more");
  });

  it("reads an HTTP Host without its port, and nothing of other protocols", () => {
    const head = new TextEncoder().encode("GET / HTTP/1.1\r\nHost: News.Example:8080\r\n\r\n");
    expect(nameIn(head)).toBe("news.example");
    expect(nameIn(head.subarray(0, 10))).toBe("more");
    expect(nameIn(new TextEncoder().encode("SSH-2.0-OpenSSH_9.2\r\n"))).toBeUndefined();
    expect(nameIn(new TextEncoder().encode("GET / HTTP/1.1\r\n\r\n"))).toBeUndefined();
  });
});

describe("encrypted DNS", () => {
  it("is DNS over TLS on any host, and HTTPS to the well-known resolvers by name or address", () => {
    expect(isEncryptedDns("anything.example", 853)).toBe(true);
    expect(isEncryptedDns("dns.google", 443)).toBe(true);
    expect(isEncryptedDns("mozilla.cloudflare-dns.com", 443)).toBe(true);
    expect(isEncryptedDns("1.1.1.1", 443)).toBe(true);
    expect(isEncryptedDns("1.1.1.1", 80)).toBe(false);
    expect(isEncryptedDns("shop.example", 443)).toBe(false);
    expect(isEncryptedDns("notcloudflare-dns.com", 443)).toBe(false);
  });
});

describe("the device directory", () => {
  const entry = {
    id: "p1",
    username: "acme",
    connectTimeoutMs: 5000,
    maxRetries: 2,
  } as ProjectEntry;
  const projects = { project: (id: string) => (id === "p1" ? entry : undefined) };
  const base: FeedTunnelDevice = {
    id: "d1",
    project_id: "p1",
    protocol: "wireguard",
    name: "phone",
    address: "10.66.0.2",
    enabled: true,
    public_key: null,
    preshared_key: null,
    country: "DE",
    state: "BE",
    city: "berlin",
    session_id: "s1",
    certificate_serial: null,
  };

  it("admits an enabled device of a project it knows, with the device's options and id", () => {
    const directory = new DeviceDirectory(projects);
    directory.apply([
      base,
      { ...base, id: "d2", address: "10.66.0.3", enabled: false },
      { ...base, id: "d3", address: "10.66.0.4", project_id: "gone" },
      { ...base, id: "d4", address: "10.66.0.5", protocol: "openvpn" },
    ], new Set(["wireguard"]));
    const admitted = directory.admit("10.66.0.2");
    expect(admitted?.client).toMatchObject({
      projectId: "p1",
      deviceId: "d1",
      options: { user: "acme", country: "DE", state: "BE", city: "berlin", sessionId: "s1" },
      connectTimeoutMs: 5000,
      maxRetries: 2,
    });
    expect(directory.admit("10.66.0.2")?.client).toBe(admitted?.client);
    for (const address of ["10.66.0.3", "10.66.0.4", "10.66.0.5", "10.66.0.9"]) {
      expect(directory.admit(address), address).toBeUndefined();
    }
    expect(
      deviceOptions({ ...base, country: null, state: null, city: null, session_id: null }, "u"),
    )
      .toEqual({ user: "u" });
  });
});

/** The first bytes a client sends to a listener that never answers. */
function firstBytes(client: (port: number) => unknown): Promise<Uint8Array> {
  return new Promise((resolve) => {
    const server = net.createServer((socket) => {
      socket.once("data", (data) => {
        resolve(new Uint8Array(data));
        socket.destroy();
        server.close();
      });
    }).listen(0, "127.0.0.1", () => client((server.address() as net.AddressInfo).port));
  });
}
