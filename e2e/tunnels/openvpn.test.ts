/**
 * An OpenVPN device end to end, on the tunnel bed (testkit/tunnel-bed.ts): a gateway running the
 * OpenVPN endpoint beside WireGuard's (two interfaces on one plane), the project's two tinyproxy
 * exits in an upstream namespace, and devices in a namespace of their own connecting with
 * Debian's `openvpn` client from the `.ovpn` profile the API hands out.
 *
 * - a device connects over UDP, gets the address on record pushed, resolves the origin's name
 *   through the gateway (a fake address) and reaches it through the project's exits; the API
 *   then shows it online, and its usage what its connections carried;
 * - a device whose certificate was rotated is refused with its old profile, and connects with
 *   the new one;
 * - disabling a connected device kills its session and refuses it; enabling it admits it again;
 * - with the transport set to TCP, the daemon restarts on TCP and a new profile connects;
 * - the gateway replaced by two, one running WireGuard and one OpenVPN: the device reconnects by
 *   itself, and an address one gateway's resolver gave a name no gateway had seen is found by the
 *   other through the shared mapping.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../testkit/cluster.ts";
import type { OpenvpnDevice } from "../../testkit/openvpn-device.ts";
import { Resolver } from "node:dns/promises";
import {
  EXITS,
  GATEWAY_ADDRESS,
  ORIGIN_NAME,
  SECOND_NAME,
  TunnelBed,
} from "../../testkit/tunnel-bed.ts";

let bed: TunnelBed;
let gateway: Gateway;

beforeAll(async () => {
  // Statuses published and read every second, so a device's sighting shows within the test.
  bed = await TunnelBed.start({ statusIntervalSeconds: 1, openvpn: true });
  gateway = await bed.startGateway();
}, 180_000);

afterEach((context) => {
  if (context.task.result?.state === "fail") bed.cluster.dump();
});

afterAll(async () => {
  await bed?.close();
});

const peers = () => `/api/v1/projects/${bed.projectId}/openvpn/peers`;

async function exitSeen(): Promise<string> {
  const body = await bed.curl(`http://${ORIGIN_NAME}:${bed.origin.port}/ip`);
  return JSON.parse(body).ip;
}

/** The client's log shows the gateway refused it. */
const REFUSED = /AUTH_FAILED/;

describe("an OpenVPN device", () => {
  let deviceId: string;
  let device: OpenvpnDevice;

  it("connects over UDP with its pushed address and reaches the origin by name", async () => {
    ({ id: deviceId, device } = await bed.addOpenvpnDevice({ name: "tablet" }));
    const shown = await bed.cluster.request("GET", `${peers()}/${deviceId}`);
    expect(device.address).toBe(shown.body.address);
    expect(device.output()).toMatch(/UDPv4 link remote/);
    const resolved = (await bed.devices.exec("getent", ["ahostsv4", ORIGIN_NAME])).split(/\s+/)[0];
    expect(resolved).toMatch(/^198\.1[89]\.\d+\.\d+$/);
    const seen = new Set<string>();
    await bed.cluster.until(async () => {
      seen.add(await exitSeen().catch(() => "failed"));
      return EXITS.every((exit) => seen.has(exit));
    }, { timeoutMs: 30_000, message: "the device's requests to leave through both exits" });
    const tls = JSON.parse(
      await bed.curl(`https://${ORIGIN_NAME}:${bed.tlsOrigin.port}/ip`, ["--insecure"]),
    );
    expect(EXITS).toContain(tls.ip);
    const online = await bed.cluster.until(async () => {
      const answer = await bed.cluster.request("GET", `${peers()}/${deviceId}`);
      return answer.body.online === true ? answer.body : undefined;
    }, { message: "the device to show online" });
    expect(Date.parse(online.last_seen_at)).toBeGreaterThan(Date.now() - 60_000);
    // Metered in the device's own window, whatever its tunnel: its answer's all-time usage
    // holds the live counts once the gateway's metering sent them (every 5 s).
    await bed.cluster.until(async () => {
      const usage = (await bed.cluster.request("GET", `${peers()}/${deviceId}`)).body.usage;
      return usage.requests >= 2 && usage.bytes_received > 0;
    }, { timeoutMs: 30_000, message: "the device's usage to show its connections" });
    expect(await gateway.metric("octoprox_gateway_tunnel_openvpn_sessions")).toBe(1);
  });

  it("is refused with its old profile once its certificate is rotated", async () => {
    const old = await bed.openvpnProfile(deviceId);
    await device.close();
    const rotated = await bed.cluster.request("POST", `${peers()}/${deviceId}/rotate-certificate`);
    expect(rotated.status).toBe(200);
    // Until the feed carries the new serial the old one may still be admitted: wait for that.
    await bed.cluster.until(async () => {
      const attempt = await bed.connectOpenvpn(old, { until: REFUSED, timeoutMs: 20_000 });
      const refused = REFUSED.test(attempt.output());
      await attempt.close();
      return refused;
    }, { timeoutMs: 60_000, message: "the old certificate to be refused" });
    const refusals = 'octoprox_gateway_tunnel_openvpn_admissions_total{result="refused"}';
    expect(await gateway.metric(refusals)).toBeGreaterThanOrEqual(1);
    device = await bed.connectOpenvpn(await bed.openvpnProfile(deviceId));
    await bed.cluster.until(async () => EXITS.includes(await exitSeen().catch(() => "")), {
      message: "the device with its new certificate to be served",
    });
  });

  it("has its session killed when disabled, and is admitted again once enabled", async () => {
    const disabled = await bed.cluster.request("PATCH", `${peers()}/${deviceId}`, {
      enabled: false,
    });
    expect(disabled.status).toBe(200);
    await bed.cluster.until(
      async () => (await gateway.metric("octoprox_gateway_tunnel_openvpn_sessions")) === 0,
      {
        message: "the disabled device's session to be killed",
      },
    );
    await expect(bed.curl(`http://${ORIGIN_NAME}:${bed.origin.port}/ip`, ["--max-time", "3"]))
      .rejects.toThrow();
    // The client reconnects by itself and is refused.
    await bed.cluster.until(() => REFUSED.test(device.output()), {
      timeoutMs: 30_000,
      message: "the disabled device's reconnection to be refused",
    });
    await device.close();

    const enabled = await bed.cluster.request("PATCH", `${peers()}/${deviceId}`, {
      enabled: true,
    });
    expect(enabled.status).toBe(200);
    await bed.cluster.until(async () => {
      const attempt = await bed.connectOpenvpn(await bed.openvpnProfile(deviceId), {
        until: REFUSED,
        timeoutMs: 20_000,
      });
      if (REFUSED.test(attempt.output())) {
        await attempt.close();
        return false;
      }
      device = attempt;
      return true;
    }, { timeoutMs: 60_000, message: "the enabled device to be admitted" });
    await bed.cluster.until(async () => EXITS.includes(await exitSeen().catch(() => "")), {
      message: "the enabled device to be served",
    });
  });

  it("connects over TCP once the transport is TCP", async () => {
    await device.close();
    const settings = await bed.cluster.request("PUT", "/api/v1/openvpn/settings", {
      transport: "tcp",
    });
    expect(settings.status, JSON.stringify(settings.body)).toBe(200);
    const profile = await bed.openvpnProfile(deviceId);
    expect(profile).toContain("proto tcp-client");
    // The daemon starts again on TCP once the feed carries the change.
    await bed.cluster.until(async () => {
      const attempt = await bed.connectOpenvpn(profile, { timeoutMs: 15_000 }).catch(() =>
        undefined
      );
      if (attempt === undefined) return false;
      device = attempt;
      return true;
    }, { timeoutMs: 60_000, message: "the device to connect over TCP" });
    expect(device.output()).toMatch(/TCP connection established/);
    await bed.cluster.until(async () => EXITS.includes(await exitSeen().catch(() => "")), {
      message: "the device over TCP to be served",
    });
  });
});

