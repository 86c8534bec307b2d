/**
 * The destination guard (seed 001 §15): a client must not reach, through our upstreams, the
 * addresses of the networks around them: loopback, private, link-local, unspecified, shared
 * (carrier-grade NAT), multicast and reserved ranges, and cloud metadata endpoints, in IPv4 and
 * IPv6 and through every IPv6 form that carries an IPv4 address. A literal is checked as it is
 * (IPv4 in every form `inet_aton` reads, since the upstream's resolver reads it so); a name is
 * checked by every address it resolves to. A CIDR of OCTOPROX_DESTINATION_ALLOW_CIDRS lets its
 * addresses through.
 *
 * A name that does not resolve here is let through: we pass names to the upstream unresolved, and
 * the upstream (often in another network, with another resolver) may well resolve it; the guard
 * refuses only what it can see is internal. So a failed lookup fails open, for that reason only.
 * `localhost` and names under it are taken as 127.0.0.1 without a lookup (RFC 6761): DNS-only
 * resolvers such as `Deno.resolveDns` never read /etc/hosts, while the upstream's resolver does.
 * The guard cannot see what the upstream itself will resolve a name to (DNS rebinding between the
 * two lookups); a lookup's verdict is cached for a short while, which narrows nothing further.
 */
import type { DestinationGuard, MaybePromise, Refusal, Target } from "./contract.ts";
import {
  type Cidr,
  embeddedIPv4,
  formatIPv4,
  type IpAddress,
  parseCidr,
  parseIp,
  v4InCidr,
  v6InCidr,
} from "../../shared/ip.ts";
import { prohibitedDestination } from "./refusals.ts";
import { normaliseHost } from "./snapshot.ts";

interface Range {
  cidr: Cidr;
  kind: string;
}

const range = (text: string, kind: string): Range => ({ cidr: parseCidr(text), kind });

/** Checked in order: the first range that holds the address names its kind. */
const PROHIBITED_V4: readonly Range[] = [
  range("169.254.169.254/32", "cloud metadata"),
  range("0.0.0.0/8", "unspecified"),
  range("127.0.0.0/8", "loopback"),
  range("10.0.0.0/8", "private"),
  range("172.16.0.0/12", "private"),
  range("192.168.0.0/16", "private"),
  range("100.64.0.0/10", "shared (carrier-grade NAT)"),
  range("169.254.0.0/16", "link-local"),
  range("224.0.0.0/4", "multicast"),
  range("240.0.0.0/4", "reserved"),
];

const PROHIBITED_V6: readonly Range[] = [
  range("fd00:ec2::254/128", "cloud metadata"),
  range("::/128", "unspecified"),
  range("::1/128", "loopback"),
  range("fc00::/7", "private"),
  range("fec0::/10", "private"),
  range("fe80::/10", "link-local"),
  range("ff00::/8", "multicast"),
];

const LOCALHOST = "127.0.0.1";
const LOCALHOST_ADDRESS: IpAddress = { family: 4, value: 0x7f000001 };

export type Resolve = (host: string) => Promise<string[]>;

export interface GuardOptions {
  /** CIDR blocks let through (OCTOPROX_DESTINATION_ALLOW_CIDRS); parsed once, bad ones throw. */
  allowCidrs?: readonly string[];
  /** Every address a name resolves to (A and AAAA); the Deno layer passes Deno.resolveDns. */
  resolve?: Resolve;
  /** How long a name's verdict is kept. */
  cacheMs?: number;
  cacheEntries?: number;
  nowMs?: () => number;
}

interface Verdict {
  untilMs: number;
  refusal: Refusal | undefined;
}

/** What kind of prohibited address this is, or undefined when it may be reached. */
export function prohibitedKind(
  address: IpAddress,
  allow: readonly Cidr[] = [],
): string | undefined {
  if (address.family === 4) return kindOfV4(address.value, allow);
  for (const cidr of allow) if (v6InCidr(address.words, cidr)) return undefined;
  const v4 = embeddedIPv4(address.words);
  if (v4 !== undefined) return kindOfV4(v4, allow);
  for (const r of PROHIBITED_V6) if (v6InCidr(address.words, r.cidr)) return r.kind;
  return undefined;
}

function kindOfV4(value: number, allow: readonly Cidr[]): string | undefined {
  for (const cidr of allow) if (v4InCidr(value, cidr)) return undefined;
  for (const r of PROHIBITED_V4) if (v4InCidr(value, r.cidr)) return r.kind;
  return undefined;
}

export class AddressGuard implements DestinationGuard {
  private readonly allow: readonly Cidr[];
  private readonly resolve: Resolve | undefined;
  private readonly cacheMs: number;
  private readonly cacheEntries: number;
  private readonly nowMs: () => number;
  private readonly verdicts = new Map<string, Verdict>();
  private readonly pending = new Map<string, Promise<Refusal | undefined>>();

  constructor(options: GuardOptions = {}) {
    this.allow = (options.allowCidrs ?? []).map(parseCidr);
    this.resolve = options.resolve;
    this.cacheMs = options.cacheMs ?? 30_000;
    this.cacheEntries = options.cacheEntries ?? 4096;
    this.nowMs = options.nowMs ?? Date.now;
  }

  check(target: Target): MaybePromise<Refusal | undefined> {
    const host = normaliseHost(target.host);
    const literal = parseIp(host);
    if (literal !== undefined) return this.verdict(host, host, literal);
    if (host === "localhost" || host.endsWith(".localhost")) {
      return this.verdict(host, LOCALHOST, LOCALHOST_ADDRESS);
    }
    if (this.resolve === undefined) return undefined;
    const cached = this.verdicts.get(host);
    if (cached !== undefined && cached.untilMs > this.nowMs()) return cached.refusal;
    let lookup = this.pending.get(host);
    if (lookup === undefined) {
      lookup = this.lookUp(host, this.resolve).finally(() => this.pending.delete(host));
      this.pending.set(host, lookup);
    }
    return lookup;
  }

  private verdict(host: string, shown: string, address: IpAddress): Refusal | undefined {
    const kind = prohibitedKind(address, this.allow);
    return kind === undefined ? undefined : prohibitedDestination(host, shown, kind);
  }

  private async lookUp(host: string, resolve: Resolve): Promise<Refusal | undefined> {
    let addresses: string[];
    try {
      addresses = await resolve(host);
    } catch {
      return undefined; // Fails open: the upstream resolves names, and may succeed.
    }
    let refusal: Refusal | undefined;
    for (const text of addresses) {
      const address = parseIp(text);
      if (address === undefined) continue;
      const shown = address.family === 4 ? formatIPv4(address.value) : text;
      refusal = this.verdict(host, shown, address);
      if (refusal !== undefined) break;
    }
    if (this.verdicts.size >= this.cacheEntries) {
      const oldest = this.verdicts.keys().next();
      if (oldest.done !== true) this.verdicts.delete(oldest.value);
    }
    this.verdicts.set(host, { untilMs: this.nowMs() + this.cacheMs, refusal });
    return refusal;
  }
}

/** The guard the socket layer holds. */
export function createDestinationGuard(options: GuardOptions = {}): DestinationGuard {
  return new AddressGuard(options);
}
