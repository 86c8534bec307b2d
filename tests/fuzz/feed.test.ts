/**
 * Properties of the routing feed's decoders (shared/feed/codec.ts, sections.ts, manifest.ts), as
 * a gateway meets what it reads from Redis: sealed bytes open to the JSON sealed, and anything
 * else (altered, truncated, another secret) is a FeedIntegrityError; a section's text parses to
 * its model or a FeedIntegrityError naming the section and what is wrong; the hand-written check
 * of a connector's proxy rows accepts exactly what their schema accepts; heads and manifests
 * read as their kinds, never a throw.
 */
import fc from "fast-check";
import * as v from "valibot";
import { beforeAll, describe, expect, it } from "vitest";
import {
  deriveFeedKeys,
  FeedIntegrityError,
  type FeedKeys,
  open,
  seal,
} from "../../shared/feed/codec.ts";
import { readHead, readManifest } from "../../shared/feed/manifest.ts";
import {
  connectorSectionName,
  ConnectorSectionSchema,
  GLOBAL_SECTION,
  GlobalSectionSchema,
  HeadSchema,
  ManifestSchema,
  RUNTIME_SECTION,
  RuntimeSectionSchema,
} from "../../shared/feed/models.ts";
import { parseSection } from "../../shared/feed/sections.ts";
import { connector } from "../../testkit/gateway/feed-fixtures.ts";
import { check, checkAsync, mutatedBytes, mutatedText, outcome } from "./runs.ts";
import { valueFor } from "./valibot-arbitrary.ts";

let keys: FeedKeys;
let otherKeys: FeedKeys;

beforeAll(async () => {
  keys = await deriveFeedKeys("fuzz-secret");
  otherKeys = await deriveFeedKeys("another-secret");
});

const isIntegrityError = (error: unknown) => error instanceof FeedIntegrityError;

async function opened(sealed: Uint8Array, with_: FeedKeys): Promise<string | FeedIntegrityError> {
  try {
    return await open(with_, sealed);
  } catch (error) {
    if (!isIntegrityError(error)) throw error;
    expect((error as Error).message.length).toBeGreaterThan(8);
    return error as FeedIntegrityError;
  }
}

const CONNECTOR_ID = "5f0c7a52-8d0e-4a3b-9f6e-0a1b2c3d4e5f";

/** A section's name with text mostly of its model's shape. */
const section: fc.Arbitrary<{ name: string; json: string }> = fc.oneof(
  valueFor(GlobalSectionSchema).map((value) => ({ name: GLOBAL_SECTION, value })),
  valueFor(RuntimeSectionSchema).map((value) => ({ name: RUNTIME_SECTION, value })),
  valueFor(ConnectorSectionSchema).map((value) => {
    // Mostly the connector its name says (generated values are frozen: copied).
    const name = connectorSectionName(CONNECTOR_ID);
    if (typeof value !== "object" || value === null || Array.isArray(value)) return { name, value };
    const connector = (value as { connector?: unknown }).connector;
    if (typeof connector !== "object" || connector === null) return { name, value };
    return { name, value: { ...value, connector: { ...connector, id: CONNECTOR_ID } } };
  }),
).map(({ name, value }) => ({ name, json: JSON.stringify(value) ?? "null" }));

describe("the feed's sealed sections (property)", () => {
  it("sealed JSON opens to the same text", async () => {
    await checkAsync(
      fc.asyncProperty(fc.string({ unit: "grapheme", maxLength: 200 }), async (json) => {
        expect(await opened(await seal(keys, json), keys)).toBe(json);
      }),
      0.5,
    );
  });

  it("altered, truncated or foreign sealed bytes: a FeedIntegrityError with a message", async () => {
    await checkAsync(
      fc.asyncProperty(
        fc.string({ maxLength: 60 }),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), {
          minLength: 1,
          maxLength: 3,
        }),
        fc.nat(),
        async (json, flips, cut) => {
          const sealed = await seal(keys, json);
          const altered = sealed.slice();
          // One change per byte: two at one byte could cancel out.
          const changed = new Map(flips.map(([at, xor]) => [at % altered.length, xor]));
          for (const [at, xor] of changed) altered[at] ^= xor;
          expect(await opened(altered, keys)).toBeInstanceOf(FeedIntegrityError);
          expect(await opened(sealed.slice(0, cut % sealed.length), keys)).toBeInstanceOf(
            FeedIntegrityError,
          );
          expect(await opened(sealed, otherKeys)).toBeInstanceOf(FeedIntegrityError);
        },
      ),
      0.5,
    );
  });

  it("any bytes: JSON or a FeedIntegrityError with a message", async () => {
    await checkAsync(
      fc.asyncProperty(
        mutatedBytes(fc.uint8Array({ minLength: 29, maxLength: 80 })),
        async (bytes) => {
          await opened(bytes, keys);
        },
      ),
      0.5,
    );
  });
});

