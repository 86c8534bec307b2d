/**
 * The tunnel plane's resolver: what a device's DNS query is answered. An A query gets the
 * name's fake address (fake-ips.ts), so the device's connection to it reaches the transparent
 * listener and the name can be read back from the address; every other type (AAAA, HTTPS, SRV
 * and the like) gets an empty answer, since the tunnel carries proxied TCP and nothing else
 * needs a record. With `blockEncryptedDns` on, Firefox's canary name answers NXDOMAIN, which
 * tells the browser to keep its DNS on the system resolver rather than its own DoH.
 *
 * Runtime-neutral: bytes in, bytes out; the socket is dns-server.ts's.
 */
import {
  DnsClass,
  DnsRcode,
  DnsType,
  isHostName,
  isResponse,
  opcodeOf,
  readQuery,
  writeAnswer,
} from "../../shared/dns/message.ts";
import { counterSample, type MetricSample } from "../base/metrics.ts";
import type { FakeIps } from "./fake-ips.ts";

/** Firefox asks for this name before it turns its own DNS over HTTPS on (RFC 8484 canary). */
export const DOH_CANARY_NAME = "use-application-dns.net";
/**
 * An answer's lifetime. Short, so a device asks again rather than keep an address the block
 * may since have handed to another name; a repeated query costs a lookup of the local copy.
 */
export const ANSWER_TTL_SECONDS = 1;

export interface ResolverOptions {
  fakeIps: FakeIps;
  blockEncryptedDns: boolean;
}

/** How a query was answered, as `octoprox_gateway_tunnel_dns_queries_total` labels it. */
export const DnsOutcome = {
  address: "address",
  empty: "empty",
  nxdomain: "nxdomain",
  refused: "refused",
  malformed: "malformed",
  notImplemented: "not_implemented",
  dropped: "dropped",
} as const;
export type DnsOutcome = (typeof DnsOutcome)[keyof typeof DnsOutcome];

export class FakeIpResolver {
  readonly #o: ResolverOptions;
  readonly #counts = new Map<DnsOutcome, number>(
    Object.values(DnsOutcome).map((outcome) => [outcome, 0]),
  );

  constructor(options: ResolverOptions) {
    this.#o = options;
  }

  /** The answer to `query`, or undefined when it gets none (not a query at all). Never rejects. */
  async answer(query: Uint8Array): Promise<Uint8Array | undefined> {
    const read = readQuery(query);
    if (!read.ok) {
      if (read.header === undefined || isResponse(read.header.flags)) {
        return this.#count(DnsOutcome.dropped, undefined);
      }
      return this.#count(
        DnsOutcome.malformed,
        writeAnswer({ id: read.header.id, queryFlags: read.header.flags, rcode: DnsRcode.formErr }),
      );
    }
    const { header, question, questionBytes } = read;
    if (isResponse(header.flags)) return this.#count(DnsOutcome.dropped, undefined);
    const reply = (rcode: DnsRcode) =>
      writeAnswer({ id: header.id, queryFlags: header.flags, rcode, questionBytes });
    if (opcodeOf(header.flags) !== 0) {
      return this.#count(DnsOutcome.notImplemented, reply(DnsRcode.notImp));
    }
    if (question.class !== DnsClass.in) {
      return this.#count(DnsOutcome.refused, reply(DnsRcode.refused));
    }
    if (this.#o.blockEncryptedDns && question.name === DOH_CANARY_NAME) {
      return this.#count(DnsOutcome.nxdomain, reply(DnsRcode.nxDomain));
    }
    if (!isHostName(question.name)) {
      return this.#count(DnsOutcome.nxdomain, reply(DnsRcode.nxDomain));
    }
    if (question.type !== DnsType.a) return this.#count(DnsOutcome.empty, reply(DnsRcode.noError));
    const address = await this.#o.fakeIps.assign(question.name);
    return this.#count(
      DnsOutcome.address,
      writeAnswer({
        id: header.id,
        queryFlags: header.flags,
        rcode: DnsRcode.noError,
        questionBytes,
        a: { address, ttlSeconds: ANSWER_TTL_SECONDS },
      }),
    );
  }

  samples(): MetricSample[] {
    return [...this.#counts].map(([outcome, count]) =>
      counterSample("octoprox_gateway_tunnel_dns_queries_total", count, `answer="${outcome}"`)
    );
  }

  #count<T>(outcome: DnsOutcome, answer: T): T {
    this.#counts.set(outcome, (this.#counts.get(outcome) ?? 0) + 1);
    return answer;
  }
}
