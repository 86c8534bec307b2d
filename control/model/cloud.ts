/**
 * Cloud credentials and cloud connector configs: AWS, GCP and Azure. A cloud connector's
 * config names where its instances run and how many (`min_proxies` to `max_proxies`), how long
 * each lives (a random time between the rotation periods) and the tags its instances carry
 * besides the one Octoprox tag. Secrets are the credential's only; a connector config holds
 * none (an SSH public key is public).
 */
import * as v from "valibot";
import { integerField } from "./common.ts";

export const CLOUD_PROVIDERS = ["aws", "gcp", "azure"] as const;
export type CloudProvider = (typeof CLOUD_PROVIDERS)[number];

export function isCloudProvider(value: string): value is CloudProvider {
  return (CLOUD_PROVIDERS as readonly string[]).includes(value);
}

const text = (max: number, message = "must not be empty") =>
  v.pipe(
    v.string("must be text"),
    v.trim(),
    v.minLength(1, message),
    v.maxLength(max, `must be at most ${max} characters`),
  );

const pattern = (max: number, regex: RegExp, message: string) =>
  v.pipe(v.string("must be text"), v.trim(), v.maxLength(max, message), v.regex(regex, message));

// ---------------------------------------------------------------------------------------------
// Credentials: every field is kept; the secret ones are masked in answers and the audit log.

export const AwsCredentialConfig = v.strictObject({
  access_key: pattern(128, /^[A-Z0-9]{16,128}$/, "must be an AWS access key id (AKIA…)"),
  secret_key: text(256),
});
export type AwsCredential = v.InferOutput<typeof AwsCredentialConfig>;

/** The fields of a service account key file the client uses. */
const ServiceAccountKey = v.object({
  type: v.literal("service_account", 'must be a service account key ("type": "service_account")'),
  client_email: v.pipe(v.string("must be text"), v.email("must be the account's e-mail")),
  private_key: v.pipe(
    v.string("must be text"),
    v.includes("PRIVATE KEY", "must be the key file's PEM private key"),
  ),
});

export const GcpCredentialConfig = v.strictObject({
  service_account_json: v.pipe(
    text(20_000),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(dataset.value);
      } catch {
        addIssue({ message: "must be the service account's JSON key file" });
        return;
      }
      const checked = v.safeParse(ServiceAccountKey, parsed);
      if (!checked.success) {
        const issue = checked.issues[0];
        const path = v.getDotPath(issue);
        addIssue({ message: path ? `${path} ${issue.message}` : issue.message });
      }
    }),
  ),
  project_id: pattern(30, /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, "must be a GCP project id"),
});
export type GcpCredential = v.InferOutput<typeof GcpCredentialConfig>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const AzureCredentialConfig = v.strictObject({
  subscription_id: pattern(36, UUID, "must be a subscription id (a uuid)"),
  tenant_id: pattern(36, UUID, "must be a tenant id (a uuid)"),
  client_id: pattern(36, UUID, "must be an application (client) id (a uuid)"),
  client_secret: text(512),
});
export type AzureCredential = v.InferOutput<typeof AzureCredentialConfig>;

export const CLOUD_CREDENTIAL_SCHEMAS = {
  aws: AwsCredentialConfig,
  gcp: GcpCredentialConfig,
  azure: AzureCredentialConfig,
} as const;

/** Credential fields answers mask. */
export const CLOUD_CREDENTIAL_SECRETS: Readonly<Record<CloudProvider, readonly string[]>> = {
  aws: ["secret_key"],
  gcp: ["service_account_json"],
  azure: ["client_secret"],
};

// ---------------------------------------------------------------------------------------------
// Connector configs.

/** At most this many instances per connector: a scale run of this many stays cheap. */
export const MAX_CLOUD_PROXIES = 1000;
/** Rotation periods: from a minute to a year. */
const ROTATION_MIN_MINUTES = 1;
const ROTATION_MAX_MINUTES = 525_600;

