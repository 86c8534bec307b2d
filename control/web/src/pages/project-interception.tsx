/**
 * The project form's TLS interception: the mode, the browser (for the one mode that uses one)
 * and the bypass list. The modes and browsers are the API's own (control/model/tls-mitm.ts); the
 * modes and browsers this build refuses are shown disabled with the reason. The API keeps the rule (a mode clears the browser it does not use) and names
 * a bypass entry it refuses by its index: shown here with the entry, since lines may be blank.
 */
import {
  BROWSER_MODES,
  TLS_MITM_BROWSERS,
  TLS_MITM_MODES,
  UNAVAILABLE_TLS_MITM_BROWSERS,
  UNAVAILABLE_TLS_MITM_MODES,
} from "../../../model/tls-mitm.ts";
import type { Project } from "../../../api/answers/projects.ts";
import type { ApiError } from "../api/client.ts";
import { Field, FieldError, parseList, TextInput } from "../ui/forms.tsx";

export interface InterceptionState {
  mode: string;
  /** Empty: none. */
  browser: string;
  /** One host a line (or comma-separated), as typed. */
  bypass: string;
}

export function interceptionStateOf(project: Project | undefined): InterceptionState {
  return {
    mode: project?.tls_mitm_mode ?? "off",
    browser: project?.tls_mitm_browser ?? "",
    bypass: (project?.tls_mitm_bypass ?? []).join("\n"),
  };
}

/** The body's interception fields: the browser only when the mode uses one. */
export function interceptionBodyOf(state: InterceptionState): Record<string, unknown> {
  const usesBrowser = (BROWSER_MODES as readonly string[]).includes(state.mode);
  return {
    tls_mitm_mode: state.mode,
    ...(usesBrowser ? { tls_mitm_browser: state.browser === "" ? null : state.browser } : {}),
    tls_mitm_bypass: parseList(state.bypass),
  };
}

const MODE_LABELS: Readonly<Record<string, string>> = {
  off: "off: tunnels stay raw",
  plain: "plain: the gateway's own TLS towards the target",
  match_ua: "match_ua: the fingerprint of the browser the client's User-Agent names",
  override_ua: "override_ua: a chosen browser's fingerprint and User-Agent",
};

const MODE_HINT = "Every mode but off opens each HTTPS tunnel with a certificate the install's " +
  "CA signs, so clients must trust that CA (GET /api/v1/projects/ca-certificate); match_ua and " +
  "override_ua then reach the target as a browser would (its TLS and HTTP/2 fingerprint). A " +
  "client may still keep its connection raw with -mitm-off in its username or " +
  "X-Octoprox-Mitm: off on its CONNECT";

const BYPASS_HINT = "One a line: a host name (that name only), .example.com (every name under " +
  "it), or an IP address. Tunnels to them stay raw: pinned apps, banks";

/** Why the browser cannot be chosen in this build: what the modes that use one are refused for. */
const browserReason = BROWSER_MODES.map((mode) => UNAVAILABLE_TLS_MITM_MODES[mode])
  .find((reason) => reason !== undefined);

/** The browsers this build refuses, with the reason. */
const refusedBrowsers = Object.entries(UNAVAILABLE_TLS_MITM_BROWSERS);

export function InterceptionFields(
  { state, onChange, error, readOnly }: {
    state: InterceptionState;
    onChange: (state: InterceptionState) => void;
    error?: ApiError;
    readOnly: boolean;
  },
) {
  const change = (patch: Partial<InterceptionState>) => onChange({ ...state, ...patch });
  const usesBrowser = (BROWSER_MODES as readonly string[]).includes(state.mode);
  const entries = parseList(state.bypass);
  // Each entry the API refused, by its index in the list sent.
  const refused = (error?.issues ?? []).flatMap((issue) => {
    const match = /^body\.tls_mitm_bypass\.(\d+)$/.exec(issue.field);
    if (match === null) return [];
    return [{ entry: entries[Number(match[1])] ?? "", message: issue.message }];
  });
  const unavailable = Object.entries(UNAVAILABLE_TLS_MITM_MODES);

  return (
    <fieldset aria-label="TLS interception">
      <legend>TLS interception</legend>
      <Field label="Mode" field="tls_mitm_mode" error={error} hint={MODE_HINT}>
        <select
          name="tls_mitm_mode"
          value={state.mode}
          disabled={readOnly}
          onChange={(event) => change({ mode: (event.currentTarget as HTMLSelectElement).value })}
        >
          {TLS_MITM_MODES.map((mode) => (
            <option
              value={mode}
              key={mode}
              // Refused by the API in this build; kept selectable only if stored (it cannot be).
              disabled={UNAVAILABLE_TLS_MITM_MODES[mode] !== undefined && state.mode !== mode}
            >
              {MODE_LABELS[mode] ?? mode}
              {UNAVAILABLE_TLS_MITM_MODES[mode] !== undefined ? " (not available)" : ""}
            </option>
          ))}
        </select>
      </Field>
      {unavailable.length > 0
        ? (
          <p class="muted" data-testid="tls-mitm-unavailable">
            Refused in this build, {unavailable.map(([mode]) => mode).join(" and ")}:{" "}
            {[...new Set(unavailable.map(([, reason]) => reason))].join("; ")}.
          </p>
        )
        : null}
      <Field
        label="Browser"
        field="tls_mitm_browser"
        error={error}
        hint={usesBrowser
          ? "The browser whose fingerprint the gateway presents"
          : `Used by ${BROWSER_MODES.join(", ")} only${
            browserReason ? ", which this build cannot serve" : ""
          }`}
      >
        <select
          name="tls_mitm_browser"
          value={usesBrowser ? state.browser : ""}
          disabled={readOnly || !usesBrowser}
          onChange={(event) =>
            change({ browser: (event.currentTarget as HTMLSelectElement).value })}
        >
          <option value="">none</option>
          {TLS_MITM_BROWSERS.map((browser) => (
            <option
              value={browser}
              key={browser}
              disabled={UNAVAILABLE_TLS_MITM_BROWSERS[browser] !== undefined}
            >
              {browser}
              {UNAVAILABLE_TLS_MITM_BROWSERS[browser] !== undefined ? " (not available)" : ""}
            </option>
          ))}
        </select>
      </Field>
      {usesBrowser && refusedBrowsers.length > 0
        ? (
          <p class="muted" data-testid="tls-mitm-browser-unavailable">
            Refused in this build, {refusedBrowsers.map(([browser]) => browser).join(" and ")}:{" "}
            {[...new Set(refusedBrowsers.map(([, reason]) => reason))].join("; ")}.
          </p>
        )
        : null}
      <div class={`field${refused.length > 0 ? " invalid" : ""}`} data-field="tls_mitm_bypass">
        {/* The label takes no box of its own: its parts are the field's, as Field lays them. */}
        <label style={{ display: "contents" }}>
          <span class="label">Bypass</span>
          <TextInput
            name="tls_mitm_bypass"
            value={state.bypass}
            onInput={(bypass) => change({ bypass })}
            disabled={readOnly}
            multiline
          />
        </label>
        <span class="hint">{BYPASS_HINT}</span>
        {refused.length > 0
          ? (
            <ul class="field-error" role="alert">
              {refused.map(({ entry, message }) => (
                <li key={entry + message}>
                  <code>{entry}</code> {message}
                </li>
              ))}
            </ul>
          )
          : <FieldError error={error} field="tls_mitm_bypass" />}
      </div>
    </fieldset>
  );
}
