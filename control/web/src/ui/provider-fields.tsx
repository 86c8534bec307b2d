/**
 * A provider descriptor's fields (its credential_fields or connector_fields) as form inputs, so
 * a vendor's form is drawn from its descriptor: each field type its input (text, a masked
 * password, a number with its bounds, a select of its options, a checkbox, a textarea, a URL, a
 * country), required ones marked, the field's help shown, and the API's message for
 * `config.<key>` beside the field. Values are kept as typed (a boolean field's as a boolean)
 * and sent as the API takes them; the API judges them.
 */
import { COUNTRY_CODES } from "../../../../shared/countries.ts";
import type { ApiError } from "../api/client.ts";
import type { ProviderField } from "../../../api/answers/providers.ts";
import { SECRET_MASK } from "../../../model/secrets.ts";
import { Checkbox, Field, optionalNumber, Select, TextInput } from "./forms.tsx";

export type FieldValues = Record<string, string | boolean>;

/** How the body carries the values. */
export type ConfigWrite =
  /** A new credential or connector: blank fields left out (the descriptor's defaults fill them). */
  | "create"
  /** A credential's edit, merged key by key: a blank field removed, a blank secret kept. */
  | "merge"
  /** A connector's edit, the config replaced whole: a blank secret that is set sent as the mask. */
  | "replace";

const regionNames = (() => {
  try {
    return new Intl.DisplayNames(["en"], { type: "region" });
  } catch {
    return undefined;
  }
})();

/** "DE" as "DE, Germany". */
export function countryLabel(code: string): string {
  const name = regionNames?.of(code);
  return name && name !== code ? `${code}, ${name}` : code;
}

const COUNTRY_OPTIONS = COUNTRY_CODES.map((code) => [code, countryLabel(code)] as const);

/** The form's values: what is stored (a masked secret as blank), else the field's default. */
export function initialValues(
  fields: readonly ProviderField[],
  stored?: Readonly<Record<string, unknown>>,
): FieldValues {
  const values: FieldValues = {};
  for (const field of fields) {
    const given = stored?.[field.key];
    const value = given === undefined || given === null
      ? (stored ? undefined : field.default)
      : given;
    if (field.type === "boolean") values[field.key] = value === true;
    else if (value === undefined || value === SECRET_MASK) values[field.key] = "";
    else values[field.key] = String(value);
  }
  return values;
}

/** The secret fields a stored config has set (answered as the mask). */
export function secretsSet(
  fields: readonly ProviderField[],
  stored: Readonly<Record<string, unknown>> | undefined,
): Set<string> {
  return new Set(
    fields.filter((f) => f.secret && stored?.[f.key] === SECRET_MASK).map((f) => f.key),
  );
}

/** The config the API takes from the form's values. */
export function configOf(
  fields: readonly ProviderField[],
  values: FieldValues,
  write: ConfigWrite,
  setSecrets: ReadonlySet<string> = new Set(),
): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const field of fields) {
    const value = values[field.key];
    if (field.type === "boolean") {
      config[field.key] = value === true;
      continue;
    }
    // A secret is sent as typed; other text without the spaces a paste brings along.
    const text = typeof value === "string"
      ? (field.secret || field.type === "textarea" ? value : value.trim())
      : "";
    if (text === "") {
      if (field.secret && setSecrets.has(field.key)) {
        if (write === "replace") config[field.key] = SECRET_MASK;
      } else if (write === "merge") config[field.key] = null;
      continue;
    }
    config[field.key] = field.type === "number" ? optionalNumber(text) : text;
  }
  return config;
}

function hintOf(field: ProviderField, isSet: boolean): string | undefined {
  const parts: string[] = [];
  if (field.help) parts.push(field.help);
  else if (field.pattern) parts.push(`In the form ${field.pattern}`);
  if (field.type === "number" && (field.min !== undefined || field.max !== undefined)) {
    parts.push(
      field.min !== undefined && field.max !== undefined
        ? `From ${field.min} to ${field.max}`
        : field.min !== undefined
        ? `At least ${field.min}`
        : `At most ${field.max}`,
    );
  }
  if (field.default !== undefined && field.type !== "boolean" && !field.secret) {
    parts.push(`Default: ${String(field.default)}`);
  }
  if (field.secret) parts.push(isSet ? "Set; leave blank to keep it" : "Secret: never shown again");
  return parts.length > 0 ? parts.join(". ") : undefined;
}

function FieldInput(
  { field, value, onChange, readOnly, isSet }: {
    field: ProviderField;
    value: string | boolean;
    onChange: (value: string | boolean) => void;
    readOnly: boolean;
    isSet: boolean;
  },
) {
  const name = `config_${field.key}`;
  const text = typeof value === "string" ? value : "";
  switch (field.type) {
    case "boolean":
      return (
        <Checkbox
          name={name}
          checked={value === true}
          onChange={onChange}
          disabled={readOnly}
          label={field.help ?? field.label}
        />
      );
    case "select": {
      const options = (field.options ?? []).map((o) => [o.value, o.label ?? o.value] as const);
      return (
        <Select
          name={name}
          value={text}
          onChange={onChange}
          disabled={readOnly}
          required={field.required}
          options={[["", field.required ? "Choose…" : "–"] as const, ...options]}
        />
      );
    }
    case "country":
      return (
        <Select
          name={name}
          value={text.toUpperCase()}
          onChange={onChange}
          disabled={readOnly}
          required={field.required}
          options={[["", field.required ? "Choose a country…" : "–"] as const, ...COUNTRY_OPTIONS]}
        />
      );
    default:
      return (
        <TextInput
          name={name}
          value={text}
          onInput={onChange}
          disabled={readOnly}
          required={field.required}
          multiline={field.type === "textarea"}
          type={field.type === "password"
            ? "password"
            : field.type === "number"
            ? "number"
            : field.type === "url"
            ? "url"
            : "text"}
          min={field.min}
          max={field.max}
          placeholder={field.secret && isSet ? "•••••••• (set)" : undefined}
        />
      );
  }
}

/** Every field of `fields`, each beside the API's message for `config.<key>`. */
export function ProviderFieldInputs(
  { fields, values, onChange, error, readOnly, setSecrets = new Set() }: {
    fields: readonly ProviderField[];
    values: FieldValues;
    onChange: (values: FieldValues) => void;
    error?: ApiError;
    readOnly: boolean;
    /** Secrets already stored (an edit): blank keeps them. */
    setSecrets?: ReadonlySet<string>;
  },
) {
  return (
    <>
      {fields.map((field) => {
        const isSet = setSecrets.has(field.key);
        return (
          <Field
            key={field.key}
            label={field.label}
            field={`config.${field.key}`}
            error={error}
            required={field.required}
            hint={field.type === "boolean" && field.help ? undefined : hintOf(field, isSet)}
          >
            <FieldInput
              field={field}
              value={values[field.key] ?? (field.type === "boolean" ? false : "")}
              onChange={(value) => onChange({ ...values, [field.key]: value })}
              readOnly={readOnly}
              isSet={isSet}
            />
          </Field>
        );
      })}
    </>
  );
}
