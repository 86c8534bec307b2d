/**
 * Suite `tunnel-connect`: what a tunnel device's connection adds over a client's CONNECT to the
 * same target through the same gateway, on the tunnel test bed (testkit/tunnel-bed.ts: a real
 * control plane, a gateway with the WireGuard and OpenVPN endpoints, two tinyproxy exits in a
 * namespace, a device in another, everything on this machine). Needs root, as the bed does. A
 * WireGuard device is measured first, then an OpenVPN device in its place, each against CONNECTs
 * measured in the same stretch.
 *
 * Each run measures both, alternating, BENCH_TUNNEL_CONNECT_COUNT (200) connections each, one
 * after another, by a Python client (so neither side pays a process start per connection):
 * - **device**: inside the device's namespace, a new TCP connection to the origin by its name:
 *   the lookup through the gateway's resolver (a fake address), the connection through the
 *   WireGuard tunnel, redirected to the transparent listener, its original destination read,
 *   routed through the project's pool; a GET and its answer; closed;
 * - **CONNECT**: in the test's namespace, a new connection to the gateway's proxy port, CONNECT
 *   to the same name and port with the project's credentials, the same GET; closed.
 * Figures: each side's median connection time and their difference; the gateway's CPU per
 * connection (its own, plus the programs it ran and reaped: `conntrack`), the difference; and
 * the tunnel program's CPU per device connection (`wireguard-go`, or the `openvpn` daemon: the
 * tunnel's encryption on the gateway's side).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { ORIGIN_NAME, TunnelBed } from "../../testkit/tunnel-bed.ts";

import {
  cpuMillis,
  envPositive,
  median,
  type Row,
  type Suite,
  type SuiteContext,
} from "./suite.ts";

const exec = promisify(execFile);

/** CPU of a process and of the children it waited for, ms (0 once it is gone). */
async function cpuWithChildren(pid: number): Promise<number> {
  return (await cpuMillis(pid, { children: true })) ?? 0;
}

const CLIENT = `
import json, socket, sys, time
mode, host, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
proxy = sys.argv[5] if len(sys.argv) > 5 else ""
auth = sys.argv[6] if len(sys.argv) > 6 else ""
times = []
failures = 0
for i in range(count):
    started = time.perf_counter()
    try:
        if mode == "device":
            s = socket.create_connection((host, port), timeout=10)
        else:
            phost, pport = proxy.split(":")
            s = socket.create_connection((phost, int(pport)), timeout=10)
            s.sendall(("CONNECT %s:%d HTTP/1.1\\r\\nHost: %s:%d\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n" % (host, port, host, port, auth)).encode())
            head = b""
            while b"\\r\\n\\r\\n" not in head:
                chunk = s.recv(4096)
                if not chunk: raise Exception("closed")
                head += chunk
            if not head.startswith(b"HTTP/1.1 200"): raise Exception(head[:40])
        s.sendall(("GET /ip HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % host).encode())
        body = b""
        while True:
            chunk = s.recv(4096)
            if not chunk: break
            body += chunk
        s.close()
        if b" 200 " not in body.split(b"\\r\\n")[0]: raise Exception(body[:40])
        times.append((time.perf_counter() - started) * 1000)
    except Exception:
        failures += 1
print(json.dumps({"times": times, "failures": failures}))
`;

interface Side {
  medianMs: number;
  cpuMsPerConnection: number;
  /** The tunnel program's: wireguard-go's, or the openvpn daemon's. */
  tunnelCpuMsPerConnection: number;
  failures: number;
}

type Tunnel = "wireguard" | "openvpn";

/** The gateway's tunnel program: its wireguard-go, or its openvpn daemon (read from a pipe). */
async function tunnelPid(bed: TunnelBed, tunnel: Tunnel): Promise<number | undefined> {
  const pattern = tunnel === "wireguard"
    ? `wireguard-go -f ${bed.gatewayEnv.OCTOPROX_WIREGUARD_INTERFACE}`
    : "openvpn --config /dev/stdin";
  const { stdout } = await exec("pgrep", ["-f", pattern]).catch(() => ({ stdout: "" }));
  const pid = Number(stdout.trim().split("\n")[0]);
  return pid > 0 ? pid : undefined;
}

async function measure(
  bed: TunnelBed,
  tunnel: Tunnel,
  mode: "device" | "connect",
  count: number,
): Promise<Side> {
  const gateway = bed.gateway!;
  const gatewayPid = gateway.child.pid!;
  const wgPid = await tunnelPid(bed, tunnel);
  const args = [mode, ORIGIN_NAME, String(bed.origin.port), String(count)];
  const auth = Buffer.from(`${bed.credentials.username}:${bed.credentials.password}`).toString(
    "base64",
  );
  const cpuStart = await cpuWithChildren(gatewayPid);
  const wgStart = wgPid === undefined ? 0 : await cpuWithChildren(wgPid);
  const { stdout } = mode === "device"
    ? { stdout: await bed.devices.exec("python3", ["-c", CLIENT, ...args]) }
    : await exec("python3", ["-c", CLIENT, ...args, `127.0.0.1:${gateway.proxyPort}`, auth], {
      maxBuffer: 16 * 1024 * 1024,
    });
  const cpuMs = (await cpuWithChildren(gatewayPid)) - cpuStart;
  const wgMs = wgPid === undefined ? 0 : (await cpuWithChildren(wgPid)) - wgStart;
  const result = JSON.parse(stdout) as { times: number[]; failures: number };
  const done = Math.max(1, result.times.length);
  return {
    medianMs: median(result.times),
    cpuMsPerConnection: cpuMs / done,
    tunnelCpuMsPerConnection: wgMs / done,
    failures: result.failures,
  };
}

