/** Speaking to upstream proxies from Node: tunnels for whatever needs one, and health probes. */
export { openTunnel, type OpenTunnelOptions } from "./tunnel.ts";
export {
  MAX_PROBE_BODY_BYTES,
  parseExitIp,
  probe,
  type ProbeOptions,
  type ProbeResult,
} from "./probe.ts";
export { KEEPALIVE_IDLE_MS, type UpstreamTlsOptions } from "./socket.ts";
export type { RunOptions } from "./run.ts";
