/**
 * The controller's fenced write of the routing feed. Every section arrives with the digest of
 * its JSON; the publisher reads what Redis holds (head, manifest, the names in the sections
 * hash), seals only the sections whose digest differs, and hands everything to one Lua script
 * (shared/lua/feed_publish.lua) that checks the lease still names this holder, writes the
 * changed sections, drops the removed ones, writes the manifest and the head, and appends to the
 * feed stream only when the head's digest changed. An unchanged feed writes nothing at all.
 *
 * The stored feed is trusted only when it verifies with this process's secret: the head's
 * digest is the HMAC of the stored manifest, and every section the manifest lists is stored.
 * Otherwise (no head, a wiped or partly lost Redis, a rotated secret, another schema) the feed
 * is rewritten in full, which repairs all of them with no special case.
 */
import type { Redis } from "ioredis";
import {
  type FeedKeys,
  manifestDigest,
  open,
  seal,
  sectionDigest,
} from "../../shared/feed/codec.ts";
import { headJson, manifestJson, readHead, readManifest } from "../../shared/feed/manifest.ts";
import { type RedisKeys, STREAM_CAPS } from "../../shared/redis-keys.ts";
import { feedPublishOutcome, runScript } from "../core/scripts.ts";
import type { SectionText } from "./compile.ts";
import { NotLeaderError } from "../../shared/errors.ts";

/** What the publisher needs of the controller lease. */
export interface PublisherLease {
  readonly holderId: string;
  markLost(reason: string): void;
}

export interface FeedPublisherOptions {
  redis: Redis;
  keys: Pick<
    RedisKeys,
    "controllerLease" | "feedHead" | "feedManifest" | "feedSections" | "feedStream"
  >;
  feedKeys: FeedKeys;
  lease: PublisherLease;
}

export interface PublishResult {
  /** `unchanged`: nothing written; `appended`: written and the gateways woken; `written`: a repair that left the head's digest as it was. */
  outcome: "unchanged" | "appended" | "written";
  headDigest: string;
  /** Section names written, sorted. */
  written: readonly string[];
  /** Section names dropped, sorted (empty for a rewrite in full, which drops every one). */
  removed: readonly string[];
  /** Why the stored feed was rewritten in full, when it was. */
  rewrittenWhole: string | undefined;
  /** No head was stored: a first start or a wiped Redis (the builder cannot tell them apart). */
  headWasMissing: boolean;
}

export { NotLeaderError };

/** A publish of this process raced another write of the head; tried again a few times. */
const STALE_ATTEMPTS = 3;

interface Stored {
  headText: string | null;
  /** Section digests by name, when the stored feed verifies; undefined otherwise. */
  digests: ReadonlyMap<string, string> | undefined;
  /** Every name in the sections hash (listed or not). */
  names: readonly string[];
  headDigest: string | undefined;
  whyWhole: string | undefined;
}

export class FeedPublisher {
  readonly #o: FeedPublisherOptions;

  constructor(options: FeedPublisherOptions) {
    this.#o = options;
  }

