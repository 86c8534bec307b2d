/**
 * The destination guard (seed 001 §15): a client must not reach, through our upstreams, the
 * addresses of the networks around them: loopback, private, link-local, unspecified, shared
 * (carrier-grade NAT), multicast and reserved ranges, and cloud metadata endpoints, in IPv4 and
 * IPv6 and through every IPv6 form that carries an IPv4 address. A literal is checked as it is
 * (IPv4 in every form `inet_aton` reads, since the upstream's resolver reads it so); a name is
 * checked by every address it resolves to. A CIDR of OCTOPROX_DESTINATION_ALLOW_CIDRS lets its
 * addresses through.
 *
 * Who resolves a name is the operator's choice (OCTOPROX_DESTINATION_RESOLUTION):
 *
 * - `upstream` (the default): names go to the upstream unresolved, as residential exits need
 *   (they resolve where they are). A name that does not resolve here is then let through: the
 *   upstream, often in another network with another resolver, may well resolve it; the guard
 *   refuses only what it can see is internal, so a failed lookup fails open, for that reason
 *   only. The guard cannot see what the upstream itself will resolve a name to: a name answering
 *   an allowed address here and an internal one there passes (DNS rebinding between the two
 *   lookups).
 * - `gateway`: `pin` resolves the name once, checks every address it got, and answers the
 *   address the upstream is sent (the first IPv4 one, else the first IPv6 one), so what was
 *   checked is what is dialled. A name without an address here is refused: nothing checked
 *   could be sent.
 *
 * `localhost` and names under it are taken as 127.0.0.1 without a lookup (RFC 6761). Other names
 * are looked up in the hosts file as well as DNS (gateway/net/io/resolve.ts): `Deno.resolveDns`
 * never reads /etc/hosts, while an upstream's resolver on the same machine does.
 * A lookup's answer is cached for a short while (in `gateway` mode, the address sent on with it).
 */
import type { DestinationResolution } from "../settings.ts";
import { formatIPv6 } from "../proxy-protocol/address.ts";
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
} from "../net/ip.ts";
import { prohibitedDestination, unresolvedDestination } from "./refusals.ts";
import { normaliseHost } from "../net/host.ts";

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
  /** Every address a name resolves to; the Deno layer passes its hosts file and DNS (resolve.ts). */
  resolve?: Resolve;
  /** Who resolves names: `upstream` (default) or `gateway` (see the module's comment). */
  resolution?: DestinationResolution;
  /** How long a name's verdict is kept. */
  cacheMs?: number;
  cacheEntries?: number;
  nowMs?: () => number;
}

interface Verdict {
  untilMs: number;
  refusal: Refusal | undefined;
  /** The address a pinned target is sent with (undefined: the name gave none). */
  address: string | undefined;
}

/** An address as the upstream is sent it: IPv4 dotted, IPv6 in RFC 5952 form (no zone). */
export function plainAddress(address: IpAddress): string {
  if (address.family === 4) return formatIPv4(address.value);
  const bytes = new Uint8Array(16);
  address.words.forEach((word, index) => {
    bytes[index * 2] = word >> 8;
    bytes[index * 2 + 1] = word & 0xff;
  });
  return formatIPv6(bytes);
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
  readonly resolution: DestinationResolution;
  private readonly allow: readonly Cidr[];
  private readonly resolve: Resolve | undefined;
  private readonly cacheMs: number;
  private readonly cacheEntries: number;
  private readonly nowMs: () => number;
  private readonly verdicts = new Map<string, Verdict>();
  private readonly pending = new Map<string, Promise<Verdict>>();

  constructor(options: GuardOptions = {}) {
    this.resolution = options.resolution ?? "upstream";
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
    const looked = this.lookUpCached(host, this.resolve);
    return looked instanceof Promise ? looked.then((verdict) => verdict.refusal) : looked.refusal;
  }

  pin(target: Target): MaybePromise<Refusal | Target> {
    const host = normaliseHost(target.host);
    const port = target.port;
    const literal = parseIp(host);
    if (literal !== undefined) {
      return this.verdict(host, host, literal) ?? { host: plainAddress(literal), port };
    }
    if (host === "localhost" || host.endsWith(".localhost")) {
      return this.verdict(host, LOCALHOST, LOCALHOST_ADDRESS) ?? { host: LOCALHOST, port };
    }
    if (this.resolve === undefined) return unresolvedDestination(host);
    const looked = this.lookUpCached(host, this.resolve);
    return looked instanceof Promise
      ? looked.then((verdict) => pinned(host, port, verdict))
      : pinned(host, port, looked);
  }

  private verdict(host: string, shown: string, address: IpAddress): Refusal | undefined {
    const kind = prohibitedKind(address, this.allow);
    return kind === undefined ? undefined : prohibitedDestination(host, shown, kind);
  }

  /** The name's cached verdict while it lasts, else one lookup shared by its askers. */
  private lookUpCached(host: string, resolve: Resolve): MaybePromise<Verdict> {
    const cached = this.verdicts.get(host);
    if (cached !== undefined && cached.untilMs > this.nowMs()) return cached;
    let lookup = this.pending.get(host);
    if (lookup === undefined) {
      lookup = this.lookUp(host, resolve).finally(() => this.pending.delete(host));
      this.pending.set(host, lookup);
    }
    return lookup;
  }

  private async lookUp(host: string, resolve: Resolve): Promise<Verdict> {
    let addresses: string[];
    try {
      addresses = await resolve(host);
    } catch {
      // Upstream mode fails open (the upstream resolves names, and may succeed); gateway mode
      // has nothing to send and refuses (pin). Neither keeps it: the next request asks again.
      return { untilMs: 0, refusal: undefined, address: undefined };
    }
    let refusal: Refusal | undefined;
    let firstV4: string | undefined;
    let firstV6: string | undefined;
    for (const text of addresses) {
      const address = parseIp(text);
      if (address === undefined) continue;
      const plain = plainAddress(address);
      refusal = this.verdict(host, address.family === 4 ? plain : text, address);
      if (refusal !== undefined) break;
      if (address.family === 4) firstV4 ??= plain;
      else firstV6 ??= plain;
    }
    const verdict: Verdict = {
      untilMs: this.nowMs() + this.cacheMs,
      refusal,
      address: refusal === undefined ? firstV4 ?? firstV6 : undefined,
    };
    // A name without an address in gateway mode is asked again next time: a passing resolver
    // failure must not refuse it for the cache's whole while.
    if (refusal !== undefined || verdict.address !== undefined || this.resolution === "upstream") {
      if (this.verdicts.size >= this.cacheEntries) {
        const oldest = this.verdicts.keys().next();
        if (oldest.done !== true) this.verdicts.delete(oldest.value);
      }
      this.verdicts.set(host, verdict);
    }
    return verdict;
  }
}

function pinned(host: string, port: number, verdict: Verdict): Refusal | Target {
  if (verdict.refusal !== undefined) return verdict.refusal;
  return verdict.address === undefined
    ? unresolvedDestination(host)
    : { host: verdict.address, port };
}

/** The guard the socket layer holds. */
export function createDestinationGuard(options: GuardOptions = {}): DestinationGuard {
  return new AddressGuard(options);
}
