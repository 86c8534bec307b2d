/**
 * Properties of the PROXY protocol header a trusted balancer sends before a connection's own
 * protocol (shared/proxy-protocol/proxy-header.ts, read at the socket edge by
 * gateway/net/io/proxy-prelude.ts): any bytes read as a header, no header, a wait below the
 * bound, or a ProxyHeaderError with a message; a header written for two endpoints reads back as
 * them; and the prelude reads the same however the bytes arrive.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  encodeProxyV1,
  encodeProxyV2,
  PROXY_V1_MAX_BYTES,
  PROXY_V2_MAX_BYTES,
  type ProxyEndpoint,
  ProxyHeaderError,
  readProxyHeader,
  startsProxyHeader,
} from "../../shared/proxy-protocol/proxy-header.ts";
import { ipv4, ipv6 } from "./grammar.ts";
import { check, cutAt, cutOffsets, cuts, joinBytes, mutatedBytes, outcome } from "./runs.ts";

const endpoints = fc.oneof(
  fc.tuple(ipv4, ipv4, fc.constant(4 as const)),
  fc.tuple(ipv6, ipv6, fc.constant(6 as const)),
).chain(([source, destination, family]) =>
  fc.tuple(fc.integer({ min: 0, max: 65535 }), fc.integer({ min: 0, max: 65535 })).map((
    [sourcePort, destinationPort],
  ): [ProxyEndpoint, ProxyEndpoint] => [
    { address: source, port: sourcePort, family },
    { address: destination, port: destinationPort, family },
  ])
);

/** A header of either version (or a LOCAL / UNKNOWN one), then the client's first bytes. */
const headed = fc.tuple(
  fc.option(endpoints, { nil: undefined, freq: 6 }),
  fc.boolean(),
  fc.uint8Array({ maxLength: 24 }),
  fc.uint8Array({ maxLength: 12 }),
).map(([ends, v2, tlvs, after]) => {
  const header = v2
    ? encodeProxyV2(ends?.[0], ends?.[1], tlvs)
    : encodeProxyV1(ends?.[0], ends?.[1]);
  return { ends, v2, header, bytes: joinBytes([header, after]) };
});

const isRefusal = (error: unknown) => error instanceof ProxyHeaderError;

type Prelude =
  | { kind: "closed" }
  | { kind: "refused"; reason: string }
  | { kind: "ready"; client: ProxyEndpoint | undefined; rest: number[] };

/**
 * Reads a connection's first bytes as the socket edge does (gateway/net/io/proxy-prelude.ts,
 * which runs on Deno sockets only): until it is clear whether they begin a header; a header
 * from a peer not trusted to send one is refused; a trusted one's is read once whole.
 */
function prelude(chunks: readonly Uint8Array[], trusted: boolean): Prelude {
  let buffered: Uint8Array = new Uint8Array(0);
  for (let next = 0;; next++) {
    const starts = startsProxyHeader(buffered);
    if (starts === false) return { kind: "ready", client: undefined, rest: [...buffered] };
    if (starts === true && !trusted) return { kind: "refused", reason: "untrusted" };
    if (starts === true) {
      const read = outcome(() => readProxyHeader(buffered), isRefusal);
      if (!read.ok) return { kind: "refused", reason: read.error.message };
      if (read.value.kind === "local" || read.value.kind === "proxied") {
        const client = read.value.kind === "proxied" ? read.value.source : undefined;
        return { kind: "ready", client, rest: [...buffered.subarray(read.value.consumed)] };
      }
    }
    if (next >= chunks.length) return { kind: "closed" };
    buffered = joinBytes([buffered, chunks[next]]);
  }
}

describe("PROXY protocol headers (property)", () => {
  it("any bytes: a header, none, a wait below the bound, or a ProxyHeaderError with a message", () => {
    check(
      fc.property(mutatedBytes(headed.map((h) => h.bytes)), (bytes) => {
        const read = outcome(() => readProxyHeader(bytes), isRefusal);
        if (read.ok && read.value.kind === "incomplete") {
          expect(bytes.length).toBeLessThan(Math.max(PROXY_V1_MAX_BYTES, PROXY_V2_MAX_BYTES));
        }
        if (read.ok && "consumed" in read.value) {
          expect(read.value.consumed).toBeLessThanOrEqual(bytes.length);
        }
      }),
      3,
    );
  });

  it("a header written for two endpoints reads back as them", () => {
    check(
      fc.property(headed, ({ ends, v2, header, bytes }) => {
        const read = readProxyHeader(bytes);
        if (ends === undefined) {
          expect(read).toEqual({ kind: "local", version: v2 ? 2 : 1, consumed: header.length });
          return;
        }
        expect(read).toEqual({
          kind: "proxied",
          version: v2 ? 2 : 1,
          consumed: header.length,
          source: ends[0],
          destination: ends[1],
        });
      }),
    );
  });

  it("the prelude reads the same whole or cut into reads at any bytes", () => {
    check(
      fc.property(
        mutatedBytes(headed.map((h) => h.bytes)),
        cuts,
        fc.boolean(),
        (bytes, fractions, trusted) => {
          const whole = prelude([bytes], trusted);
          const split = prelude(cutAt(bytes, cutOffsets(bytes.length, fractions)), trusted);
          if (whole.kind === "ready" && split.kind === "ready") {
            // Cut into reads, the prelude may be done before all of them came (the session
            // reads the rest itself): what it has is the start of what whole had.
            expect(split.client).toEqual(whole.client);
            expect(whole.rest.slice(0, split.rest.length)).toEqual(split.rest);
            return;
          }
          expect(split).toEqual(whole);
        },
      ),
      2,
    );
  });
});
