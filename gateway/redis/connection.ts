/**
 * The gateway's Redis connections: the process's one (the feed follower, the heartbeat and the
 * main isolate's writers) and each worker isolate's own, over the transport OCTOPROX_REDIS_URL
 * names: `redis://`/`rediss://` is TCP (ioredis), `https://`/`http://` is the Upstash REST
 * protocol (`@upstash/redis`) with OCTOPROX_REDIS_TOKEN.
 */
import { type GatewaySettings, isRedisRestUrl } from "../../shared/settings.ts";
import { counterSample } from "../base/metrics.ts";
import { HttpRedis } from "./http.ts";
import { RestRequester } from "./rest-requester.ts";
import { connectTcpRedis } from "./tcp.ts";
import type { RedisConnection, RedisTransport } from "./transport.ts";

export type { RedisConnection, RedisTransport };

/** A connection named `name` (CLIENT LIST over TCP), connecting at once. */
export function connectRedis(
  settings: Pick<GatewaySettings, "redisUrl" | "redisToken" | "redisRequestTimeoutMs">,
  name: string,
): RedisConnection {
  if (!isRedisRestUrl(settings.redisUrl)) return connectTcpRedis(settings.redisUrl, name);
  const requester = new RestRequester({
    url: settings.redisUrl,
    // The settings refuse an HTTP URL without a token.
    token: settings.redisToken ?? "",
    timeoutMs: settings.redisRequestTimeoutMs,
  });
  return {
    transport: "http",
    redis: new HttpRedis(requester),
    samples: () => {
      const c = requester.counts;
      return [
        counterSample(
          "octoprox_gateway_redis_http_requests_total",
          c.requests - c.failed,
          'result="answered"',
        ),
        counterSample("octoprox_gateway_redis_http_requests_total", c.failed, 'result="failed"'),
        counterSample("octoprox_gateway_redis_http_bytes_total", c.bytesSent, 'direction="sent"'),
        counterSample(
          "octoprox_gateway_redis_http_bytes_total",
          c.bytesReceived,
          'direction="received"',
        ),
      ];
    },
    close: () => {},
  };
}
