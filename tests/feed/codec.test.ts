import { describe, expect, it } from "vitest";
import {
  deriveFeedKeys,
  FeedIntegrityError,
  manifestDigest,
  open,
  passwordDigest,
  seal,
  SEAL_VERSION,
  sectionDigest,
  verifyPassword,
} from "../../shared/feed/codec.ts";
import { fillPlaceholders } from "../../shared/feed/placeholders.ts";
import { parseSection } from "../../shared/feed/sections.ts";
import { SCHEMA_VERSION } from "../../shared/feed/models.ts";
import { connector as feedConnector } from "../../testkit/gateway/feed-fixtures.ts";
import { testSecrets } from "../../testkit/stores.ts";

const SECTION = JSON.stringify({
  schema: 1,
  connector: { id: "c1", name: "Zürich ✓" },
  proxies: [{ id: "p1", password: "s3cret" }],
});

describe("feed keys", () => {
  it("derives four distinct keys, the same from the same secret", async () => {
    const secret = testSecrets().internal;
    const a = await deriveFeedKeys(secret);
    const b = await deriveFeedKeys(secret);
    const other = await deriveFeedKeys(testSecrets().internal);
    expect(a.gatewayToken).toHaveLength(32);
    expect(a.gatewayTokenHex).toBe(b.gatewayTokenHex);
    expect(a.gatewayTokenHex).not.toBe(other.gatewayTokenHex);
    // The digest key and the password key differ: the same text digests differently.
    const text = "same text";
    const digest = await sectionDigest(a, text);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(await passwordDigest(a, text)).not.toBe(digest);
    expect(await sectionDigest(b, text)).toBe(digest);
    expect(await sectionDigest(other, text)).not.toBe(digest);
    // Nor is the gateway token any of the HMAC outputs under the others' keys.
    expect([digest, await passwordDigest(a, text)]).not.toContain(a.gatewayTokenHex);
    expect(await manifestDigest(a, text)).toBe(digest);
  });

  it("checks a project password against its digest", async () => {
    const keys = await deriveFeedKeys(testSecrets().internal);
    const digest = await passwordDigest(keys, "correct horse");
    expect(await verifyPassword(keys, "correct horse", digest)).toBe(true);
    expect(await verifyPassword(keys, "correct hors", digest)).toBe(false);
    expect(await verifyPassword(keys, "correct horse", digest.slice(0, -1))).toBe(false);
    const other = await deriveFeedKeys(testSecrets().internal);
    expect(await verifyPassword(other, "correct horse", digest)).toBe(false);
  });
});

describe("sealing", () => {
  it("round-trips a section, with a fresh nonce each time and one digest", async () => {
    const keys = await deriveFeedKeys(testSecrets().internal);
    const first = await seal(keys, SECTION);
    const second = await seal(keys, SECTION);
    expect(first[0]).toBe(SEAL_VERSION);
    expect(Buffer.from(first).equals(Buffer.from(second))).toBe(false);
    expect(await open(keys, first)).toBe(SECTION);
    expect(await open(keys, second)).toBe(SECTION);
    // The digest is of the plaintext: unchanged by sealing again.
    expect(await sectionDigest(keys, await open(keys, second))).toBe(
      await sectionDigest(keys, SECTION),
    );
    // Nothing of the plaintext is readable in the sealed bytes.
    expect(Buffer.from(first).toString("latin1")).not.toContain("s3cret");
  });

  it("refuses altered bytes, another secret, a truncation and an unknown version", async () => {
    const keys = await deriveFeedKeys(testSecrets().internal);
    const sealed = await seal(keys, SECTION);
    const flipped = sealed.slice();
    flipped[flipped.length - 20] ^= 0x01;
    await expect(open(keys, flipped)).rejects.toThrow(FeedIntegrityError);
    const nonce = sealed.slice();
    nonce[3] ^= 0x80;
    await expect(open(keys, nonce)).rejects.toThrow(/altered, or sealed with another secret/);
    const other = await deriveFeedKeys(testSecrets().internal);
    await expect(open(other, sealed)).rejects.toThrow(FeedIntegrityError);
    await expect(open(keys, sealed.subarray(0, 20))).rejects.toThrow(FeedIntegrityError);
    const version = sealed.slice();
    version[0] = 9;
    await expect(open(keys, version)).rejects.toThrow(/unknown version 9/);
  });
});

describe("placeholders", () => {
  it("fills from the connector first, then the credential; only non-empty strings fill", () => {
    const sources = {
      connector: { zone: "residential", user: "", num: 7 },
      credential: { user: "acct", zone: "dc", pass: "pw" },
    };
    expect(fillPlaceholders("{user}-zone-{zone}", sources)).toBe("acct-zone-residential");
    expect(fillPlaceholders("{pass}", sources)).toBe("pw");
    // A number fills nothing; a placeholder nothing fills stays as it is.
    expect(fillPlaceholders("{num}:{missing}", sources)).toBe("{num}:{missing}");
    expect(fillPlaceholders(null, sources)).toBeNull();
    expect(fillPlaceholders("plain", sources)).toBe("plain");
    expect(fillPlaceholders("{user}", {})).toBe("{user}");
    // Inherited properties are not configuration.
    expect(fillPlaceholders("{constructor}", { connector: {} })).toBe("{constructor}");
  });
});

describe("section models", () => {
  const proxy = {
    id: "p1",
    scheme: "http",
    host: "10.0.0.1",
    port: 3128,
    username: null,
    password: null,
    country: "DE",
    status: "healthy",
    max_concurrency: null,
  };
  const connector = feedConnector("c1", { project_id: "p", name: "n" });
  const section = (proxies: unknown[]) =>
    JSON.stringify({ schema: SCHEMA_VERSION, connector, proxies });

  it("accepts a connector section and names the first row that breaks the model", () => {
    const parsed = parseSection("connector:c1", section([proxy, { ...proxy, id: "p2" }]));
    expect(parsed.kind).toBe("connector");
    expect(() => parseSection("connector:c1", section([proxy, { ...proxy, port: "80" }])))
      .toThrow(/proxies\.1\.port/);
    expect(() => parseSection("connector:c1", section([{ ...proxy, status: "gone" }])))
      .toThrow(/proxies\.0\.status/);
    expect(() => parseSection("connector:other", section([]))).toThrow(/differs from its name/);
    expect(() => parseSection("mystery", section([]))).toThrow(/unknown section name/);
    expect(() => parseSection("global", JSON.stringify({ schema: 1, projects: [] })))
      .toThrow(FeedIntegrityError);
  });
});
