/**
 * What a gateway with a tunnel endpoint publishes of its devices, and tunnel_last_seen reads
 * (control/jobs/tunnel-last-seen.ts): per protocol, each device's latest sign of life the
 * gateway saw. A WireGuard device is known to a gateway by its public key alone (its latest
 * handshake), so its status carries the key, which the job matches inside its one statement; an
 * OpenVPN device is admitted by its certificate, whose common name is its id, so its status
 * carries the id.
 * Written every OCTOPROX_TUNNEL_STATUS_INTERVAL (10 s) under a key that outlives three intervals,
 * so a stopped gateway's statuses go by themselves. Runtime-neutral.
 */

/** A status key outlives this many of the gateway's intervals (OCTOPROX_TUNNEL_STATUS_INTERVAL). */
export const TUNNEL_STATUS_TTL_INTERVALS = 3;
/** A device is online when its latest handshake is this recent (WireGuard rekeys every 2 min). */
export const TUNNEL_ONLINE_WITHIN_MS = 3 * 60_000;

/** Whether a device last seen at `lastSeen` (null: never) counts as online now. */
export function isOnline(lastSeen: Date | null, nowMs = Date.now()): boolean {
  return lastSeen !== null && nowMs - lastSeen.getTime() < TUNNEL_ONLINE_WITHIN_MS;
}

export interface TunnelStatus {
  /** When the gateway wrote it (epoch ms). */
  at: number;
  /** WireGuard devices by public key: their latest handshake (epoch ms). */
  wireguard: Record<string, number>;
  /** OpenVPN devices by id: when the gateway last saw each connected (epoch ms). */
  openvpn: Record<string, number>;
}

function sightings(value: unknown): Record<string, number> {
  const read: Record<string, number> = {};
  if (typeof value !== "object" || value === null) return read;
  for (const [key, ms] of Object.entries(value)) {
    if (typeof ms === "number" && Number.isFinite(ms) && ms > 0) read[key] = ms;
  }
  return read;
}

/** A status read back; undefined for text that is not one (another release's, say). */
export function readTunnelStatus(text: string | null): TunnelStatus | undefined {
  if (text === null) return undefined;
  try {
    const parsed = JSON.parse(text) as Partial<TunnelStatus>;
    if (typeof parsed.at !== "number" || typeof parsed.wireguard !== "object") return undefined;
    // An earlier release's status has no OpenVPN part.
    return {
      at: parsed.at,
      wireguard: sightings(parsed.wireguard),
      openvpn: sightings(parsed.openvpn),
    };
  } catch {
    return undefined;
  }
}

/**
 * A certificate serial as admission compares it: lower-case hex without separators or leading
 * zeros (OpenVPN reports `tls_serial_hex_0` as colon-separated bytes); undefined for anything
 * that is not hex.
 */
export function certificateSerial(text: string): string | undefined {
  const hex = text.replaceAll(":", "").toLowerCase().replace(/^0+/, "");
  if (!/^[0-9a-f]{1,64}$/.test(hex)) return undefined;
  return hex;
}
