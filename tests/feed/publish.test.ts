/**
 * The fenced publish: only changed sections are written, the stream hears only of a new head,
 * a stored feed that does not verify is rewritten whole, and a process that does not hold the
 * lease writes nothing and loses its lead.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { SectionText } from "../../control/feed/compile.ts";
import { FeedPublisher, NotLeaderError } from "../../control/feed/publisher.ts";
import {
  deriveFeedKeys,
  type FeedKeys,
  manifestDigest,
  open,
  sectionDigest,
} from "../../shared/feed/codec.ts";
import { testSecrets } from "../../testkit/stores.ts";
import { type FeedBed, feedBed } from "../../testkit/feed.ts";

const beds: FeedBed[] = [];
afterEach(async () => {
  for (const bed of beds.splice(0)) await bed.close();
});

async function leadingBed(): Promise<FeedBed> {
  const bed = await feedBed();
  beds.push(bed);
  await bed.lead();
  return bed;
}

async function sections(
  keys: FeedKeys,
  content: Record<string, unknown>,
): Promise<Map<string, SectionText>> {
  const out = new Map<string, SectionText>();
  for (const [name, value] of Object.entries(content)) {
    const json = JSON.stringify(value);
    out.set(name, { json, digest: await sectionDigest(keys, json) });
  }
  return out;
}

const feed = (connectors: Record<string, unknown>) => ({
  global: { schema: 1, projects: [] },
  runtime: { schema: 1, quarantines: [], traffic_blocks: [], project_blocks: [] },
  ...Object.fromEntries(Object.entries(connectors).map(([id, v]) => [`connector:${id}`, v])),
});

function publisherOf(bed: FeedBed, feedKeys = bed.feedKeys) {
  return new FeedPublisher({ redis: bed.redis, keys: bed.keys, feedKeys, lease: bed.lease });
}

describe("feed publish", () => {
  it("writes the feed whole at first, then only what changed, and wakes gateways only on a new head", async () => {
    const bed = await leadingBed();
    const publisher = publisherOf(bed);
    const { redis, keys } = bed;

    const first = await publisher.publish(
      await sections(bed.feedKeys, feed({ a: { n: 1 }, b: { n: 2 } })),
      1000,
    );
    expect(first).toMatchObject({
      outcome: "appended",
      headWasMissing: true,
      rewrittenWhole: "no head stored",
    });
    expect(first.written).toEqual(["connector:a", "connector:b", "global", "runtime"]);
    const manifest = (await redis.get(keys.feedManifest))!;
    const head = JSON.parse((await redis.get(keys.feedHead))!);
    expect(head).toEqual({ schema: 1, digest: first.headDigest, compiled_at: 1000 });
    expect(await manifestDigest(bed.feedKeys, manifest)).toBe(head.digest);
    expect(Object.keys(JSON.parse(manifest).sections)).toEqual([
      "connector:a",
      "connector:b",
      "global",
      "runtime",
    ]);
    const entries = await redis.xrange(keys.feedStream, "-", "+");
    expect(entries.map(([, f]) => f)).toEqual([["digest", first.headDigest]]);
    const storedB = await redis.hgetBuffer(keys.feedSections, "connector:b");
    expect(await open(bed.feedKeys, storedB!)).toBe(JSON.stringify({ n: 2 }));

    // The same feed again: nothing written, no entry.
    const same = await publisher.publish(
      await sections(bed.feedKeys, feed({ a: { n: 1 }, b: { n: 2 } })),
      2000,
    );
    expect(same).toMatchObject({ outcome: "unchanged", written: [], removed: [] });
    expect(await redis.xlen(keys.feedStream)).toBe(1);
    expect(JSON.parse((await redis.get(keys.feedHead))!).compiled_at).toBe(1000);

    // One connector changes, another appears, one goes.
    const next = await publisher.publish(
      await sections(bed.feedKeys, feed({ a: { n: 10 }, c: { n: 3 } })),
      3000,
    );
    expect(next).toMatchObject({
      outcome: "appended",
      written: ["connector:a", "connector:c"],
      removed: ["connector:b"],
      rewrittenWhole: undefined,
      headWasMissing: false,
    });
    expect((await redis.hkeys(keys.feedSections)).sort()).toEqual([
      "connector:a",
      "connector:c",
      "global",
      "runtime",
    ]);
    expect(await redis.xlen(keys.feedStream)).toBe(2);
    const storedGlobal = await redis.hgetBuffer(keys.feedSections, "global");
    // Untouched sections keep their stored bytes (no fresh nonce).
    const firstGlobal = await publisher.publish(
      await sections(bed.feedKeys, feed({ a: { n: 10 }, c: { n: 3 } })),
      4000,
    );
    expect(firstGlobal.outcome).toBe("unchanged");
    expect((await redis.hgetBuffer(keys.feedSections, "global"))!.equals(storedGlobal!)).toBe(true);
  });

  it("rewrites whole a stored feed that does not verify, or that lost a section", async () => {
    const bed = await leadingBed();
    const { redis, keys } = bed;
    const content = feed({ a: { n: 1 }, b: { n: 2 } });
    // A feed written under another secret (a rotated secret, or a forger) is not trusted.
    const foreign = await deriveFeedKeys(testSecrets().internal);
    await publisherOf(bed, foreign).publish(await sections(foreign, content), 1);
    const repaired = await publisherOf(bed).publish(await sections(bed.feedKeys, content), 2);
    expect(repaired).toMatchObject({
      outcome: "appended",
      rewrittenWhole: "the stored feed does not verify with this secret",
      headWasMissing: false,
    });
    expect(repaired.written).toHaveLength(4);
    for (const name of repaired.written) {
      await expect(open(bed.feedKeys, (await redis.hgetBuffer(keys.feedSections, name))!))
        .resolves.toBeTypeOf("string");
    }

    // A section lost from the hash: the same head, so written again without a stream entry.
    await redis.hdel(keys.feedSections, "connector:b");
    await redis.hset(keys.feedSections, "connector:stray", "junk");
    const before = await redis.xlen(keys.feedStream);
    const again = await publisherOf(bed).publish(await sections(bed.feedKeys, content), 3);
    expect(again).toMatchObject({
      outcome: "written",
      rewrittenWhole: "1 listed section(s) missing",
      headDigest: repaired.headDigest,
    });
    expect(await redis.xlen(keys.feedStream)).toBe(before);
    expect((await redis.hkeys(keys.feedSections)).sort()).toEqual([
      "connector:a",
      "connector:b",
      "global",
      "runtime",
    ]);
  });

  it("refuses a publish by a process that does not hold the lease, and marks the lead lost", async () => {
    const bed = await leadingBed();
    const { redis, keys } = bed;
    const publisher = publisherOf(bed);
    await publisher.publish(await sections(bed.feedKeys, feed({ a: { n: 1 } })), 1);
    const head = await redis.get(keys.feedHead);
    const lead = bed.lease.lead!;
    // Another controller took the key (this one stalled past its TTL).
    await redis.set(keys.controllerLease, "another-controller", "PX", 60_000);
    await expect(
      publisher.publish(await sections(bed.feedKeys, feed({ a: { n: 2 } })), 2),
    ).rejects.toThrow(NotLeaderError);
    expect(bed.lease.leading).toBe(false);
    expect(lead.signal.aborted).toBe(true);
    // Nothing was written: the feed cannot be rolled by a former leader.
    expect(await redis.get(keys.feedHead)).toBe(head);
    expect(await redis.xlen(keys.feedStream)).toBe(1);
  });
});
