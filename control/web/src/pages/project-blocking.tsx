/**
 * The project form's block verdicts (docs/blocking.md): the rules as JSON, a shipped preset added
 * to them by name, the retry budget, how much of a body the markers are looked for in, the
 * per-domain routing rules and escalation between connector tiers. The API
 * reads the rules (shared/blocking/rules.ts) and names each one it refuses by its place
 * (`body.block_rules.2.header.pattern`): shown under the rules with that place, nothing stored.
 */
import { PRESET_NAMES, PRESETS } from "../../../../shared/blocking/rules.ts";
import type { Project } from "../../../api/answers/projects.ts";
import type { ComponentChildren } from "preact";
import type { ApiError } from "../api/client.ts";
import { Checkbox, Field, FieldError, TextInput } from "../ui/forms.tsx";

export interface BlockingState {
  /** The rules as JSON, as typed. */
  rules: string;
  /** Blank: the default (retry null when every retry field is blank and rebind unticked). */
  attempts: string;
  methods: string;
  max_total_seconds: string;
  rebind_sticky: boolean;
  body_bytes: string;
  /** The per-domain routing rules as JSON, as typed. */
  domain_rules: string;
  /** Escalation between connector tiers (unticked: null); blank fields: the defaults. */
  escalate: boolean;
  up_after_blocks: string;
  probe_after_seconds: string;
  down_after_probes: string;
}

export function blockingStateOf(project: Project | undefined): BlockingState {
  const retry = project?.retry;
  const rules = project?.block_rules ?? [];
  return {
    rules: rules.length === 0 ? "[]" : JSON.stringify(rules, null, 2),
    attempts: retry ? String(retry.attempts) : "",
    methods: retry ? retry.methods.join(", ") : "",
    max_total_seconds: retry ? String(retry.max_total_seconds) : "",
    rebind_sticky: retry?.rebind_sticky ?? false,
    body_bytes: project?.block_body_bytes === null || project?.block_body_bytes === undefined
      ? ""
      : String(project.block_body_bytes),
    domain_rules: (project?.domain_rules ?? []).length === 0
      ? "[]"
      : JSON.stringify(project?.domain_rules, null, 2),
    escalate: (project?.escalation ?? null) !== null,
    up_after_blocks: project?.escalation ? String(project.escalation.up_after_blocks) : "",
    probe_after_seconds: project?.escalation ? String(project.escalation.probe_after_seconds) : "",
    down_after_probes: project?.escalation ? String(project.escalation.down_after_probes) : "",
  };
}

