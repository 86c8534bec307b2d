/**
 * The project form's location settings: the location policy, which sources place an exit and in
 * what order (or the install's), and the rule when they disagree (or the install's). The
 * install's values come from GET /geo/settings, so "the install's" says what it is today. And
 * location preflight: a request's exit checked before it goes out, which the API takes only
 * when a source that can place an exit (database or endpoint) is asked.
 */
import {
  CONFLICT_RULES,
  LOCATION_SOURCES,
  type LocationSource,
} from "../../../../shared/geo/attribute.ts";
import { LOCATION_POLICIES, LOCATION_PREFLIGHTS } from "../../../../shared/roles.ts";
import type { Project } from "../../../api/answers/projects.ts";
import type { GeoSettingsRecord } from "../../../api/answers/geo.ts";
import type { ApiError } from "../api/client.ts";
import { Checkbox, Field, FieldError, Select } from "../ui/forms.tsx";
import { useApi } from "../ui/use-api.ts";

export interface LocationState {
  policy: string;
  preflight: string;
  /** False: the install's sources. */
  ownSources: boolean;
  /** Every source, in the order asked; those ticked are sent. */
  sources: { source: LocationSource; on: boolean }[];
  /** Empty: the install's rule. */
  conflictRule: string;
}

export function locationStateOf(project: Project | undefined): LocationState {
  const own = project?.location_sources ?? null;
  const ordered = own === null ? [...LOCATION_SOURCES] : [
    ...own.filter((s): s is LocationSource => (LOCATION_SOURCES as string[]).includes(s)),
    ...LOCATION_SOURCES.filter((s) => !own.includes(s)),
  ];
  return {
    policy: project?.location_policy ?? "off",
    preflight: project?.location_preflight ?? "off",
    ownSources: own !== null,
    sources: ordered.map((source) => ({ source, on: own === null || own.includes(source) })),
    conflictRule: project?.location_conflict_rule ?? "",
  };
}

/** The body's location fields: null for each setting left to the install. */
export function locationBodyOf(state: LocationState): Record<string, unknown> {
  return {
    location_policy: state.policy,
    location_preflight: state.preflight,
    location_sources: state.ownSources
      ? state.sources.filter((s) => s.on).map((s) => s.source)
      : null,
    location_conflict_rule: state.conflictRule === "" ? null : state.conflictRule,
  };
}

const POLICY_HINT = "strict leaves a proxy whose sources disagree on its country out of routing; " +
  "warn keeps it in and logs it when its sources start to disagree; off keeps it in quietly. " +
  "The Proxies and Exit locations tabs show the disagreement either way";

const PREFLIGHT_HINT = "Checks a request's exit through the echo before it goes out, against the " +
  "country asked (else the one promised or set by hand), the verdict kept for a session's life: " +
  "report forwards a mismatch and logs it, retry goes to another exit, reject answers 502. " +
  "Needs database or endpoint among the sources";

export function LocationFields(
  { state, onChange, error, readOnly }: {
    state: LocationState;
    onChange: (state: LocationState) => void;
    error?: ApiError;
    readOnly: boolean;
  },
) {
  const install = useApi<GeoSettingsRecord>("/geo/settings");
  const installSources = install.data?.location_sources.join(", ");
  const installRule = install.data?.location_conflict_rule;
  const change = (patch: Partial<LocationState>) => onChange({ ...state, ...patch });
  const move = (index: number, by: number) => {
    const sources = [...state.sources];
    const [moved] = sources.splice(index, 1);
    sources.splice(index + by, 0, moved);
    change({ sources });
  };

  return (
    <fieldset aria-label="Exit locations">
      <legend>Exit locations</legend>
      <Field label="Location policy" field="location_policy" error={error} hint={POLICY_HINT}>
        <Select
          name="location_policy"
          value={state.policy}
          onChange={(policy) => change({ policy })}
          disabled={readOnly}
          options={LOCATION_POLICIES.map((p) => [p, p] as const)}
        />
      </Field>
      <div class="field" data-field="location_sources" role="group" aria-label="Location sources">
        <span class="label">Sources</span>
        <Checkbox
          name="location_sources_own"
          checked={!state.ownSources}
          onChange={(inherit) => change({ ownSources: !inherit })}
          disabled={readOnly}
          label={`The install's${installSources ? ` (${installSources})` : ""}`}
        />
        {state.ownSources
          ? (
            <ol class="sequence-edit location-sources">
              {state.sources.map((entry, index) => (
                <li key={entry.source} data-source={entry.source}>
                  <Checkbox
                    name={`location_source_${entry.source}`}
                    checked={entry.on}
                    onChange={(on) =>
                      change({
                        sources: state.sources.map((s, i) =>
                          i === index ? { ...s, on } : s
                        ),
                      })}
                    disabled={readOnly}
                    label={entry.source}
                  />
                  {readOnly ? null : (
                    <>
                      <button
                        type="button"
                        class="secondary small"
                        disabled={index === 0}
                        onClick={() => move(index, -1)}
                        aria-label={`Move ${entry.source} up`}
                      >
                        ↑
                      </button>
                      <button
                        type="button"
                        class="secondary small"
                        disabled={index === state.sources.length - 1}
                        onClick={() => move(index, 1)}
                        aria-label={`Move ${entry.source} down`}
                      >
                        ↓
                      </button>
                    </>
                  )}
                </li>
              ))}
            </ol>
          )
          : null}
        <span class="hint">
          Asked in this order: an IP database looking up the exit's address, the vendor's claim, and
          the echo's answer
        </span>
        <FieldError error={error} field="location_sources" />
      </div>
      <Field
        label="When sources disagree"
        field="location_conflict_rule"
        error={error}
        hint="consensus: the country most sources name; first: the first source that names one"
      >
        <Select
          name="location_conflict_rule"
          value={state.conflictRule}
          onChange={(conflictRule) => change({ conflictRule })}
          disabled={readOnly}
          options={[
            ["", `The install's${installRule ? ` (${installRule})` : ""}`],
            ...CONFLICT_RULES.map((rule) => [rule, rule] as const),
          ]}
        />
      </Field>
      <Field
        label="Location preflight"
        field="location_preflight"
        error={error}
        hint={PREFLIGHT_HINT}
      >
        <Select
          name="location_preflight"
          value={state.preflight}
          onChange={(preflight) => change({ preflight })}
          disabled={readOnly}
          options={LOCATION_PREFLIGHTS.map((mode) => [mode, mode] as const)}
        />
      </Field>
    </fieldset>
  );
}