export const tunnelConnectSuite: Suite = {
  name: "tunnel-connect",
  description: "a tunnel device's connection against a CONNECT to the same target (needs root)",
  async run({ runs, log }) {
    const count = envPositive("BENCH_TUNNEL_CONNECT_COUNT", true) ?? 200;
    const bed = await TunnelBed.start({ openvpn: true });
    try {
      await bed.startGateway();
      const { device } = await bed.addDevice({ name: "bench" });
      const wireguard = await compare(bed, "wireguard", runs, count, log);
      // The OpenVPN device in its place: the namespace has one default route.
      await device.close();
      await bed.addOpenvpnDevice({ name: "bench-openvpn" });
      const openvpn = await compare(bed, "openvpn", runs, count, log);
      return [...rowsOf("wireguard", wireguard, count), ...rowsOf("openvpn", openvpn, count)];
    } finally {
      await bed.close();
    }
  },
};

interface Compared {
  device: Side[];
  connect: Side[];
}

/** `runs` runs of the device's connections and CONNECTs, alternating, both paths warmed first. */
async function compare(
  bed: TunnelBed,
  tunnel: Tunnel,
  runs: number,
  count: number,
  log: SuiteContext["log"],
): Promise<Compared> {
  // The device's first handshake, and both paths warm.
  await bed.cluster.until(() => bed.curl(`http://${ORIGIN_NAME}:${bed.origin.port}/ip`), {
    timeoutMs: 30_000,
    message: "the device to be served",
  });
  await measure(bed, tunnel, "device", 20);
  await measure(bed, tunnel, "connect", 20);
  const device: Side[] = [];
  const connect: Side[] = [];
  for (let run = 0; run < runs; run++) {
    // A B B A order, so drift in the machine's load touches both sides alike.
    for (
      const mode of run % 2 === 0 ? ["device", "connect"] as const : ["connect", "device"] as const
    ) {
      const side = await measure(bed, tunnel, mode, count);
      (mode === "device" ? device : connect).push(side);
      log(
        `tunnel-connect ${tunnel} ${mode} run ${run + 1}: ${side.medianMs.toFixed(2)} ms ` +
          `median, gateway ${side.cpuMsPerConnection.toFixed(2)} ms CPU, tunnel program ` +
          `${side.tunnelCpuMsPerConnection.toFixed(2)} ms CPU a connection, ` +
          `${side.failures} failed`,
      );
    }
  }
  return { device, connect };
}

function rowsOf(tunnel: Tunnel, { device, connect }: Compared, count: number): Row[] {
  const pick = (sides: Side[], of: (side: Side) => number) => sides.map(of);
  const added = device.map((side, i) => side.medianMs - connect[i].medianMs);
  const addedCpu = device.map((side, i) => side.cpuMsPerConnection - connect[i].cpuMsPerConnection);
  const failures = [...device, ...connect].reduce((sum, side) => sum + side.failures, 0);
  // WireGuard's keys as they were first recorded; OpenVPN's beside them.
  const key = (name: string) =>
    tunnel === "wireguard" ? `tunnel_${name}` : `tunnel_openvpn_${name.replace(/^device_/, "")}`;
  const name = tunnel === "wireguard" ? "WireGuard" : "OpenVPN";
  const program = tunnel === "wireguard" ? "wireguard-go" : "the openvpn daemon";
  return [
    {
      figure: `${name} device connection, median time (lookup, tunnel, GET, close)`,
      value: median(pick(device, (s) => s.medianMs)),
      unit: "ms",
      runs: pick(device, (s) => s.medianMs),
      key: key("device_connection_ms"),
      detail: `${count} connections a run; ${failures} failed in all`,
    },
    {
      figure: `CONNECT to the same target, median time (beside ${name})`,
      value: median(pick(connect, (s) => s.medianMs)),
      unit: "ms",
      runs: pick(connect, (s) => s.medianMs),
      key: tunnel === "wireguard" ? "tunnel_connect_connection_ms" : "tunnel_openvpn_connect_ms",
    },
    {
      figure: `${name} device connection's added time over the CONNECT`,
      value: median(added),
      unit: "ms",
      runs: added,
      key: key("device_added_ms"),
    },
    {
      figure: `gateway CPU, one ${name} device connection (with conntrack)`,
      value: median(pick(device, (s) => s.cpuMsPerConnection)),
      unit: "ms",
      runs: pick(device, (s) => s.cpuMsPerConnection),
      key: key("device_cpu_ms"),
      detail: `${program} ${
        median(pick(device, (s) => s.tunnelCpuMsPerConnection)).toFixed(2)
      } ms more`,
    },
    {
      figure: `gateway CPU, one CONNECT (beside ${name})`,
      value: median(pick(connect, (s) => s.cpuMsPerConnection)),
      unit: "ms",
      runs: pick(connect, (s) => s.cpuMsPerConnection),
      key: tunnel === "wireguard" ? "tunnel_connect_cpu_ms" : "tunnel_openvpn_connect_cpu_ms",
    },
    {
      figure: `${name} device connection's added gateway CPU over the CONNECT`,
      value: median(addedCpu),
      unit: "ms",
      runs: addedCpu,
      key: key("device_added_cpu_ms"),
    },
  ];
}
