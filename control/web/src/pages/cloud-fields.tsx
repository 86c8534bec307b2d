/**
 * A cloud connector's config in its form: where its instances run (each cloud's own fields,
 * its regions or zones and sizes suggested from GET /connector-options, any value of the right
 * form still typed), the instances' name prefix, how many run (min to max), how long each lives
 * (a random time between the rotation periods) and the tags they carry. Values are kept as
 * typed and sent as the API takes them (config replaced whole on an edit); the API's message for
 * `config.<key>`, its schema's or the cloud's own refusal, shows beside that field.
 */
import type * as v from "valibot";
import type { ApiError } from "../api/client.ts";
import type { ConnectorOptionsAnswer } from "../../../api/answers/connectors.ts";
import { MAX_CLOUD_PROXIES } from "../../../model/cloud.ts";
import { CLOUD_NAMES, type CloudProvider, isCloudProvider } from "../ui/clouds.ts";
import { Field, FieldError, optionalNumber, TextInput } from "../ui/forms.tsx";

export type ConnectorOptions = v.InferOutput<typeof ConnectorOptionsAnswer>;

/** A cloud connector's config as typed: every key's text, whichever cloud it belongs to. */
export type CloudValues = Record<string, string>;

interface CloudField {
  key: string;
  label: string;
  hint?: string;
  required?: boolean;
  /** The connector options that the field suggests. */
  options?: Exclude<keyof ConnectorOptions, "countries">;
  multiline?: boolean;
  placeholder?: string;
  /** Blank is sent as null (the API's "none"); otherwise a blank optional field is left out. */
  nullable?: boolean;
}

/** Each cloud's own fields (control/model/cloud.ts). */
const CLOUD_FIELDS: Record<CloudProvider, readonly CloudField[]> = {
  aws: [
    { key: "region", label: "Region", required: true, options: "aws_regions" },
    { key: "instance_type", label: "Instance type", required: true, options: "aws_instance_types" },
    {
      key: "ami_id",
      label: "AMI",
      required: true,
      placeholder: "ami-0123456789abcdef0",
      hint: "The image instances boot (ami-…), in the region: a Debian or Ubuntu image, " +
        "the start-up script installs Squid",
    },
    {
      key: "security_group",
      label: "Security group",
      nullable: true,
      placeholder: "sg-…",
      hint: "Blank: the VPC's default group. It must let the gateways reach the proxy port",
    },
    {
      key: "key_pair_name",
      label: "Key pair",
      nullable: true,
      hint: "An EC2 key pair to log in with; blank: none",
    },
  ],
  gcp: [
    { key: "zone", label: "Zone", required: true, options: "gcp_zones" },
    { key: "machine_type", label: "Machine type", required: true, options: "gcp_machine_types" },
    {
      key: "network",
      label: "VPC network",
      placeholder: "default",
      hint: "Blank: default. Its firewall must let the gateways reach the proxy port",
    },
    {
      key: "project_id",
      label: "In GCP project",
      nullable: true,
      hint: "Blank: the credential's project",
    },
  ],
  azure: [
    { key: "location", label: "Location", required: true, options: "azure_locations" },
    { key: "vm_size", label: "VM size", required: true, options: "azure_vm_sizes" },
    { key: "resource_group", label: "Resource group", required: true },
    { key: "vnet_name", label: "Virtual network", required: true, hint: "In the resource group" },
    { key: "subnet_name", label: "Subnet", required: true, hint: "Of the virtual network" },
    {
      key: "ssh_public_key",
      label: "SSH public key",
      required: true,
      multiline: true,
      placeholder: "ssh-ed25519 AAAA…",
      hint: "Azure needs one for a Linux VM: an OpenSSH public key",
    },
    {
      key: "subscription_id",
      label: "In subscription",
      nullable: true,
      hint: "Blank: the credential's subscription",
    },
  ],
};

/** The fields every cloud's connector has, with the API's defaults. */
const COMMON_DEFAULTS: CloudValues = {
  instance_name: "",
  min_proxies: "1",
  max_proxies: "10",
  min_rotation_period_minutes: "60",
  max_rotation_period_minutes: "1440",
};
const NUMBER_KEYS = [
  "min_proxies",
  "max_proxies",
  "min_rotation_period_minutes",
  "max_rotation_period_minutes",
];

/** The form's cloud values: what is stored, else the defaults. */
export function cloudValuesOf(config: Readonly<Record<string, unknown>> | undefined): CloudValues {
  const values: CloudValues = { ...COMMON_DEFAULTS, tags: "" };
  for (const [key, value] of Object.entries(config ?? {})) {
    if (key === "tags") continue;
    values[key] = value === null || value === undefined ? "" : String(value);
  }
  const tags = config?.tags;
  if (tags && typeof tags === "object") {
    values.tags = Object.entries(tags as Record<string, unknown>)
      .map(([key, value]) => `${key}=${String(value)}`)
      .join("\n");
  }
  return values;
}

/** Tags typed one `key=value` a line. */
function parseTags(text: string): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "") continue;
    const at = trimmed.indexOf("=");
    if (at < 0) tags[trimmed] = "";
    else tags[trimmed.slice(0, at).trim()] = trimmed.slice(at + 1).trim();
  }
  return tags;
}