const TAG_KEY = /^[A-Za-z0-9][A-Za-z0-9_.:/=+@-]{0,62}$/;

/**
 * Tags the connector's instances carry (a GCP label's key and value lower-case). The Octoprox
 * tag `octoprox-connector` is the connector's own and cannot be set here.
 */
const tags = v.pipe(
  v.record(
    v.pipe(
      v.string(),
      v.regex(TAG_KEY, "must be a tag key of letters, digits and _ . : / = + @ -"),
      v.check(
        (key) => !key.toLowerCase().startsWith("octoprox-"),
        "octoprox- tags are Octoprox's own",
      ),
    ),
    v.pipe(v.string("must be text"), v.maxLength(63, "must be at most 63 characters")),
    "must be an object of tag values",
  ),
  v.check((value) => Object.keys(value).length <= 40, "must hold at most 40 tags"),
);

/** What every cloud connector's config holds. */
const common = {
  /** The instances' name prefix: `<instance_name>-<epoch s>-<6 hex>`, cut to the cloud's limit. */
  instance_name: pattern(
    40,
    /^[a-z][a-z0-9-]{0,39}$/,
    "must be 1 to 40 lower-case letters, digits and -, from a letter",
  ),
  min_proxies: v.optional(integerField(0, MAX_CLOUD_PROXIES), 1),
  max_proxies: v.optional(integerField(1, MAX_CLOUD_PROXIES), 10),
  min_rotation_period_minutes: v.optional(
    integerField(ROTATION_MIN_MINUTES, ROTATION_MAX_MINUTES),
    60,
  ),
  max_rotation_period_minutes: v.optional(
    integerField(ROTATION_MIN_MINUTES, ROTATION_MAX_MINUTES),
    1440,
  ),
  tags: v.optional(tags, {}),
};

type Common = {
  min_proxies: number;
  max_proxies: number;
  min_rotation_period_minutes: number;
  max_rotation_period_minutes: number;
};

/** The cross-field rules, each at the field an edit would change. */
function ranges<T extends v.StrictObjectSchema<v.ObjectEntries, undefined>>(schema: T) {
  return v.pipe(
    schema,
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return;
      const input = dataset.value as unknown as Common;
      if (input.max_proxies < input.min_proxies) {
        addIssue({
          message: "must not be less than min_proxies",
          path: [issuePath(input, "max_proxies")],
        });
      }
      if (input.max_rotation_period_minutes < input.min_rotation_period_minutes) {
        addIssue({
          message: "must not be less than min_rotation_period_minutes",
          path: [issuePath(input, "max_rotation_period_minutes")],
        });
      }
    }),
  );
}

/** A path item naming `key` of `input`, as valibot's issues carry them. */
function issuePath(input: unknown, key: string) {
  return {
    type: "object" as const,
    origin: "value" as const,
    input: input as Record<string, unknown>,
    key,
    value: (input as Record<string, unknown>)[key],
  };
}

const AWS_REGION = /^[a-z]{2}(-gov)?-[a-z]+-\d$/;

export const AwsConnectorConfig = ranges(v.strictObject({
  ...common,
  region: pattern(32, AWS_REGION, "must be an AWS region such as eu-west-1"),
  instance_type: pattern(
    32,
    /^[a-z0-9-]+\.[a-z0-9]+$/,
    "must be an instance type such as t3.micro",
  ),
  ami_id: pattern(21, /^ami-[0-9a-f]{8,17}$/, "must be an image id such as ami-0123456789abcdef0"),
  security_group: v.optional(
    v.nullable(pattern(20, /^sg-[0-9a-f]{8,17}$/, "must be a security group id (sg-…)")),
    null,
  ),
  key_pair_name: v.optional(v.nullable(text(255)), null),
}));
export type AwsConnector = v.InferOutput<typeof AwsConnectorConfig>;

