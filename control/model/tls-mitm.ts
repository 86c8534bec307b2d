/**
 * A project's TLS interception fields, and the one rule they keep on create and on every edit
 * (the api's POST and PATCH, a configuration file's project, the CLI's flags, all through the
 * projects service): the mode keeps the browser it uses and clears it otherwise, and a write that
 * lacks one the mode needs is refused (seed 000). A mode this build cannot serve is refused with
 * the reason, since a setting accepted must work.
 *
 * - `tls_mitm_mode`: `off` (raw tunnels, the default), `plain` (the gateway's own TLS towards the
 *   target), `match_ua` and `override_ua` (a browser's TLS and HTTP/2 fingerprint towards the
 *   target: refused, see BROWSER_GRADE_UNAVAILABLE);
 * - `tls_mitm_browser`: `chrome`, `firefox`, `safari`, `edge` or `random`: the fingerprint
 *   `override_ua` presents, required by it and cleared (null) under every other mode;
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
 * Why the browser-grade modes are refused in this build: their fingerprints need an
 * impersonation engine (BoringSSL-based, such as curl_cffi or impit), and none loads in the
 * gateway's runtime (docs/tls-interception.md, "Per project").
 */
export const BROWSER_GRADE_UNAVAILABLE =
  "browser-grade fingerprints are not available in this build: no impersonation engine loads " +
  "in the gateway's runtime (Deno); use plain, or off";

/** The modes this build refuses, with the reason; the others work. */
export const UNAVAILABLE_TLS_MITM_MODES: Readonly<Partial<Record<TlsMitmMode, string>>> = {
  match_ua: BROWSER_GRADE_UNAVAILABLE,
  override_ua: BROWSER_GRADE_UNAVAILABLE,
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
 * What the rule refuses, each named `body.<field>`: a mode this build cannot serve, and a
 * browser the mode needs and the write lacks. Checked on the fields as they would be stored.
 */
export function tlsMitmIssues(fields: TlsMitmFields): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const mode = fields.tlsMitmMode as TlsMitmMode;
  const unavailable = UNAVAILABLE_TLS_MITM_MODES[mode];
  if (unavailable !== undefined) {
    issues.push({ field: "body.tls_mitm_mode", message: `cannot be ${mode}: ${unavailable}` });
  }
  if (BROWSER_MODES.includes(mode) && fields.tlsMitmBrowser === null) {
    issues.push({
      field: "body.tls_mitm_browser",
      message: `is required by tls_mitm_mode ${mode}: one of ${TLS_MITM_BROWSERS.join(", ")}`,
    });
  }
  return issues;
}