describe("two gateways", () => {
  it("share the fake-IP mapping, and the device reconnects across the restart", async () => {
    const { OCTOPROX_OPENVPN_ENABLED: _o, OCTOPROX_WIREGUARD_ENABLED: _w, ...env } = bed.gatewayEnv;
    await gateway.stop();
    const attached = (member: Gateway, iface: string) =>
      bed.cluster.until(
        () =>
          member.logs().some((line) =>
            line.msg === "Tunnel plane attached" && line.interface === iface
          ),
        { timeoutMs: 30_000, message: `${iface} to attach` },
      );
    const [wireguard, openvpn] = await Promise.all([
      bed.cluster.startGateway({ env: { ...env, OCTOPROX_WIREGUARD_ENABLED: "true" } }),
      bed.cluster.startGateway({ env: { ...env, OCTOPROX_OPENVPN_ENABLED: "true" } }),
    ]);
    await attached(wireguard, env.OCTOPROX_WIREGUARD_INTERFACE);
    await attached(openvpn, env.OCTOPROX_OPENVPN_INTERFACE);
    gateway = openvpn;
    // The device's client reconnects by itself to the gateway now serving OpenVPN.
    await bed.cluster.until(async () => EXITS.includes(await exitSeen().catch(() => "")), {
      timeoutMs: 60_000,
      message: "the device to be served again after the restart",
    });

    // The WireGuard gateway's resolver (bound on its tunnel address, reachable from here)
    // gives a name no gateway was asked for an address.
    const resolver = new Resolver({ timeout: 3_000, tries: 2 });
    resolver.setServers([`${GATEWAY_ADDRESS}:${env.OCTOPROX_TUNNEL_DNS_PORT}`]);
    const [fake] = await resolver.resolve4(SECOND_NAME);
    expect(fake).toMatch(/^198\.1[89]\.\d+\.\d+$/);
    const shared = 'octoprox_gateway_tunnel_fake_ip_lookups_total{result="shared"}';
    const before = await openvpn.metric(shared);
    // The device dials that address with no DNS query of its own: the OpenVPN gateway finds the
    // name in the shared mapping and routes it (the exits resolve it; the origin answers).
    const body = await bed.curl(`http://${fake}:${bed.origin.port}/ip`);
    expect(EXITS).toContain(JSON.parse(body).ip);
    expect(await openvpn.metric(shared)).toBe(before + 1);
  });
});
