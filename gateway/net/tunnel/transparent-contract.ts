/**
 * What the transparent listener's sessions (transparent-session.ts) need of the tunnel plane
 * (gateway/tunnel-plane/), which implements it: where a redirected connection was going, the
 * name behind a fake address, and which destinations are encrypted DNS the plane closes. The
 * session knows the plane only through this file.
 */

export interface OriginalTarget {
  address: string;
  port: number;
}

export interface TransparentPlane {
  /** How long a connection to an address the resolver did not give waits for a name. */
  readonly sniffTimeoutMs: number;
  /** Where the connection from `peer` was going; undefined when it cannot be told. */
  originalDestination(peer: Deno.NetAddr): Promise<OriginalTarget | undefined>;
  /** Whether `address` is one of the resolver's fake addresses. */
  isFake(address: string): boolean;
  /** The name a fake address stands for; undefined when no name holds it. */
  nameOf(address: string): Promise<string | undefined>;
  /**
   * Whether a connection to `host:port` is DNS over TLS or to a well-known DNS-over-HTTPS
   * resolver, which the plane closes (when it blocks encrypted DNS); counted for the device in
   * the plane's /metrics (the session counts it in the device's metering window).
   */
  closesEncryptedDns(deviceAddress: string, host: string, port: number): boolean;
  /** A connection of the device at `deviceAddress` was routed (counted per device). */
  routed(deviceAddress: string, byName: "fake_ip" | "sniffed" | "address"): void;
}
