/**
 * A failure example: one request the gateway could not complete, as the failure log keeps it in
 * the capped stream of its project and kind (`failures:<project>:<kind>`, shared/redis-keys.ts).
 * The gateway writes entries through `encodeFailureExample`, the api reads them back through
 * `decodeFailureExample`, so the two never disagree on a field. Every text is scrubbed before it
 * is encoded (no proxy credentials, no URL queries): the stream is readable by every role.
 */
import { type FailureKind, isFailureKind } from "./failure-kinds.ts";

export interface FailureExample {
  /** Epoch ms the request ended. */
  atMs: number;
  kind: FailureKind;
  /** `http` (a forwarded request), `connect` or `socks5`. */
  protocol: string;
  /** What the client was answered: an HTTP status (a SOCKS5 reply is given its HTTP twin's). */
  clientStatus: number;
  /** The RFC 9209 Proxy-Status token of that answer. */
  proxyStatus: string;
  /** What the upstream proxy itself answered (its HTTP status, a SOCKS reply code), if any. */
  vendorStatus: number | null;
  /** Null for a refusal before a connector was chosen. */
  connectorId: string | null;
  proxyId: string | null;
  /** `host:port` of the destination, never a path or query. */
  target: string;
  /** What went wrong, in our words, scrubbed. */
  message: string;
}

/** Longest message kept: an example is for reading, not a dump. */
export const MAX_EXAMPLE_MESSAGE_CHARS = 500;

/** The entry's field/value pairs for XADD, in a fixed order. */
export function encodeFailureExample(example: FailureExample): string[] {
  return [
    "at",
    String(example.atMs),
    "kind",
    example.kind,
    "protocol",
    example.protocol,
    "client_status",
    String(example.clientStatus),
    "proxy_status",
    example.proxyStatus,
    "vendor_status",
    example.vendorStatus === null ? "" : String(example.vendorStatus),
    "connector",
    example.connectorId ?? "",
    "proxy",
    example.proxyId ?? "",
    "target",
    example.target,
    "message",
    example.message.slice(0, MAX_EXAMPLE_MESSAGE_CHARS),
  ];
}

/** An entry's fields back into an example; undefined for one this release cannot read. */
export function decodeFailureExample(fields: readonly string[]): FailureExample | undefined {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i], fields[i + 1]);
  const kind = map.get("kind") ?? "";
  const atMs = Number(map.get("at"));
  const clientStatus = Number(map.get("client_status"));
  if (!isFailureKind(kind) || !Number.isFinite(atMs) || !Number.isInteger(clientStatus)) {
    return undefined;
  }
  const vendor = map.get("vendor_status") ?? "";
  return {
    atMs,
    kind,
    protocol: map.get("protocol") ?? "",
    clientStatus,
    proxyStatus: map.get("proxy_status") ?? "",
    vendorStatus: vendor === "" ? null : Number(vendor),
    connectorId: map.get("connector") || null,
    proxyId: map.get("proxy") || null,
    target: map.get("target") ?? "",
    message: map.get("message") ?? "",
  };
}
