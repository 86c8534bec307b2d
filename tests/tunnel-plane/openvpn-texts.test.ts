/**
 * The OpenVPN endpoint's texts: the management interface's client announcements read across
 * arbitrary splits, the verdicts written as the daemon takes them (a reason can never end the
 * command early), certificate serials compared in one form, and the addressing and server
 * config a gateway runs the daemon with. The daemon itself takes them in e2e/tunnels/openvpn.
 */
import { describe, expect, it } from "vitest";
import {
  admitCommand,
  type ClientRequest,
  denyCommand,
  ManagementReader,
  openvpnAddressing,
  openvpnServerConfig,
} from "../../gateway/tunnel-plane/openvpn-config.ts";
import { RestartBackoff } from "../../gateway/tunnel-plane/restart.ts";
import { certificateSerial } from "../../shared/tunnel-status.ts";

const ANNOUNCEMENT = [
  ">INFO:OpenVPN Management Interface Version 5 -- type 'help' for more info",
  ">CLIENT:CONNECT,7,1",
  ">CLIENT:ENV,common_name=4f1c2d3e-0000-4000-8000-000000000001",
  ">CLIENT:ENV,tls_serial_hex_0=0a:1b:2c",
  ">CLIENT:ENV,untrusted_ip=10.205.0.2",
  ">CLIENT:ENV,END",
  ">CLIENT:ESTABLISHED,7",
  ">CLIENT:ENV,common_name=4f1c2d3e-0000-4000-8000-000000000001",
  ">CLIENT:ENV,END",
  "SUCCESS: client-auth command succeeded",
  ">CLIENT:DISCONNECT,7",
  ">CLIENT:ENV,END",
  "",
].join("\r\n");

describe("the management reader", () => {
  it("hands on each announcement whole, however the bytes were split", () => {
    for (const size of [1, 3, 17, ANNOUNCEMENT.length]) {
      const requests: ClientRequest[] = [];
      const other: string[] = [];
      const reader = new ManagementReader((r) => requests.push(r), (line) => other.push(line));
      for (let at = 0; at < ANNOUNCEMENT.length; at += size) {
        reader.feed(ANNOUNCEMENT.slice(at, at + size));
      }
      expect(requests).toEqual([
        {
          event: "CONNECT",
          cid: "7",
          kid: "1",
          env: {
            common_name: "4f1c2d3e-0000-4000-8000-000000000001",
            tls_serial_hex_0: "0a:1b:2c",
            untrusted_ip: "10.205.0.2",
          },
        },
        {
          event: "ESTABLISHED",
          cid: "7",
          kid: "",
          env: { common_name: "4f1c2d3e-0000-4000-8000-000000000001" },
        },
        { event: "DISCONNECT", cid: "7", kid: "", env: {} },
      ]);
      expect(other).toEqual([
        ">INFO:OpenVPN Management Interface Version 5 -- type 'help' for more info",
        "SUCCESS: client-auth command succeeded",
      ]);
    }
  });

  it("ignores ENV lines with no announcement before them", () => {
    const requests: ClientRequest[] = [];
    const reader = new ManagementReader((r) => requests.push(r), () => {});
    reader.feed(">CLIENT:ENV,common_name=x\n>CLIENT:ENV,END\n");
    expect(requests).toEqual([]);
  });
});

describe("the verdicts", () => {
  it("admit with the device's address and the subnet's mask, in one block", () => {
    expect(admitCommand("7", "1", "10.67.0.2", "255.255.0.0")).toBe(
      "client-auth 7 1\nifconfig-push 10.67.0.2 255.255.0.0\nEND\n",
    );
  });

  it("refuse with a reason that cannot break out of its quotes or line", () => {
    expect(denyCommand("7", "1", 'not "it"\nclient-kill 3')).toBe(
      'client-deny 7 1 "not  it  client-kill 3"\n',
    );
  });
});

describe("certificate serials", () => {
  it("compare in one form: lower case, no separators, no leading zeros", () => {
    expect(certificateSerial("0A:1B:2C")).toBe("a1b2c");
    expect(certificateSerial("00a1b2c")).toBe("a1b2c");
    expect(certificateSerial("a1:b2:cz")).toBeUndefined();
    expect(certificateSerial("")).toBeUndefined();
  });
});

describe("the daemon's config", () => {
  const identity = {
    ca_certificate: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n",
    server_certificate: "-----BEGIN CERTIFICATE-----\nSERVER\n-----END CERTIFICATE-----",
    server_key: "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n",
    tls_crypt_key:
      "-----BEGIN OpenVPN Static key V1-----\nab\n-----END OpenVPN Static key V1-----\n",
    subnet: "10.67.0.0/16",
    transport: "udp",
    listen_port: 1194,
    mtu: 1500,
    keepalive_interval_seconds: 10,
    keepalive_timeout_seconds: 60,
  };

  it("puts the gateway on the subnet's first host, with the mask devices are pushed", () => {
    expect(openvpnAddressing("10.67.0.0/16")).toEqual({
      address: "10.67.0.1",
      netmask: "255.255.0.0",
    });
    expect(openvpnAddressing("10.67.8.0/21")).toEqual({
      address: "10.67.8.1",
      netmask: "255.255.248.0",
    });
  });

  it("serves on the transport and port given, and asks the gateway about every device", () => {
    const lines = (transport: string) =>
      openvpnServerConfig({ ...identity, transport }, {
        interface: "ovpn0",
        listenPort: 2194,
        managementPort: 41000,
      }).split("\n");
    const udp = lines("udp");
    for (
      const line of [
        "dev ovpn0",
        "proto udp",
        "port 2194",
        "ifconfig 10.67.0.1 255.255.0.0",
        'push "redirect-gateway def1"',
        'push "dhcp-option DNS 10.67.0.1"',
        "keepalive 10 60",
        "management 127.0.0.1 41000",
        "management-client",
        "management-client-auth",
        "remote-cert-tls client",
      ]
    ) expect(udp).toContain(line);
    expect(udp).toContain("explicit-exit-notify 1");
    expect(lines("tcp")).toContain("proto tcp-server");
    // TCP clients see their connection close; the option is UDP's alone.
    expect(lines("tcp")).not.toContain("explicit-exit-notify 1");
    // Inline blocks, each whole on its own lines.
    const text = udp.join("\n");
    expect(text).toContain(
      "<cert>\n-----BEGIN CERTIFICATE-----\nSERVER\n-----END CERTIFICATE-----\n</cert>",
    );
    expect(text).toContain("<tls-crypt>\n-----BEGIN OpenVPN Static key V1-----\nab\n");
  });
});

describe("a supervised tunnel program's restarts", () => {
  it("wait 5 s, doubling to 60 s, and 5 s again once it ran", () => {
    const backoff = new RestartBackoff();
    expect(Array.from({ length: 6 }, () => backoff.advance())).toEqual([
      5_000,
      10_000,
      20_000,
      40_000,
      60_000,
      60_000,
    ]);
    backoff.reset();
    expect(backoff.nextMs).toBe(5_000);
  });
});
