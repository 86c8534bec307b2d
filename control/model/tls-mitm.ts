/**
 * A project's TLS interception fields, and the one rule they keep on create and on every edit
 * (the api's POST and PATCH, a configuration file's project, the CLI's flags, all through the
 * projects service): the mode keeps the browser it uses and clears it otherwise, and a write that
 * lacks one the mode needs is refused (seed 000). A mode this build cannot serve is refused with
 * the reason, since a setting accepted must work.
 *
 * - `tls_mitm_mode`: `off` (raw tunnels, the default), `plain` (the gateway's own TLS towards the
 *   target), `match_ua` (the TLS and HTTP/2 fingerprint of the browser the client's User-Agent
 *   names) and `override_ua` (a chosen browser's fingerprint and User-Agent);
 * - `tls_mitm_browser`: `chrome`, `firefox`, `edge` or `random` (`safari` is refused, see
 *   UNAVAILABLE_TLS_MITM_BROWSERS): the fingerprint `override_ua` presents, required by it and
 *   cleared (null) under every other mode;
 * - `tls_mitm_bypass`: hosts and `.suffixes` whose tunnels stay raw (shared/tls/bypass.ts).
 *
 * The dashboard reads the vocabulary and the reason from here, so it offers what the api takes.
 */
import * as v from "valibot";
import type { FieldIssue } from "../../shared/errors.ts";
import { BYPASS_MAX_ENTRIES, readBypassEntry } from "../../shared/tls/bypass.ts";

export const TLS_MITM_MODES = ["off", "plain", "match_ua", "override_ua"] as const;
export type TlsMitmMode = (typeof TLS_MITM_MODES)[number];

export const TLS_MITM_BROWSERS = ["chrome", "firefox", "safari", "edge", "random"] as const;
export type TlsMitmBrowser = (typeof TLS_MITM_BROWSERS)[number];

/** The modes that present a browser's fingerprint towards the target. */
export const BROWSER_GRADE_MODES: readonly TlsMitmMode[] = ["match_ua", "override_ua"];

/** The modes that need a browser named: the one whose fingerprint they present. */
export const BROWSER_MODES: readonly TlsMitmMode[] = ["override_ua"];

/**
 * Why a browser is refused in this build: the impersonation engine the gateway loads (impit) has
 * no Safari fingerprint (docs/tls-interception.md, "Browser-grade modes").
 */
export const SAFARI_UNAVAILABLE =
  "the gateway's impersonation engine has no Safari fingerprint (it has Chrome, whose " +
  "fingerprint Edge shares, and Firefox); choose chrome, firefox, edge or random";

/** The modes this build refuses, with the reason; the others work. None today. */
export const UNAVAILABLE_TLS_MITM_MODES: Readonly<Partial<Record<TlsMitmMode, string>>> = {};

/** The browsers this build refuses, with the reason. */
export const UNAVAILABLE_TLS_MITM_BROWSERS: Readonly<Partial<Record<TlsMitmBrowser, string>>> = {
  safari: SAFARI_UNAVAILABLE,
};

export const tlsMitmModeField = v.picklist(
  TLS_MITM_MODES,
  `must be one of ${TLS_MITM_MODES.join(", ")}`,
);

/** Null: none (what every mode but override_ua keeps). */
export const tlsMitmBrowserField = v.nullable(
  v.picklist(TLS_MITM_BROWSERS, `must be one of ${TLS_MITM_BROWSERS.join(", ")} or null`),
);

/** Host names, `.suffixes` and IP addresses, each read as the gateway matches it; deduplicated. */
export const tlsMitmBypassField = v.pipe(
  v.array(
    v.pipe(
      v.string("must be text"),
      v.rawTransform(({ dataset, addIssue, NEVER }) => {
        const read = readBypassEntry(dataset.value);
        if (read.ok) return read.entry;
        addIssue({ message: read.message });
        return NEVER;
      }),
    ),
    "must be a list of host names",
  ),
  v.maxLength(BYPASS_MAX_ENTRIES, `must hold at most ${BYPASS_MAX_ENTRIES} hosts`),
  v.transform((list) => [...new Set(list)]),
);

/** A project's interception fields under the service's names. */
export interface TlsMitmFields {
  tlsMitmMode: string;
  tlsMitmBrowser: string | null;
}

/** The fields the mode keeps: the browser under a mode that uses one, null otherwise. */
export function settleTlsMitm<T extends TlsMitmFields>(fields: T): T {
  const uses = (BROWSER_MODES as readonly string[]).includes(fields.tlsMitmMode);
  return uses || fields.tlsMitmBrowser === null ? fields : { ...fields, tlsMitmBrowser: null };
}

/**
 * What the rule refuses, each named `body.<field>`: a mode or a browser this build cannot serve,
 * and a browser the mode needs and the write lacks. Checked on the fields as they would be stored.
 */
export function tlsMitmIssues(fields: TlsMitmFields): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const mode = fields.tlsMitmMode as TlsMitmMode;
  const unavailable = UNAVAILABLE_TLS_MITM_MODES[mode];
  if (unavailable !== undefined) {
    issues.push({ field: "body.tls_mitm_mode", message: `cannot be ${mode}: ${unavailable}` });
  }
  const browser = fields.tlsMitmBrowser as TlsMitmBrowser | null;
  const refusedBrowser = browser === null ? undefined : UNAVAILABLE_TLS_MITM_BROWSERS[browser];
  if (refusedBrowser !== undefined) {
    issues.push({
      field: "body.tls_mitm_browser",
      message: `cannot be ${browser}: ${refusedBrowser}`,
    });
  }
  if (BROWSER_MODES.includes(mode) && fields.tlsMitmBrowser === null) {
    issues.push({
      field: "body.tls_mitm_browser",
      message: `is required by tls_mitm_mode ${mode}: one of ${availableBrowsers().join(", ")}`,
    });
  }
  return issues;
}

/** The browsers this build serves, in the vocabulary's order. */
export function availableBrowsers(): TlsMitmBrowser[] {
  return TLS_MITM_BROWSERS.filter((browser) =>
    UNAVAILABLE_TLS_MITM_BROWSERS[browser] === undefined
  );
}