describe("the feed's section decoders (property)", () => {
  it("any text under any section name: its model, or a FeedIntegrityError naming the section", () => {
    check(
      fc.property(
        fc.oneof(
          { weight: 4, arbitrary: section },
          {
            weight: 1,
            arbitrary: fc.record({
              name: fc.oneof(
                fc.constantFrom("global", "runtime", "connector:", "connector:x", "other"),
                fc.string({ maxLength: 12 }),
              ),
              json: fc.string({ maxLength: 20 }),
            }),
          },
        ),
        fc.boolean(),
        ({ name, json }, mutate) => {
          const text = mutate ? String.fromCharCode(...new TextEncoder().encode(json)) : json;
          const read = outcome(() => parseSection(name, text), isIntegrityError);
          if (!read.ok) expect(read.error.message).toContain(`Section ${name} `);
        },
      ),
      2,
    );
  });

  it("mutated section text: its model or a FeedIntegrityError", () => {
    check(
      fc.property(
        section.chain(({ name, json }) =>
          mutatedText(fc.constant(json)).map((text) => ({ name, text }))
        ),
        ({ name, text }) => {
          outcome(() => parseSection(name, text), isIntegrityError);
        },
      ),
      2,
    );
  });

  it("a section its schema accepts parses to the schema's output, and only such a section", () => {
    const schemas = {
      [GLOBAL_SECTION]: GlobalSectionSchema,
      [RUNTIME_SECTION]: RuntimeSectionSchema,
      [connectorSectionName(CONNECTOR_ID)]: ConnectorSectionSchema,
    };
    check(
      fc.property(section, ({ name, json }) => {
        const byModel = v.safeParse(schemas[name], JSON.parse(json));
        const read = outcome(() => parseSection(name, json), isIntegrityError);
        // The connector's rows are checked by hand for speed: they must keep the schema's rules.
        expect(read.ok, read.ok ? "accepted" : read.error.message).toBe(byModel.success);
        if (read.ok && byModel.success) {
          const parsed = read.value as { section: unknown };
          if (name === GLOBAL_SECTION || name === RUNTIME_SECTION) {
            expect(parsed.section).toEqual(byModel.output);
          } else {
            // The hand check keeps rows as they are (no copy, unknown keys left in).
            expect(parsed.section).toMatchObject(byModel.output as object);
          }
        }
      }),
      3,
    );
  });

  it("any head or manifest text: read as a head, another schema, invalid, or nothing", () => {
    const headish = valueFor(HeadSchema).map((value) => JSON.stringify(value) ?? "");
    const manifestish = valueFor(ManifestSchema).map((value) => JSON.stringify(value) ?? "");
    check(
      fc.property(mutatedText(fc.oneof(headish, manifestish)), (text) => {
        const head = readHead(text);
        expect(["head", "other_schema", "invalid"]).toContain(head.kind);
        if (head.kind === "invalid") expect(head.problem.length).toBeGreaterThan(4);
        const manifest = readManifest(text);
        if (manifest !== undefined) expect(manifest.schema).toBe(1);
      }),
      2,
    );
  });
});

describe("feed regressions", () => {
  it("a connector section whose config is a list is refused by its schema as by the gateway", () => {
    // Found by the property above: valibot's record read a list as an empty object, so the
    // model took a section every gateway refuses.
    const section = {
      schema: 1,
      connector: connector(CONNECTOR_ID),
      proxies: [],
      config: [],
    };
    const byModel = v.safeParse(ConnectorSectionSchema, section);
    expect(byModel.success).toBe(false);
    expect(byModel.issues?.[0].message).toBe("must be an object");
    expect(() => parseSection(connectorSectionName(CONNECTOR_ID), JSON.stringify(section)))
      .toThrow("config: not an object");
    expect(v.safeParse(ConnectorSectionSchema, { ...section, config: { region: "eu" } }).success)
      .toBe(true);
  });
});
