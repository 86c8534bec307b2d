/**
 * The three clouds as the pages word them: each cloud's name, its credential's fields (as
 * descriptor fields, so the credential form draws them as it draws a vendor's, secrets masked),
 * what held a scale run's step, in words (the CLI's `connectors instances` says the same), and
 * an instance's age.
 */
import type { ProviderField } from "../../../api/answers/providers.ts";
import {
  CLOUD_CREDENTIAL_SECRETS,
  CLOUD_PROVIDERS,
  type CloudProvider,
  isCloudProvider,
  scaleHoldWords,
} from "../../../model/cloud.ts";
import { formatAge } from "../../../core/format-age.ts";

export { CLOUD_PROVIDERS, type CloudProvider, isCloudProvider };

/** The connector kind whose instances a cloud account runs. */
export const CLOUD_KIND = "cloud";

export const CLOUD_NAMES: Record<CloudProvider, string> = {
  aws: "AWS (EC2)",
  gcp: "Google Cloud (Compute Engine)",
  azure: "Azure (virtual machines)",
};

export function cloudName(provider: string | null): string {
  return provider !== null && isCloudProvider(provider) ? CLOUD_NAMES[provider] : provider ?? "–";
}

const secret = (provider: CloudProvider, key: string) =>
  CLOUD_CREDENTIAL_SECRETS[provider].includes(key);

/**
 * A cloud credential's fields (control/model/cloud.ts). No label holds another page's label
 * ("Password", a plain "Name"), so a test's label lookup finds one field.
 */
export const CLOUD_CREDENTIAL_FIELDS: Record<CloudProvider, readonly ProviderField[]> = {
  aws: [
    {
      key: "access_key",
      label: "Access key ID",
      type: "text",
      secret: secret("aws", "access_key"),
      required: true,
      help: "An IAM user's access key id (AKIA…), allowed to describe, run and terminate EC2 " +
        "instances",
    },
    {
      key: "secret_key",
      label: "Secret access key",
      type: "password",
      secret: secret("aws", "secret_key"),
      required: true,
    },
  ],
  gcp: [
    {
      key: "project_id",
      label: "GCP project ID",
      type: "text",
      secret: secret("gcp", "project_id"),
      required: true,
      help: "Where instances run unless a connector names another project",
    },
    {
      key: "service_account_json",
      label: "Service account key (JSON)",
      type: "password",
      secret: secret("gcp", "service_account_json"),
      required: true,
      help: "Paste the whole key file a service account with the Compute Instance Admin role " +
        "downloads",
    },
  ],
  azure: [
    {
      key: "subscription_id",
      label: "Subscription ID",
      type: "text",
      secret: secret("azure", "subscription_id"),
      required: true,
    },
    {
      key: "tenant_id",
      label: "Tenant (directory) ID",
      type: "text",
      secret: secret("azure", "tenant_id"),
      required: true,
    },
    {
      key: "client_id",
      label: "Application (client) ID",
      type: "text",
      secret: secret("azure", "client_id"),
      required: true,
      help: "A service principal allowed to manage virtual machines in the resource group",
    },
    {
      key: "client_secret",
      label: "Client secret",
      type: "password",
      secret: secret("azure", "client_secret"),
      required: true,
    },
  ],
};

export function holdText(hold: string | null): string {
  if (hold === null) return "stepped towards it at the last run";
  return scaleHoldWords(hold);
}

/** An instance's age as the System page words a duration. */
export function formatInstanceAge(seconds: number): string {
  return formatAge(seconds * 1000);
}
