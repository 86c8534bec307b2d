/**
 * What a transport hands the gateway (connection.ts makes one, tcp.ts and http.ts carry it):
 * the commands, the feed's blocking reads where the transport has them, its series, its end.
 */
import type { BlockingStreamReader, GatewayRedis } from "../../shared/redis/contract.ts";
import type { MetricSample } from "../base/metrics.ts";

export type RedisTransport = "tcp" | "http";

export interface RedisConnection {
  readonly transport: RedisTransport;
  readonly redis: GatewayRedis;
  /** Blocking stream reads on a connection of their own; none over HTTP (the feed is polled). */
  readonly blockingReader?: () => BlockingStreamReader;
  /** The transport's own series for /metrics (HTTP: requests and bytes). */
  samples(): MetricSample[];
  /** Ends the connection (TCP); nothing is held open over HTTP. Safe twice. */
  close(): void;
}
