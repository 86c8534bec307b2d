/**
 * Options in request headers, for clients that cannot put them in a username (and for
 * password-less clients, who have none): `X-Octoprox-Country`, `-State`, `-City`, `-Session`,
 * `-Session-Time` and `-Mitm` (`off`: a CONNECT's tunnel stays raw), read with the username's grammar and checks (shared/username.ts). The
 * admission step runs once the client is known; it keeps every `X-Octoprox-*` field from the
 * upstream (consumed or not), refuses one it does not know, a repeated one, or a value written
 * wrong with 400 naming the header, and adds what the headers ask for to the client's options.
 * An option given both in the username and in a header must say the same (400 otherwise), so a
 * request never means two things. HTTP forwarding and CONNECT have headers; SOCKS5 has none.
 * Runtime-neutral.
 */
import {
  OptionDelimiter,
  type OptionMessages,
  type OptionTexts,
  readOptions,
} from "../../shared/username.ts";
import type { MaybePromise, UsernameOptions } from "../../shared/routing/contract.ts";
import { badOptions } from "../../shared/routing/refusals.ts";
import {
  type AdmissionRequest,
  AdmissionStage,
  type AdmissionStep,
  type AdmissionVerdict,
} from "../base/admission.ts";

const PREFIX = "x-octoprox-";

type OptionName = keyof OptionTexts;

/** Each option's header. */
const HEADERS: Readonly<Record<OptionName, string>> = {
  country: "X-Octoprox-Country",
  state: "X-Octoprox-State",
  city: "X-Octoprox-City",
  sessionId: "X-Octoprox-Session",
  sessionMinutes: "X-Octoprox-Session-Time",
  mitmOff: "X-Octoprox-Mitm",
};

/** Option by lower-case header name. */
const BY_HEADER: ReadonlyMap<string, OptionName> = new Map(
  (Object.keys(HEADERS) as OptionName[]).map((name) => [HEADERS[name].toLowerCase(), name]),
);

/** The names of the option headers, as a client writes them. */
export const OPTION_HEADERS: readonly string[] = Object.values(HEADERS);

/** What a client reads in the 400 answer: each names the header and how to write it. */
export const HeaderOptionMessage: OptionMessages & { repeated: string } = {
  needsCountry:
    "X-Octoprox-State and X-Octoprox-City need a country: add X-Octoprox-Country, such as US",
  country: "X-Octoprox-Country must be a two-letter ISO 3166-1 code, such as US",
  state: "X-Octoprox-State must be the subdivision part of an ISO 3166-2 code, such as NY",
  city: "X-Octoprox-City must be a name with letters or digits, such as new_york",
  sessionId:
    "X-Octoprox-Session must be at most 128 characters and no control characters, such as abc123",
  sessionMinutes: "X-Octoprox-Session-Time must be whole minutes from 1 to 1440, such as 30",
  mitmOff: "X-Octoprox-Mitm takes one value, off: X-Octoprox-Mitm: off",
  repeated: "Each X-Octoprox option header may appear once",
};

function unknownHeader(name: string): string {
  return `${name} is not an Octoprox option header: use ${OPTION_HEADERS.join(", ")}`;
}

function conflict(name: OptionName): string {
  return `${HEADERS[name]} conflicts with the username's ${
    OptionDelimiter[name]
  } option: give it once, or the same in both`;
}

export function headerOptionsStep(): AdmissionStep {
  return {
    name: "header options",
    stage: AdmissionStage.client,
    admit(request: AdmissionRequest): MaybePromise<AdmissionVerdict> {
      let texts: OptionTexts | undefined;
      let seen: Set<OptionName> | undefined;
      for (const field of request.headers) {
        const lower = field.lower;
        // Most requests carry none: one character compared per field.
        if (lower.charCodeAt(0) !== 120 /* x */ || !lower.startsWith(PREFIX)) continue;
        request.stripHeader(lower);
        const name = BY_HEADER.get(lower);
        if (name === undefined) return badOptions(unknownHeader(field.name));
        seen ??= new Set();
        if (seen.has(name)) return badOptions(HeaderOptionMessage.repeated);
        seen.add(name);
        // An empty value counts as absent, as an empty username option does.
        const value = field.value.trim();
        if (value !== "") (texts ??= {})[name] = value;
      }
      if (texts === undefined) return undefined;
      const client = request.client!;
      const read = readOptions(texts, HeaderOptionMessage, client.options.country);
      if (!read.ok) return badOptions(read.message);
      const options: UsernameOptions = { ...client.options };
      const asked = read.options as Record<OptionName, string | number | undefined>;
      const merged = options as unknown as Record<OptionName, string | number | undefined>;
      for (const name of Object.keys(asked) as OptionName[]) {
        const value = asked[name];
        if (value === undefined) continue;
        if (merged[name] !== undefined && merged[name] !== value) {
          return badOptions(conflict(name));
        }
        merged[name] = value;
      }
      // A new client: the credentials' answer is shared by the connection's other requests.
      request.client = { ...client, options };
      return undefined;
    },
  };
}