/** The config the API takes: the cloud's own fields and the common ones, as typed. */
export function cloudConfigOf(provider: string, values: CloudValues): Record<string, unknown> {
  const config: Record<string, unknown> = {
    instance_name: (values.instance_name ?? "").trim(),
  };
  const fields = isCloudProvider(provider) ? CLOUD_FIELDS[provider] : [];
  for (const field of fields) {
    const text = (values[field.key] ?? "").trim();
    if (text !== "") config[field.key] = text;
    else if (field.nullable) config[field.key] = null;
    else if (field.required) config[field.key] = "";
  }
  for (const key of NUMBER_KEYS) {
    const number = optionalNumber(values[key] ?? "");
    if (number !== null) config[key] = number;
  }
  config.tags = parseTags(values.tags ?? "");
  return config;
}

/**
 * The cloud's fieldset: its fields, then the pool's size, rotation and tags. `options`: the
 * suggestions (undefined while they load: the fields take any value meanwhile).
 */
export function CloudConfigFields(
  { provider, values, onChange, error, readOnly, options }: {
    provider: CloudProvider;
    values: CloudValues;
    onChange: (values: CloudValues) => void;
    error?: ApiError;
    readOnly: boolean;
    options: ConnectorOptions | undefined;
  },
) {
  const set = (key: string) => (value: string) => onChange({ ...values, [key]: value });
  const input = (
    key: string,
    props: { type?: "number"; list?: string; placeholder?: string; min?: number; max?: number } =
      {},
  ) => (
    <TextInput
      name={`cloud_${key}`}
      value={values[key] ?? ""}
      onInput={set(key)}
      disabled={readOnly}
      {...props}
    />
  );
  const fields = CLOUD_FIELDS[provider];
  const shown = new Set([
    ...fields.map((f) => `body.config.${f.key}`),
    ...Object.keys(COMMON_DEFAULTS).map((key) => `body.config.${key}`),
    "body.config.tags",
  ]);
  // Issues at a key no field shows (the config whole is shown at the legend).
  const others = (error?.issues ?? []).filter((issue) =>
    issue.field.startsWith("body.config.") &&
    ![...shown].some((field) => issue.field === field || issue.field.startsWith(`${field}.`))
  );
  const lists = fields.filter((f) => f.options !== undefined);
  const fieldOf = (field: CloudField) => (
    <Field
      key={field.key}
      label={field.label}
      field={`config.${field.key}`}
      error={error}
      required={field.required}
      hint={field.hint ??
        (field.options && options
          ? `Suggested: ${options[field.options].length} common ones; any other the cloud knows`
          : undefined)}
    >
      <TextInput
        name={`cloud_${field.key}`}
        value={values[field.key] ?? ""}
        onInput={set(field.key)}
        disabled={readOnly}
        required={field.required}
        placeholder={field.placeholder}
        multiline={field.multiline}
        list={field.options ? `cloud-options-${field.options}` : undefined}
      />
    </Field>
  );
  return (
    <fieldset data-field="config" class="cloud-config">
      <legend>{CLOUD_NAMES[provider]}</legend>
      <FieldError error={error} field="config" exact />
      {others.map((issue) => (
        <p key={issue.field} class="field-error" role="alert">
          <code>{issue.field.replace(/^body\./, "")}</code>: {issue.message}
        </p>
      ))}
      <Field
        label="Instance name prefix"
        field="config.instance_name"
        error={error}
        required
        hint="Instances are named <prefix>-<time>-<6 hex>: 1 to 40 lower-case letters, digits and -, from a letter"
      >
        {input("instance_name", { placeholder: "proxy" })}
      </Field>
      <div class="grid">{fields.filter((f) => !f.multiline).map(fieldOf)}</div>
      {fields.filter((f) => f.multiline).map(fieldOf)}
      {lists.map((field) => (
        <datalist key={field.key} id={`cloud-options-${field.options}`}>
          {(options?.[field.options!] ?? []).map((value) => <option key={value} value={value} />)}
        </datalist>
      ))}
      <div class="grid">
        <Field
          label="Min instances"
          field="config.min_proxies"
          error={error}
          hint={`Always running, even without traffic: 0 to ${MAX_CLOUD_PROXIES}`}
        >
          {input("min_proxies", { type: "number", min: 0, max: MAX_CLOUD_PROXIES })}
        </Field>
        <Field
          label="Max instances"
          field="config.max_proxies"
          error={error}
          hint="At most this many, however high the demand"
        >
          {input("max_proxies", { type: "number", min: 1, max: MAX_CLOUD_PROXIES })}
        </Field>
        <Field
          label="Rotate after at least (minutes)"
          field="config.min_rotation_period_minutes"
          error={error}
          hint="Each instance is replaced after a random time between the two"
        >
          {input("min_rotation_period_minutes", { type: "number", min: 1 })}
        </Field>
        <Field
          label="Rotate after at most (minutes)"
          field="config.max_rotation_period_minutes"
          error={error}
          hint="1 minute to a year (525600)"
        >
          {input("max_rotation_period_minutes", { type: "number", min: 1 })}
        </Field>
      </div>
      <Field
        label="Tags"
        field="config.tags"
        error={error}
        hint="One key=value a line, on every instance besides Octoprox's own octoprox-connector (GCP labels: lower-case)"
      >
        <TextInput
          name="cloud_tags"
          value={values.tags ?? ""}
          onInput={set("tags")}
          disabled={readOnly}
          multiline
          placeholder="team=growth"
        />
      </Field>
    </fieldset>
  );
}
