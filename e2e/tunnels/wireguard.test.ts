/**
 * A WireGuard device end to end, in namespaces this file makes (testkit/netns.ts), so nothing
 * leaves the machine: the control plane (role all) and a gateway with the WireGuard endpoint in
 * the test's namespace; the project's two tinyproxy exits (10.204.0.2 in DE, .3 in FR) in an
 * upstream namespace whose hosts file is the only place the origin's name resolves; the device in
 * a namespace of its own, joined to the gateway only by a veth pair its tunnel runs over.
 *
 * - the device, brought up from the `.conf` the API hands out, resolves the origin's name
 *   through the gateway (a fake address) and reaches the origin over HTTP and HTTPS through the
 *   project's exits, as the origin sees; the API then shows it online, seen at its handshake,
 *   and its history shows what its connections carried;
 * - a device with `country: DE` leaves through the DE exit only;
 * - UDP other than DNS is refused at once (ICMP), and an AAAA query answers empty;
 * - DNS over HTTPS to a well-known resolver is closed, and counted for the device;
 * - disabling the device cuts its open connection and refuses new ones within a feed publish;
 * - a gateway restarted on the same interface serves the device again, with no step of the
 *   device's.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../testkit/cluster.ts";
import { EXITS, GATEWAY_ADDRESS, ORIGIN_NAME, TunnelBed } from "../../testkit/tunnel-bed.ts";
import type { WireguardDevice } from "../../testkit/wireguard-device.ts";

let bed: TunnelBed;
let gateway: Gateway;
let deviceId: string;
let device: WireguardDevice;

beforeAll(async () => {
  // Statuses published and read every second, so the device's sighting shows within the test.
  bed = await TunnelBed.start({ statusIntervalSeconds: 1 });
  gateway = await bed.startGateway();
  ({ id: deviceId, device } = await bed.addDevice({ name: "laptop" }));
}, 180_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") bed.cluster.dump();
});

afterAll(async () => {
  await bed?.close();
});

async function exitSeen(): Promise<string> {
  const body = await bed.curl(`http://${ORIGIN_NAME}:${bed.origin.port}/ip`);
  return JSON.parse(body).ip;
}

describe("a WireGuard device", () => {
  it("reaches the origin by its name through the project's exits, over HTTP and HTTPS", async () => {
    const resolved = (await bed.devices.exec("getent", ["ahostsv4", ORIGIN_NAME])).split(/\s+/)[0];
    expect(resolved).toMatch(/^198\.1[89]\.\d+\.\d+$/);
    const seen = new Set<string>();
    await bed.cluster.until(async () => {
      seen.add(await exitSeen().catch(() => "failed"));
      return EXITS.every((exit) => seen.has(exit));
    }, { timeoutMs: 30_000, message: "the device's requests to leave through both exits" });
    expect([...seen].filter((exit) => !EXITS.includes(exit))).toEqual(
      seen.has("failed") ? ["failed"] : [],
    );
    const tls = JSON.parse(
      await bed.curl(`https://${ORIGIN_NAME}:${bed.tlsOrigin.port}/ip`, ["--insecure"]),
    );
    expect(EXITS).toContain(tls.ip);
    const handshake = await device.latestHandshake();
    expect(handshake).toBeGreaterThan(0);
    // The gateway's status and tunnel_last_seen bring the handshake to the API.
    const shown = await bed.cluster.until(async () => {
      const answer = await bed.cluster.request(
        "GET",
        `/api/v1/projects/${bed.projectId}/wireguard/peers/${deviceId}`,
      );
      return answer.body.online === true ? answer.body : undefined;
    }, { message: "the device to show online" });
    expect(Date.parse(shown.last_seen_at)).toBeGreaterThanOrEqual((handshake - 1) * 1000);
    // Metered in the device's own window: its history's last bucket holds the live counts once
    // the gateway's metering sent them (every 5 s).
    type Point = { requests: number; bytes_received: number };
    const used = await bed.cluster.until(async () => {
      const history = await bed.cluster.request(
        "GET",
        `/api/v1/projects/${bed.projectId}/wireguard/peers/${deviceId}/metrics/history?range=1h`,
      );
      const points: Point[] = history.body.points ?? [];
      const sum = (field: keyof Point) => points.reduce((n, p) => n + p[field], 0);
      return sum("requests") >= 3 && sum("bytes_received") > 0 ? sum : undefined;
    }, { timeoutMs: 30_000, message: "the device's history to show its connections" });
    expect(used("bytes_received")).toBeGreaterThan(0);
    expect(
      await gateway.metric(
        'octoprox_gateway_requests_total{kind="device",outcome="relayed",status="200"}',
      ),
    ).toBeGreaterThanOrEqual(3);
  });

  it("with country DE, leaves through the DE exit only", async () => {
    const edited = await bed.cluster.request(
      "PATCH",
      `/api/v1/projects/${bed.projectId}/wireguard/peers/${deviceId}`,
      { country: "de" },
    );
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    expect(edited.body.country).toBe("DE");
    // Until the feed carries the edit, a request may still leave through FR.
    await bed.cluster.until(async () => (await exitSeen()) === EXITS[0], {
      message: "the device's country to reach the gateway",
    });
    for (let i = 0; i < 6; i++) expect(await exitSeen()).toBe(EXITS[0]);
  });

  it("has UDP other than DNS refused at once, and AAAA answered empty", async () => {
    const script = [
      "import socket",
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)",
      "s.settimeout(3)",
      `s.connect(("${GATEWAY_ADDRESS}", 9))`,
      "s.send(b'x')",
      "try:",
      "    s.recv(10)",
      "    print('answered')",
      "except ConnectionRefusedError:",
      "    print('refused')",
      "except socket.timeout:",
      "    print('timeout')",
    ].join("\n");
    expect((await bed.devices.exec("python3", ["-c", script])).trim()).toBe("refused");
    // Asked for IPv6 alone (no IPv4-mapped answers): the resolver answers AAAA empty.
    const aaaa = [
      "import socket",
      "try:",
      `    print(socket.getaddrinfo("${ORIGIN_NAME}", 80, socket.AF_INET6))`,
      "except socket.gaierror as error:",
      "    print('no address', error.errno == socket.EAI_NODATA or error.errno == socket.EAI_NONAME)",
    ].join("\n");
    expect((await bed.devices.exec("python3", ["-c", aaaa])).trim()).toBe("no address True");
  });

  it("has DNS over HTTPS to a well-known resolver closed, counted for the device", async () => {
    const shown = await bed.cluster.request(
      "GET",
      `/api/v1/projects/${bed.projectId}/wireguard/peers/${deviceId}`,
    );
    const series = "octoprox_gateway_tunnel_device_encrypted_dns_closed_total" +
      `{device="${deviceId}",address="${shown.body.address}"}`;
    const before = await gateway.metric(series);
    // dns.google resolves to a fake address like any name; the connection to it is closed.
    await expect(bed.curl("https://dns.google/dns-query", ["--max-time", "5"])).rejects.toThrow();
    expect(await gateway.metric(series)).toBe(before + 1);
    // And in the device's own usage, once the gateway's metering sent it (every 5 s).
    await bed.cluster.until(
      async () =>
        (await bed.cluster.request(
          "GET",
          `/api/v1/projects/${bed.projectId}/wireguard/peers/${deviceId}`,
        )).body.usage.encrypted_dns_closed === shown.body.usage.encrypted_dns_closed + 1,
      { timeoutMs: 30_000, message: "the device's usage to count the encrypted DNS closed" },
    );
  });

  it("is cut, its open connection too, when disabled, and served again once enabled", async () => {
    const slow = bed.devices.exec("curl", [
      "-sS",
      "--max-time",
      "30",
      `http://${ORIGIN_NAME}:${bed.origin.port}/slow?chunks=100&delayMs=200`,
    ]).then(() => "finished", () => "cut");
    // The transfer is under way through the gateway before the device is disabled.
    await bed.cluster.until(
      async () => (await gateway.metric("octoprox_gateway_tunnels_open")) >= 1,
      { message: "the slow transfer to be open" },
    );
    const startedMs = Date.now();
    const disabled = await bed.cluster.request(
      "PATCH",
      `/api/v1/projects/${bed.projectId}/wireguard/peers/${deviceId}`,
      { enabled: false },
    );
    expect(disabled.status).toBe(200);
    expect(await slow).toBe("cut");
    expect(Date.now() - startedMs).toBeLessThan(10_000);
    await expect(bed.curl(`http://${ORIGIN_NAME}:${bed.origin.port}/ip`, ["--max-time", "3"]))
      .rejects.toThrow();

    const enabled = await bed.cluster.request(
      "PATCH",
      `/api/v1/projects/${bed.projectId}/wireguard/peers/${deviceId}`,
      { enabled: true },
    );
    expect(enabled.status).toBe(200);
    await bed.cluster.until(async () => EXITS.includes(await exitSeen().catch(() => "")), {
      timeoutMs: 30_000,
      message: "the device to be served again",
    });
  });

  it("is served again by a gateway restarted on the same interface", async () => {
    await gateway.stop();
    gateway = await bed.startGateway();
    await bed.cluster.until(async () => EXITS.includes(await exitSeen().catch(() => "")), {
      timeoutMs: 40_000,
      message: "the device to be served by the restarted gateway",
    });
  });
});
