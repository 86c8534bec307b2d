/**
 * How hard the property tests of tests/fuzz/ try, from one place. Inside `npm test` they run a
 * fixed seed and a modest number of cases, so a run is cheap and a failure is the same on every
 * machine; `npm run fuzz` (scripts/fuzz.ts) runs the same properties with many more cases and a
 * fresh seed. A failure prints fast-check's `seed` and `path`: set OCTOPROX_FUZZ_SEED (and
 * OCTOPROX_FUZZ_PATH) to replay exactly that case.
 *
 * Also the few arbitraries every parser family needs: byte strings cut into reads at random
 * places, and valid inputs mutated the way broken or hostile peers send them.
 */
import fc from "fast-check";
import { beforeEach } from "vitest";

/** The seed inside `npm test`: fixed, so a failure there is one anybody can replay. */
export const DEFAULT_FUZZ_SEED = 1717;
/** Cases per property inside `npm test` (OCTOPROX_FUZZ_RUNS sets another number). */
export const DEFAULT_FUZZ_RUNS = 150;

// A long run (npm run fuzz) keeps a test's worker busy for many seconds at a time: a pass through
// the event loop between tests lets the worker's messages to vitest's main process through (it
// gives up on one it has waited 60 s for). Registered by every file, as each imports this one.
beforeEach(() => new Promise<void>((resolve) => setImmediate(resolve)));

