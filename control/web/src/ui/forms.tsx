/**
 * Form parts: a labelled field that shows the API's message for it (the field the API's 422
 * names), and the inputs the pages use. A read-only user gets the same fields, disabled.
 */
import type { ComponentChildren } from "preact";
import type { ApiError } from "../api/client.ts";

export function FieldError(
  { error, field, exact }: { error?: ApiError; field: string; exact?: boolean },
) {
  const message = exact ? error?.forFieldExactly(field) : error?.forField(field);
  return message ? <span class="field-error" role="alert">{message}</span> : null;
}

export function Field(
  { label, field, error, hint, required, children }: {
    label: string;
    field: string;
    error?: ApiError;
    hint?: ComponentChildren;
    /** Marked on the label (the API refuses the form without it). */
    required?: boolean;
    children: ComponentChildren;
  },
) {
  const invalid = error?.forField(field) !== undefined;
  return (
    <label class={`field${invalid ? " invalid" : ""}`} data-field={field}>
      {/* A required field's mark is drawn by the stylesheet, so the label's text stays its name. */}
      <span class={required ? "label is-required" : "label"}>{label}</span>
      {children}
      {hint ? <span class="hint">{hint}</span> : null}
      <FieldError error={error} field={field} />
    </label>
  );
}

export function TextInput(
  {
    value,
    onInput,
    disabled,
    placeholder,
    name,
    type = "text",
    multiline,
    required,
    min,
    max,
    list,
    rows = 3,
  }: {
    value: string;
    onInput: (value: string) => void;
    disabled?: boolean;
    placeholder?: string;
    name: string;
    type?: "text" | "password" | "number" | "email" | "url" | "search";
    multiline?: boolean;
    /** Said to assistive technology; the API judges it (forms are noValidate). */
    required?: boolean;
    min?: number;
    max?: number;
    /** The id of a datalist whose values the input suggests (any value may still be typed). */
    list?: string;
    /** A multiline input's height. */
    rows?: number;
  },
) {
  const handler = (event: Event) => onInput((event.currentTarget as HTMLInputElement).value);
  return multiline
    ? (
      <textarea
        name={name}
        value={value}
        onInput={handler}
        disabled={disabled}
        placeholder={placeholder}
        aria-required={required ? "true" : undefined}
        rows={rows}
      />
    )
    : (
      <input
        name={name}
        type={type as "text"}
        value={value}
        onInput={handler}
        disabled={disabled}
        placeholder={placeholder}
        aria-required={required ? "true" : undefined}
        min={min}
        max={max}
        list={list}
        // A secret typed here is a vendor's, never the browser's saved login.
        autoComplete={type === "password" ? "new-password" : undefined}
      />
    );
}

export function Select(
  { value, onChange, options, disabled, name, required }: {
    value: string;
    onChange: (value: string) => void;
    options: readonly (readonly [string, string])[];
    disabled?: boolean;
    name: string;
    required?: boolean;
  },
) {
  return (
    <select
      name={name}
      value={value}
      disabled={disabled}
      aria-required={required ? "true" : undefined}
      onChange={(event) => onChange((event.currentTarget as HTMLSelectElement).value)}
    >
      {options.map(([key, label]) => <option value={key} key={key}>{label}</option>)}
    </select>
  );
}

export function Checkbox(
  { checked, onChange, disabled, name, label }: {
    checked: boolean;
    onChange: (value: boolean) => void;
    disabled?: boolean;
    name: string;
    label: string;
  },
) {
  return (
    <label class="checkbox">
      <input
        type="checkbox"
        name={name}
        checked={checked}
        disabled={disabled}
        onChange={(event) => onChange((event.currentTarget as HTMLInputElement).checked)}
      />
      {label}
    </label>
  );
}

/** The error the API gave the whole form (not a field), in words. */
export function FormError({ error }: { error?: ApiError }) {
  if (!error) return null;
  return (
    <div class="form-error" role="alert">
      {error.issues.length > 0 ? "Some fields need a change: see below." : error.message}
    </div>
  );
}

/** A list typed one item a line or comma-separated (CIDR blocks, countries, domains). */
export function parseList(text: string): string[] {
  return text.split(/[\n,]/).map((item) => item.trim()).filter((item) => item !== "");
}

/** An optional whole number: blank is null; anything else is sent as typed, for the API to judge. */
export function optionalNumber(text: string): number | null {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : (trimmed as unknown as number);
}
