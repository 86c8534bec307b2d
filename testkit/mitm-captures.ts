/**
 * Interception captures as a gateway writes them, for the Inspector's tests: a capture with
 * every field filled (each test overrides what it looks at), written to a project's stream
 * through the gateway's own encoding (encodeMitmCapture) and XADD's `MAXLEN ~` cap.
 */
import type { Redis } from "ioredis";
import { encodeMitmCapture, type MitmCapture } from "../shared/mitm-captures.ts";
import { type RedisKeys, STREAM_CAPS } from "../shared/redis-keys.ts";

export function sampleCapture(overrides: Partial<MitmCapture> = {}): MitmCapture {
  return {
    atMs: Date.now(),
    method: "GET",
    host: "shop.example:443",
    path: "/products/1?…",
    status: 200,
    proxyStatus: "",
    firstByteMs: 42,
    totalMs: 57,
    connectorId: null,
    proxyId: null,
    bytesUp: 312,
    bytesDown: 5_120,
    requestHeaders: [
      ["Host", "shop.example"],
      ["User-Agent", "curl/8.5.0"],
      ["Authorization", "[scrubbed]"],
      ["X-Octoprox-Session", "42"],
    ],
    sentHeaders: [["Host", "shop.example"], ["User-Agent", "curl/8.5.0"]],
    responseHeaders: [["Content-Type", "text/html"], ["Set-Cookie", "[scrubbed]"]],
    ja3: "cd08e31494f9531f560d64c695473da9",
    ja4: "t13d1516h2_8daaf6152771_e5627efa2ab1",
    sni: "shop.example",
    http2: "",
    mode: "plain",
    ...overrides,
  };
}

/** Appends the captures in order (the last is the newest); answers their entry ids. */
export async function writeCaptures(
  redis: Redis,
  keys: RedisKeys,
  projectId: string,
  captures: readonly MitmCapture[],
): Promise<string[]> {
  const ids: string[] = [];
  for (const capture of captures) {
    const id = await redis.xadd(
      keys.mitmRequests(projectId),
      "MAXLEN",
      "~",
      STREAM_CAPS.mitmRequests,
      "*",
      ...encodeMitmCapture(capture),
    );
    ids.push(id as string);
  }
  return ids;
}