/** The rules as parsed, or the text itself (the API then says what is wrong with it). */
function rulesOf(text: string): unknown {
  if (text.trim() === "") return [];
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const numberOr = (text: string) => (text.trim() === "" ? undefined : Number(text.trim()));

export function blockingBodyOf(state: BlockingState): Record<string, unknown> {
  const retryGiven = state.attempts.trim() !== "" || state.methods.trim() !== "" ||
    state.max_total_seconds.trim() !== "" || state.rebind_sticky;
  const methods = state.methods.split(/[\s,]+/).filter((method) => method !== "");
  return {
    block_rules: rulesOf(state.rules),
    retry: retryGiven
      ? {
        ...(numberOr(state.attempts) === undefined ? {} : { attempts: numberOr(state.attempts) }),
        ...(methods.length === 0 ? {} : { methods }),
        ...(numberOr(state.max_total_seconds) === undefined
          ? {}
          : { max_total_seconds: numberOr(state.max_total_seconds) }),
        rebind_sticky: state.rebind_sticky,
      }
      : null,
    block_body_bytes: numberOr(state.body_bytes) ?? null,
    domain_rules: rulesOf(state.domain_rules),
    escalation: state.escalate
      ? Object.fromEntries(
        (["up_after_blocks", "probe_after_seconds", "down_after_probes"] as const)
          .filter((name) => numberOr(state[name]) !== undefined)
          .map((name) => [name, numberOr(state[name])]),
      )
      : null,
  };
}

const RULES_HINT = "A JSON list, in order: the first rule on that matches gives the verdict. A " +
  'rule is {"preset": name} or {"name", "status": [codes], "header": {"name", "value" or ' +
  '"pattern"}, "body_contains": [markers], "domains": [hosts or .suffixes], "verdict": ' +
  '"blocked" | "rate_limited" | "ok", "cool_down_seconds"}; "mode": "shadow" records only, ' +
  '"off" skips';

const DOMAIN_RULES_HINT = 'A JSON list, in order: {"domains": [host, .suffix or glob with *], ' +
  '"action": "connectors", "connectors": [connector ids]} sends those hosts through those ' +
  'connectors only; {"domains": [...], "action": "refuse", "reason": "..."} answers them 403; ' +
  '"action": "direct" sends them through no upstream (admins only)';

export function BlockingFields(
  { state, onChange, error, readOnly }: {
    state: BlockingState;
    onChange: (state: BlockingState) => void;
    error?: ApiError;
    readOnly: boolean;
  },
) {
  const change = (patch: Partial<BlockingState>) => onChange({ ...state, ...patch });
  const parsed = rulesOf(state.rules);
  const notJson = typeof parsed === "string";
  const addPreset = (name: string) => {
    const list = Array.isArray(parsed) ? parsed : [];
    change({ rules: JSON.stringify([...list, { preset: name }], null, 2) });
  };

  return (
    <fieldset aria-label="Block verdicts">
      <legend>Block verdicts</legend>
      <JsonListField
        name="block_rules"
        label="Rules"
        hint={RULES_HINT}
        value={state.rules}
        onInput={(rules) => change({ rules })}
        error={error}
        readOnly={readOnly}
      >
        {notJson
          ? (
            <span class="field-error" role="alert" data-testid="block-rules-json">
              Not valid JSON yet: the API will refuse it as it is.
            </span>
          )
          : null}
      </JsonListField>
      <label class="field">
        <span class="label">Add a shipped rule</span>
        <select
          name="block_preset"
          value=""
          disabled={readOnly || notJson}
          onChange={(event) => {
            const name = (event.currentTarget as HTMLSelectElement).value;
            if (name !== "") addPreset(name);
          }}
        >
          <option value="">choose a preset…</option>
          {PRESET_NAMES.map((name) => (
            <option value={name} key={name}>{name}: {PRESETS[name].about}</option>
          ))}
        </select>
      </label>
      <Field
        label="Retry: exits tried in all"
        field="retry.attempts"
        error={error}
        hint="1 to 10; blank: 3"
      >
        <TextInput
          name="retry_attempts"
          value={state.attempts}
          onInput={(attempts) => change({ attempts })}
          disabled={readOnly}
          type="number"
        />
      </Field>
      <Field
        label="Retry: methods"
        field="retry.methods"
        error={error}
        hint="Blank: GET, HEAD. A method with a body (POST) is sent again whole up to 64 KiB"
      >
        <TextInput
          name="retry_methods"
          value={state.methods}
          onInput={(methods) => change({ methods })}
          disabled={readOnly}
        />
      </Field>
      <Field
        label="Retry: seconds in all"
        field="retry.max_total_seconds"
        error={error}
        hint="No attempt starts after this long; blank: 30"
      >
        <TextInput
          name="retry_max_total_seconds"
          value={state.max_total_seconds}
          onInput={(max_total_seconds) => change({ max_total_seconds })}
          disabled={readOnly}
          type="number"
        />
      </Field>
      <Checkbox
        name="retry_rebind_sticky"
        checked={state.rebind_sticky}
        onChange={(rebind_sticky) => change({ rebind_sticky })}
        disabled={readOnly}
        label="A blocked sticky session moves to another exit"
      />
      <FieldError error={error} field="retry" exact />
      <JsonListField
        name="domain_rules"
        label="Per-domain routing"
        hint={DOMAIN_RULES_HINT}
        value={state.domain_rules}
        onInput={(domain_rules) => change({ domain_rules })}
        error={error}
        readOnly={readOnly}
      />
      <Field
        label="Body bytes judged"
        field="block_body_bytes"
        error={error}
        hint="How much of a body the markers are looked for in: 1 to 65536; blank: 8192"
      >
        <TextInput
          name="block_body_bytes"
          value={state.body_bytes}
          onInput={(body_bytes) => change({ body_bytes })}
          disabled={readOnly}
          type="number"
        />
      </Field>
      <Checkbox
        name="escalate"
        checked={state.escalate}
        onChange={(escalate) => change({ escalate })}
        disabled={readOnly}
        label="Escalate sites between connector tiers (cheapest first: by tier, then by traffic price)"
      />
      <FieldError error={error} field="escalation" exact />
      {state.escalate
        ? (
          <>
            <Field
              label="Escalation: blocks before a tier up"
              field="escalation.up_after_blocks"
              error={error}
              hint="Block verdicts in a row on a site's tier: 1 to 1000; blank: 3"
            >
              <TextInput
                name="escalation_up_after_blocks"
                value={state.up_after_blocks}
                onInput={(up_after_blocks) => change({ up_after_blocks })}
                disabled={readOnly}
                type="number"
              />
            </Field>
            <Field
              label="Escalation: seconds before probing down"
              field="escalation.probe_after_seconds"
              error={error}
              hint="Time on a tier (or after a failed probe) before requests try the one below; blank: 600"
            >
              <TextInput
                name="escalation_probe_after_seconds"
                value={state.probe_after_seconds}
                onInput={(probe_after_seconds) => change({ probe_after_seconds })}
                disabled={readOnly}
                type="number"
              />
            </Field>
            <Field
              label="Escalation: good probes before a tier down"
              field="escalation.down_after_probes"
              error={error}
              hint="Good answers in a row on the tier below: 1 to 1000; blank: 3"
            >
              <TextInput
                name="escalation_down_after_probes"
                value={state.down_after_probes}
                onInput={(down_after_probes) => change({ down_after_probes })}
                disabled={readOnly}
                type="number"
              />
            </Field>
          </>
        )
        : null}
    </fieldset>
  );
}

/**
 * A list field typed as JSON, with each refusal the API named below it listed with its place
 * (`block_rules.0.header.pattern`), in a list whose data-testid is the name, `-` for `_`, and
 * `-refused`.
 */
function JsonListField(
  { name, label, hint, value, onInput, error, readOnly, children }: {
    name: string;
    label: string;
    hint: string;
    value: string;
    onInput: (value: string) => void;
    error?: ApiError;
    readOnly: boolean;
    children?: ComponentChildren;
  },
) {
  const refused = (error?.issues ?? []).filter((issue) => issue.field.startsWith(`body.${name}`));
  return (
    <div class={`field${refused.length > 0 ? " invalid" : ""}`} data-field={name}>
      {/* The label takes no box of its own: its parts are the field's, as Field lays them. */}
      <label style={{ display: "contents" }}>
        <span class="label">{label}</span>
        <TextInput name={name} value={value} onInput={onInput} disabled={readOnly} multiline />
      </label>
      <span class="hint">{hint}</span>
      {children}
      {refused.length > 0
        ? (
          <ul class="field-error" role="alert" data-testid={`${name.replaceAll("_", "-")}-refused`}>
            {refused.map((issue) => (
              <li key={issue.field + issue.message}>
                <code>{issue.field.replace(/^body\./, "")}</code> {issue.message}
              </li>
            ))}
          </ul>
        )
        : null}
    </div>
  );
}
