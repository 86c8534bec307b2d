/**
 * The observation stream entry (shared/geo/observation-wire.ts) and the recorder's buffer
 * (shared/geo/observation-buffer.ts), without stores: an entry reads back as it was written,
 * addresses are kept in one form, long ids are cut rather than refused, what no column can hold
 * is malformed with a reason; a full buffer drops its oldest, and an owed part goes again
 * unchanged under its number until confirmed.
 */
import { describe, expect, it } from "vitest";
import {
  decodeObservation,
  encodeObservation,
  exitAddress,
  MAX_INSTANCE_ID_CHARS,
  MAX_SESSION_ID_CHARS,
  type Observation,
} from "../../shared/geo/observation-wire.ts";
import { ObservationBuffer } from "../../shared/geo/observation-buffer.ts";

const PROJECT = "6f1d3c1e-0000-4000-8000-000000000001";
const CONNECTOR = "6f1d3c1e-0000-4000-8000-000000000002";
const PROXY = "6f1d3c1e-0000-4000-8000-000000000003";

function observation(overrides: Partial<Observation> = {}): Observation {
  return {
    observedAt: Date.UTC(2026, 11, 5, 12),
    ip: "203.0.113.7",
    projectId: PROJECT,
    connectorId: CONNECTOR,
    proxyId: PROXY,
    source: "health",
    sessionId: null,
    instanceId: "worker-1",
    country: "DE",
    region: "DE-BE",
    city: "Berlin",
    asn: 64_500,
    claimedCountry: "DE",
    sources: ["database", "vendor"],
    ...overrides,
  };
}

function decoded(text: string) {
  const result = decodeObservation(text);
  if (!result.ok) throw new Error(`Expected an observation, got: ${result.reason}`);
  return result.observation;
}

function reason(text: string | undefined): string {
  const result = decodeObservation(text);
  if (result.ok) throw new Error("Expected a malformed entry");
  return result.reason;
}

describe("the stream entry", () => {
  it("reads back what was written", () => {
    expect(decoded(encodeObservation(observation()))).toEqual(observation());
  });

  it("keeps one form of an address", () => {
    expect(exitAddress("203.0.113.7")).toBe("203.0.113.7");
    expect(exitAddress("2001:DB8:0:0::1")).toBe("2001:db8::1");
    expect(exitAddress("[2001:db8::1]")).toBe("2001:db8::1");
    expect(exitAddress("::ffff:198.51.100.4")).toBe("198.51.100.4");
    // What inet_aton reads is not an address an echo answers.
    expect(exitAddress("127.1")).toBeUndefined();
    expect(exitAddress("example.com")).toBeUndefined();
    expect(decoded(encodeObservation(observation({ ip: "2001:DB8::1" }))).ip).toBe("2001:db8::1");
  });

  it("cuts a long session or instance id rather than refusing the entry", () => {
    const read = decoded(encodeObservation(observation({
      sessionId: "s".repeat(1000),
      instanceId: "i".repeat(100),
    })));
    expect(read.sessionId).toBe("s".repeat(MAX_SESSION_ID_CHARS));
    expect(read.instanceId).toBe("i".repeat(MAX_INSTANCE_ID_CHARS));
    // A cut never leaves half of a surrogate pair.
    const emoji = "\u{1F600}";
    const cut = decoded(encodeObservation(observation({
      sessionId: "s".repeat(MAX_SESSION_ID_CHARS - 1) + emoji,
    }))).sessionId!;
    expect(cut).toBe("s".repeat(MAX_SESSION_ID_CHARS - 1));
  });

  it("drops an ASN past the column; a country is upper case", () => {
    const read = decoded(encodeObservation(observation({ asn: 4_200_000_000, country: "de" })));
    expect(read.asn).toBeNull();
    expect(read.country).toBe("DE");
  });

  it("names why an entry is malformed", () => {
    const json = (fields: Record<string, unknown>) =>
      JSON.stringify({ ...JSON.parse(encodeObservation(observation())), ...fields });
    expect(reason(undefined)).toBe('no "o" field');
    expect(reason("{not json")).toBe("not JSON");
    expect(reason("[1]")).toBe("not a JSON object");
    expect(reason(json({ v: 2 }))).toBe("version 2");
    expect(reason(json({ observed_at: "yesterday" }))).toMatch(/observed_at/);
    expect(reason(json({ ip: "nowhere" }))).toMatch(/ip/);
    expect(reason(json({ source: "guess" }))).toMatch(/source/);
    expect(reason(json({ proxy_id: "p-1" }))).toMatch(/uuid/);
    expect(reason(json({ city: "Ber\u0000lin" }))).toMatch(/storable/);
    expect(reason(json({ country: "Germany" }))).toMatch(/two-letter/);
    expect(reason(json({ sources: "database" }))).toMatch(/list/);
  });
});

describe("the recorder's buffer", () => {
  it("drops its oldest once full", () => {
    const buffer = new ObservationBuffer(3);
    for (let i = 0; i < 5; i++) buffer.record(observation({ observedAt: i }));
    expect(buffer.counts()).toMatchObject({ recorded: 5, dropped: 2, buffered: 3 });
    const part = buffer.next()!;
    expect(part.entries.map((e) => JSON.parse(e).observed_at)).toEqual([2, 3, 4]);
  });

  it("sends an owed part again unchanged until confirmed, then numbers the next", () => {
    const buffer = new ObservationBuffer(10);
    buffer.record(observation({ observedAt: 1 }));
    const first = buffer.next()!;
    buffer.record(observation({ observedAt: 2 }));
    // Not confirmed: the same part, the new observation still buffered.
    expect(buffer.next()).toBe(first);
    expect(buffer.counts()).toMatchObject({ owed: 1, buffered: 1, published: 0 });
    buffer.confirmed(first);
    const second = buffer.next()!;
    expect(second.number).toBe(first.number + 1);
    expect(second.entries).toHaveLength(1);
    buffer.confirmed(second);
    expect(buffer.counts()).toMatchObject({ recorded: 2, published: 2, owed: 0, buffered: 0 });
    expect(buffer.next()).toBeUndefined();
  });
});