export const GcpConnectorConfig = ranges(v.strictObject({
  ...common,
  /** Defaults to the credential's project. */
  project_id: v.optional(
    v.nullable(pattern(30, /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, "must be a GCP project id")),
    null,
  ),
  zone: pattern(32, /^[a-z]+-[a-z]+\d+-[a-z]$/, "must be a zone such as europe-west1-b"),
  machine_type: pattern(40, /^[a-z0-9]+-[a-z0-9-]+$/, "must be a machine type such as e2-micro"),
  network: v.optional(
    pattern(63, /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/, "must be a network name"),
    "default",
  ),
}));
export type GcpConnector = v.InferOutput<typeof GcpConnectorConfig>;

export const AzureConnectorConfig = ranges(v.strictObject({
  ...common,
  /** Defaults to the credential's subscription. */
  subscription_id: v.optional(v.nullable(pattern(36, UUID, "must be a subscription id")), null),
  resource_group: pattern(90, /^[-\w.()]{1,89}[-\w()]$/, "must be a resource group name"),
  location: pattern(40, /^[a-z0-9]+$/, "must be a location such as westeurope"),
  vm_size: pattern(64, /^[A-Za-z0-9_]+$/, "must be a VM size such as Standard_B1s"),
  vnet_name: pattern(64, /^[\w][-\w.]{0,62}[\w]$/, "must be a virtual network name"),
  subnet_name: pattern(80, /^[\w][-\w.]{0,78}[\w]$/, "must be a subnet name"),
  ssh_public_key: pattern(
    16_384,
    /^(ssh-rsa|ssh-ed25519|ecdsa-sha2-nistp256) [A-Za-z0-9+/=]+( .*)?$/,
    "must be an OpenSSH public key (ssh-ed25519 AAAA…)",
  ),
}));
export type AzureConnector = v.InferOutput<typeof AzureConnectorConfig>;

export const CLOUD_CONNECTOR_SCHEMAS = {
  aws: AwsConnectorConfig,
  gcp: GcpConnectorConfig,
  azure: AzureConnectorConfig,
} as const;

/** What the scale job reads of any cloud connector's config. */
export interface CloudScaleConfig {
  instance_name: string;
  min_proxies: number;
  max_proxies: number;
  min_rotation_period_minutes: number;
  max_rotation_period_minutes: number;
  tags: Record<string, string>;
}

/** Why a run took no scaling step (the connector page shows it). */
export const ScaleHold = {
  /** The pool is at its target. */
  atTarget: "at_target",
  /** Backing off after cloud errors (2^errors minutes, up to 30). */
  backoff: "backoff",
  /** The connector's traffic limit blocks it: its rejections would read as demand. */
  trafficBlocked: "traffic_blocked",
  /** Within the cooldown after the last scaling action. */
  cooldown: "cooldown",
  /** An instance is still initializing. */
  initializing: "initializing",
  /** A scale entry of the creating hash remains (a step under way, or one that died). */
  creating: "creating",
  /** Scale-up needs traffic in the last minute. */
  noTraffic: "no_traffic",
  /** Scale-down waits until a whole demand window was watched. */
  watching: "watching",
  /** Disabled or pending deletion: drained to zero. */
  disabled: "disabled",
} as const;
export type ScaleHold = (typeof ScaleHold)[keyof typeof ScaleHold];

/** What held a scale run's step, in words: the connector page and the CLI say the same. */
export const SCALE_HOLD_WORDS: Readonly<Record<ScaleHold, string>> = {
  at_target: "at its target",
  backoff: "backing off after cloud errors",
  traffic_blocked: "blocked by its traffic limit",
  cooldown: "cooling down after its last step",
  initializing: "an instance is initializing",
  creating: "instances are being created",
  no_traffic: "no traffic in the last minute",
  watching: "watching a whole demand window before scaling down",
  disabled: "disabled or being deleted: draining to zero",
};

/** A hold in words (an unknown one as it is). */
export function scaleHoldWords(hold: string): string {
  return (SCALE_HOLD_WORDS as Record<string, string>)[hold] ?? hold;
}