  /**
   * Publishes a complete feed: `sections` holds every section (global, runtime, one per
   * connector) by name. Throws NotLeaderError (after marking the lease lost) when the lease
   * names another holder.
   *
   * `verifySections` also opens every stored section and checks it against the manifest (the
   * builder asks for it on its full reads: each new lead and reconcile), so a section altered
   * in place, which a manifest check alone cannot see, is repaired too.
   */
  async publish(
    sections: ReadonlyMap<string, SectionText>,
    compiledAtMs: number,
    options: { verifySections?: boolean } = {},
  ): Promise<PublishResult> {
    const digests = new Map<string, string>();
    for (const [name, text] of sections) digests.set(name, text.digest);
    const manifest = manifestJson(digests);
    const headDigest = await manifestDigest(this.#o.feedKeys, manifest);
    const head = headJson(headDigest, compiledAtMs);
    for (let attempt = 1;; attempt++) {
      const stored = await this.#readStored(options.verifySections ?? false);
      const result = await this.#write(sections, manifest, head, headDigest, stored);
      if (result !== "stale") return result;
      if (attempt >= STALE_ATTEMPTS) {
        throw new Error(`Feed head moved under ${STALE_ATTEMPTS} publishes in a row`);
      }
    }
  }

  async #readStored(verifySections: boolean): Promise<Stored> {
    const { redis, keys, feedKeys } = this.#o;
    const replies = await redis.multi()
      .get(keys.feedHead)
      .get(keys.feedManifest)
      .hkeys(keys.feedSections)
      .exec();
    if (!replies) throw new Error("Feed read was discarded");
    for (const [error] of replies) if (error) throw error;
    const headText = replies[0][1] as string | null;
    const manifestText = replies[1][1] as string | null;
    const names = replies[2][1] as string[];
    const whole = (whyWhole: string, headDigest?: string): Stored => ({
      headText,
      digests: undefined,
      names,
      headDigest,
      whyWhole,
    });
    if (headText === null) return whole("no head stored");
    const read = readHead(headText);
    if (read.kind === "other_schema") return whole("the head is of another feed schema");
    if (read.kind === "invalid") return whole(`the head is not valid: ${read.problem}`);
    const storedDigest = read.head.digest;
    if (manifestText === null) return whole("no manifest stored", storedDigest);
    if ((await manifestDigest(feedKeys, manifestText)) !== storedDigest) {
      return whole("the stored feed does not verify with this secret", storedDigest);
    }
    const manifest = readManifest(manifestText);
    if (!manifest) return whole("the manifest is not valid", storedDigest);
    const present = new Set(names);
    const missing = Object.keys(manifest.sections).filter((name) => !present.has(name));
    if (missing.length > 0) {
      return whole(`${missing.length} listed section(s) missing`, storedDigest);
    }
    if (verifySections) {
      const bad = await this.#unverifiedSection(manifest.sections);
      if (bad !== undefined) return whole(`section ${bad} does not verify`, storedDigest);
    }
    return {
      headText,
      digests: new Map(Object.entries(manifest.sections)),
      names,
      headDigest: storedDigest,
      whyWhole: undefined,
    };
  }

  /** The first listed section that does not open to its manifest digest, if any. */
  async #unverifiedSection(listed: Record<string, string>): Promise<string | undefined> {
    const { redis, keys, feedKeys } = this.#o;
    const stored = await redis.hgetallBuffer(keys.feedSections);
    for (const [name, digest] of Object.entries(listed)) {
      const bytes = stored[name];
      if (bytes === undefined) return name;
      try {
        if ((await sectionDigest(feedKeys, await open(feedKeys, bytes))) !== digest) return name;
      } catch {
        return name;
      }
    }
    return undefined;
  }

  async #write(
    sections: ReadonlyMap<string, SectionText>,
    manifest: string,
    head: string,
    headDigest: string,
    stored: Stored,
  ): Promise<PublishResult | "stale"> {
    const { redis, keys, feedKeys, lease } = this.#o;
    const whole = stored.digests === undefined;
    const toWrite: string[] = [];
    for (const [name, text] of sections) {
      if (whole || stored.digests!.get(name) !== text.digest) toWrite.push(name);
    }
    toWrite.sort();
    // Listed or not (a stray field), whatever the new feed does not hold goes.
    const removed = whole ? [] : stored.names.filter((name) => !sections.has(name)).sort();
    const headChanged = stored.headDigest !== headDigest;
    const base = {
      headDigest,
      written: toWrite,
      removed,
      rewrittenWhole: stored.whyWhole,
      headWasMissing: stored.headText === null,
    };
    if (!whole && !headChanged && toWrite.length === 0 && removed.length === 0) {
      return { ...base, outcome: "unchanged" };
    }
    const sealed = await Promise.all(
      toWrite.map((name) => seal(feedKeys, sections.get(name)!.json)),
    );
    const args: (string | number | Buffer)[] = [
      lease.holderId,
      stored.headText ?? "",
      head,
      manifest,
      headDigest,
      headChanged ? "1" : "0",
      STREAM_CAPS.feed,
      whole ? "1" : "0",
      removed.length,
      ...removed,
    ];
    toWrite.forEach((name, i) => {
      const bytes = sealed[i];
      args.push(name, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    });
    const outcome = feedPublishOutcome(
      await runScript(
        redis,
        "feed_publish",
        [
          keys.controllerLease,
          keys.feedHead,
          keys.feedManifest,
          keys.feedSections,
          keys.feedStream,
        ],
        args,
      ),
    );
    switch (outcome) {
      case "not_leader":
        lease.markLost("a feed publish found the lease gone or held by another controller");
        throw new NotLeaderError();
      case "stale":
        return "stale";
      case "appended":
      case "written":
        return { ...base, outcome };
    }
  }
}
