/**
 * Properties of the username grammar (shared/username.ts): any text reads as options or as one
 * of the catalogued messages, never a throw; and a project username with options written in
 * any order and any case reads back as those options.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { projectUsernameProblem, USERNAME_DELIMITERS } from "../../shared/project-credentials.ts";
import {
  parseUsername,
  readOptions,
  SESSION_MINUTES_MAX,
  UsernameMessage,
} from "../../shared/username.ts";
import { normaliseCountry } from "../../shared/countries.ts";
import { check, mutatedText } from "./runs.ts";

const MESSAGES: ReadonlySet<string> = new Set(Object.values(UsernameMessage));

const projectUsername = fc.stringMatching(/^[A-Za-z0-9_.]{1,10}(-[A-Za-z0-9_.]{1,10}){0,3}$/)
  .filter((name) => projectUsernameProblem(name) === undefined);

const CITY_ALIASES = new Set(["nyc", "new_york_city", "city_of_london", "washington_dc"]);

interface Options {
  country?: string;
  state?: string;
  city?: string;
  sessionId?: string;
  sessionMinutes?: number;
  mitmOff?: true;
}

/** An option as written (delimiter in some case, value) and what it reads as. */
type Written = {
  delimiter: string;
  text: string;
  key: keyof Options;
  value: string | number | true;
};

const caseOf = (text: string, upper: boolean[]) =>
  [...text].map((char, index) => upper[index % upper.length] ? char.toUpperCase() : char).join(
    "",
  );

const written: fc.Arbitrary<Written[]> = fc.record({
  country: fc.option(fc.constantFrom("us", "GB", "De", "fr", "jp", "br"), { nil: undefined }),
  state: fc.option(fc.stringMatching(/^[A-Za-z0-9]{1,3}$/), { nil: undefined }),
  city: fc.option(
    fc.stringMatching(/^[a-z0-9]{1,8}(_[a-z0-9]{1,8}){0,2}$/).filter((city) =>
      !CITY_ALIASES.has(city)
    ),
    { nil: undefined },
  ),
  sessionId: fc.option(fc.stringMatching(/^[A-Za-z0-9_]{1,40}$/), { nil: undefined }),
  sessionMinutes: fc.option(fc.integer({ min: 1, max: SESSION_MINUTES_MAX }), { nil: undefined }),
  mitmOff: fc.option(fc.constantFrom("off", "OFF", "Off"), { nil: undefined }),
  upper: fc.array(fc.boolean(), { minLength: 1, maxLength: 5 }),
}).chain(({ upper, ...options }) => {
  const parts: Written[] = [];
  const add = (
    delimiter: string,
    key: keyof Options,
    text: string,
    value: string | number | true,
  ) => parts.push({ delimiter: caseOf(delimiter, upper), text, key, value });
  // A state or city needs a country to rest on.
  const country = options.country ?? (options.state || options.city ? "us" : undefined);
  if (country) add("-cc-", "country", country, normaliseCountry(country)!);
  if (options.state) add("-st-", "state", options.state, options.state.toUpperCase());
  if (options.city) add("-city-", "city", options.city, options.city);
  if (options.sessionId) add("-sessid-", "sessionId", options.sessionId, options.sessionId);
  if (options.sessionMinutes) {
    add("-sesstime-", "sessionMinutes", String(options.sessionMinutes), options.sessionMinutes);
  }
  if (options.mitmOff) add("-mitm-", "mitmOff", options.mitmOff, true);
  return fc.shuffledSubarray(parts, { minLength: parts.length, maxLength: parts.length });
});

const validUsername = fc.tuple(projectUsername, written).map(([user, parts]) =>
  user + parts.map((part) => part.delimiter + part.text).join("")
);

/** How many times delimiters occur in a username, overlapping ones counted. */
function occurrences(raw: string): number {
  const lower = raw.toLowerCase();
  let count = 0;
  for (const delimiter of USERNAME_DELIMITERS) {
    for (let at = lower.indexOf(delimiter); at >= 0; at = lower.indexOf(delimiter, at + 1)) {
      count++;
    }
  }
  return count;
}

describe("the username grammar (property)", () => {
  it("any text: options, or one of the catalogued messages; never a throw", () => {
    check(
      fc.property(mutatedText(validUsername), (raw) => {
        const read = parseUsername(raw);
        if (!read.ok) {
          expect(MESSAGES.has(read.message)).toBe(true);
          return;
        }
        const { user, country, sessionMinutes, sessionId } = read.options;
        expect(raw.startsWith(user)).toBe(true);
        if (country !== undefined) expect(normaliseCountry(country)).toBe(country);
        if (sessionMinutes !== undefined) {
          expect(sessionMinutes >= 1 && sessionMinutes <= SESSION_MINUTES_MAX).toBe(true);
        }
        if (sessionId !== undefined) expect(raw).toContain(sessionId);
      }),
      4,
    );
  });

  it("a project username with options in any order and case reads back as those options", () => {
    check(
      fc.property(projectUsername, written, (user, parts) => {
        const raw = user + parts.map((part) => part.delimiter + part.text).join("");
        // Delimiters share their hyphens: a value such as `st` before `-st-` writes the
        // delimiter twice (`-st-st-`), which the grammar refuses as repeated. Not a valid input.
        fc.pre(occurrences(raw) === parts.length);
        const expected: Record<string, unknown> = { user };
        for (const part of parts) expected[part.key] = part.value;
        expect(parseUsername(raw)).toEqual({ ok: true, options: expected });
      }),
      2,
    );
  });

  it("option texts from anywhere (header options): options or the caller's own message", () => {
    const messages = {
      needsCountry: "m1",
      country: "m2",
      state: "m3",
      city: "m4",
      sessionId: "m5",
      sessionMinutes: "m6",
      mitmOff: "m7",
    };
    const text = fc.option(fc.string({ unit: "binary", maxLength: 12 }), { nil: undefined });
    check(
      fc.property(
        fc.record({
          country: text,
          state: text,
          city: text,
          sessionId: fc.option(fc.string({ maxLength: 140 }), { nil: undefined }),
          sessionMinutes: fc.option(
            fc.oneof(fc.stringMatching(/^[0-9]{1,5}$/), fc.string({ maxLength: 5 })),
            { nil: undefined },
          ),
          mitmOff: fc.option(fc.oneof(fc.constant("off"), fc.string({ maxLength: 5 })), {
            nil: undefined,
          }),
        }),
        fc.option(fc.constantFrom("US", "GB"), { nil: undefined }),
        (texts, country) => {
          const read = readOptions(texts, messages, country);
          if (!read.ok) expect(Object.values(messages)).toContain(read.message);
          else if (texts.mitmOff !== undefined) expect(read.options.mitmOff).toBe(true);
        },
      ),
    );
  });
});
