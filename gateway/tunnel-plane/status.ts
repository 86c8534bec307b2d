/**
 * The tunnel status publisher: every interval, what this gateway's endpoints know of their devices
 * (each WireGuard peer's latest handshake, each OpenVPN device with a session now) goes to Redis under this gateway's key, which expires
 * after three intervals, and the gateway lists itself among the carriers; tunnel_last_seen moves
 * each device's last sighting forward from every carrier's status. A write that fails is logged
 * once per streak and the next interval writes the whole status again: nothing is owed.
 */
import { type CycleResult, Loop } from "../../shared/async/loop.ts";
import type { RedisKeys } from "../../shared/redis-keys.ts";
import type { GatewayRedis } from "../../shared/redis/contract.ts";
import { TUNNEL_STATUS_TTL_INTERVALS, type TunnelStatus } from "../../shared/tunnel-status.ts";
import { withDeadline } from "../../shared/async/deadline.ts";
import type { PeerStatus } from "./wireguard-config.ts";

export interface TunnelStatusOptions {
  redis: Pick<GatewayRedis, "multi">;
  keys: RedisKeys;
  instance: string;
  /** The WireGuard endpoint's peers now. */
  peers(): Promise<PeerStatus[]>;
  /** The OpenVPN devices with a session now: seen at this write. */
  openvpnDevices(): string[];
  requestTimeoutMs: number;
  /** OCTOPROX_TUNNEL_STATUS_INTERVAL. */
  intervalMs: number;
  nowMs?: () => number;
}

export class TunnelStatusPublisher extends Loop {
  readonly #o: TunnelStatusOptions;

  constructor(options: TunnelStatusOptions) {
    super({ name: "tunnel_status" });
    this.#o = options;
  }

  protected override nextDuty(signal: AbortSignal): Promise<void> {
    return this.waitFor(this.#o.intervalMs, signal);
  }

  protected override async cycle(): Promise<CycleResult> {
    const peers = await this.#o.peers();
    const at = (this.#o.nowMs ?? Date.now)();
    const status: TunnelStatus = { at, wireguard: {}, openvpn: {} };
    for (const peer of peers) {
      if (peer.latestHandshakeMs > 0) status.wireguard[peer.publicKey] = peer.latestHandshakeMs;
    }
    for (const id of this.#o.openvpnDevices()) status.openvpn[id] = at;
    const { keys, instance } = this.#o;
    await withDeadline("tunnel status", this.#o.requestTimeoutMs, () =>
      this.#o.redis.multi()
        .set(
          keys.tunnelStatus(instance),
          JSON.stringify(status),
          "PX",
          TUNNEL_STATUS_TTL_INTERVALS * this.#o.intervalMs,
        )
        .sadd(keys.tunnelCarriers, instance)
        .exec());
    return Object.keys(status.wireguard).length + Object.keys(status.openvpn).length > 0;
  }
}