function envInteger(name: string): number | undefined {
  const text = process.env[name];
  if (text === undefined || text.trim() === "") return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, not "${text}"`);
  return value;
}

/** The cases per property: `weight` scales the default for a property cheaper or dearer. */
export function fuzzRuns(weight = 1): number {
  const runs = envInteger("OCTOPROX_FUZZ_RUNS") ?? DEFAULT_FUZZ_RUNS;
  return Math.max(1, Math.round(runs * weight));
}

export function fuzzSeed(): number {
  return envInteger("OCTOPROX_FUZZ_SEED") ?? DEFAULT_FUZZ_SEED;
}

/** fast-check's parameters for one property. */
export function fuzzParameters<T>(weight = 1): fc.Parameters<T> {
  const path = process.env.OCTOPROX_FUZZ_PATH;
  return {
    seed: fuzzSeed(),
    numRuns: fuzzRuns(weight),
    ...(path ? { path, endOnFailure: true } : {}),
  };
}

/** Runs a property with the parameters above; a failure names its seed and path. */
export function check<Ts extends [unknown, ...unknown[]]>(
  property: fc.IProperty<Ts>,
  weight = 1,
): void {
  fc.assert(property, fuzzParameters<Ts>(weight));
}

/** As `check`, for a property whose predicate is async. */
export async function checkAsync<Ts extends [unknown, ...unknown[]]>(
  property: fc.IAsyncProperty<Ts>,
  weight = 1,
): Promise<void> {
  await fc.assert(property, fuzzParameters<Ts>(weight));
}

// ---------------------------------------------------------------------------------------------
// Arbitraries

/** Latin-1 text as bytes, one byte per character (how the head parsers read them). */
export function latin1(text: string): Uint8Array {
  return Uint8Array.from(text, (char) => char.charCodeAt(0) & 0xff);
}

/** Cuts `bytes` at the given offsets (any order, duplicates and out-of-range ones ignored). */
export function cutAt(bytes: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const offsets = [...new Set(cuts.filter((at) => at > 0 && at < bytes.length))].sort((a, b) =>
    a - b
  );
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const at of offsets) {
    // Copies: a parser may keep a view of what it was given.
    chunks.push(bytes.slice(from, at));
    from = at;
  }
  chunks.push(bytes.slice(from));
  return chunks;
}

/** Where to cut an input into reads: offsets as fractions of its length. */
export const cuts: fc.Arbitrary<number[]> = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), {
  maxLength: 8,
});

/** The offsets `cuts` draws, for an input of `length` bytes; every byte alone now and then. */
export function cutOffsets(length: number, fractions: readonly number[]): number[] {
  if (fractions.length === 8 && fractions[0] < 0.05) {
    return Array.from({ length }, (_, index) => index);
  }
  return fractions.map((fraction) => Math.floor(fraction * length));
}

type Mutation =
  | { kind: "flip"; at: number; byte: number }
  | { kind: "insert"; at: number; bytes: Uint8Array }
  | { kind: "delete"; at: number; count: number }
  | { kind: "truncate"; at: number }
  | { kind: "repeat"; at: number; count: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), byte: fc.nat(255) }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: fc.nat(),
    bytes: fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 4 }),
      // The bytes that matter most to line-based and length-prefixed grammars.
      fc.constantFrom(
        ..."\r \n \r\n \0 : ; \t , @ [ ] % / # \u00ff \x7f".split(" ").map(latin1),
        latin1(" "),
      ),
    ),
  }),
  fc.record({
    kind: fc.constant("delete" as const),
    at: fc.nat(),
    count: fc.integer({ min: 1, max: 4 }),
  }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant("repeat" as const),
    at: fc.nat(),
    count: fc.integer({ min: 1, max: 8 }),
  }),
);

function applyMutation(bytes: Uint8Array, change: Mutation): Uint8Array {
  const at = bytes.length === 0 ? 0 : change.at % (bytes.length + 1);
  switch (change.kind) {
    case "flip": {
      if (bytes.length === 0) return bytes;
      const out = bytes.slice();
      out[at % bytes.length] = change.byte;
      return out;
    }
    case "insert": {
      const out = new Uint8Array(bytes.length + change.bytes.length);
      out.set(bytes.subarray(0, at), 0);
      out.set(change.bytes, at);
      out.set(bytes.subarray(at), at + change.bytes.length);
      return out;
    }
    case "delete": {
      const rest = bytes.subarray(Math.min(bytes.length, at + change.count));
      const out = new Uint8Array(at + rest.length);
      out.set(bytes.subarray(0, at), 0);
      out.set(rest, at);
      return out;
    }
    case "truncate":
      return bytes.slice(0, at);
    case "repeat": {
      // A stretch of the input again: lines, fields, lengths said twice.
      const from = bytes.slice(at, Math.min(bytes.length, at + 1 + change.count * 4));
      const out = new Uint8Array(bytes.length + from.length);
      out.set(bytes.subarray(0, at), 0);
      out.set(from, at);
      out.set(bytes.subarray(at), at + from.length);
      return out;
    }
  }
}

/** Valid inputs with a few mutations each (and now and then unchanged). */
function mutatedFrom(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    { weight: 1, arbitrary: valid },
    {
      weight: 4,
      arbitrary: fc.tuple(valid, fc.array(mutation, { minLength: 1, maxLength: 4 })).map((
        [bytes, changes],
      ) => changes.reduce(applyMutation, bytes)),
    },
  );
}

/**
 * Inputs a parser must survive: valid ones as `valid` makes them with a few mutations each, and
 * now and then bytes of no grammar at all.
 */
export function mutatedBytes(valid: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    { weight: 5, arbitrary: mutatedFrom(valid) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }) },
  );
}

/**
 * As `mutatedBytes`, for text grammars (usernames, proxy URLs): mutated as Latin-1 bytes, and
 * now and then any Unicode text.
 */
export function mutatedText(valid: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    {
      weight: 5,
      arbitrary: mutatedFrom(valid.map(latin1)).map((bytes) => String.fromCharCode(...bytes)),
    },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  );
}

/** The bytes of `parts` one after another. */
export function joinBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/**
 * What a call did: its answer, or the refusal it threw when `refusal` says the error is the
 * parser's own. Anything else thrown is a finding and is thrown on.
 */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: Error };

export function outcome<T>(
  run: () => T,
  refusal: (error: unknown) => boolean,
): Outcome<T> {
  try {
    return { ok: true, value: run() };
  } catch (error) {
    if (!refusal(error)) throw error;
    const refused = error as Error;
    // A refusal names what is wrong: a message of its own, not a bare class name.
    if (refused.message.trim().length < 8) {
      throw new Error(`A refusal without a message that says what is wrong: "${refused.message}"`);
    }
    return { ok: false, error: refused };
  }
}
