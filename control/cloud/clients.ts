/**
 * The one way a cloud client is built: from the connector's provider, its credential's config
 * and its own config, each read through its schema (a stored config that no longer parses is
 * an error the run records, never a call), with the install's endpoints and timeouts.
 */
import { readFileSync } from "node:fs";
import * as v from "valibot";
import type { ControlSettings } from "../../shared/settings.ts";
import {
  CLOUD_CONNECTOR_SCHEMAS,
  CLOUD_CREDENTIAL_SCHEMAS,
  type CloudProvider,
  isCloudProvider,
} from "../model/cloud.ts";
import type { CloudClient, CloudClientOptions } from "./contract.ts";
import { awsClient, verifyAwsCredential } from "./aws.ts";
import { gcpClient, verifyGcpCredential } from "./gcp.ts";
import { azureClient, verifyAzureCredential } from "./azure.ts";

/** Each call's own deadline: a cloud that does not answer in this long is taken as unavailable. */
const CALL_TIMEOUT_MS = 30_000;

let caCache: { path: string; pem: string } | undefined;

function caPem(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  if (caCache?.path !== path) caCache = { path, pem: readFileSync(path, "utf8") };
  return caCache.pem;
}

/** The options every client shares, for `provider`. */
export function clientOptions(
  settings: Pick<ControlSettings, "cloud" | "egressCaFile">,
  provider: CloudProvider,
): CloudClientOptions {
  const endpoints: Record<CloudProvider, string | undefined> = {
    aws: settings.cloud.awsEndpoint,
    gcp: settings.cloud.gcpEndpoint,
    azure: settings.cloud.azureEndpoint,
  };
  return {
    endpoint: endpoints[provider],
    createTimeoutMs: settings.cloud.createTimeoutMs,
    pollIntervalMs: settings.cloud.pollIntervalMs,
    callTimeoutMs: CALL_TIMEOUT_MS,
    ca: caPem(settings.egressCaFile),
  };
}

/** Why a connector's client cannot be built: which config, and the first issue. */
export class CloudConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CloudConfigError";
  }
}

function parsed<T>(schema: v.GenericSchema<unknown, T>, value: unknown, what: string): T {
  const result = v.safeParse(schema, value);
  if (result.success) return result.output;
  const issue = result.issues[0];
  const path = v.getDotPath(issue);
  throw new CloudConfigError(`${what}${path ? `.${path}` : ""}: ${issue.message}`);
}

/** The client of a cloud connector, or CloudConfigError when its stored configs do not parse. */
export function cloudClientFor(
  settings: Pick<ControlSettings, "cloud" | "egressCaFile">,
  provider: string,
  credential: Readonly<Record<string, unknown>> | null,
  config: Readonly<Record<string, unknown>>,
): CloudClient {
  if (!isCloudProvider(provider)) throw new CloudConfigError(`no cloud provider ${provider}`);
  if (credential === null) throw new CloudConfigError(`credential: the connector has none`);
  const options = clientOptions(settings, provider);
  switch (provider) {
    case "aws":
      return awsClient(
        parsed(CLOUD_CREDENTIAL_SCHEMAS.aws, credential, "credential"),
        parsed(CLOUD_CONNECTOR_SCHEMAS.aws, config, "config"),
        options,
      );
    case "gcp":
      return gcpClient(
        parsed(CLOUD_CREDENTIAL_SCHEMAS.gcp, credential, "credential"),
        parsed(CLOUD_CONNECTOR_SCHEMAS.gcp, config, "config"),
        { ...options, tokenUrl: settings.cloud.gcpTokenUrl },
      );
    case "azure":
      return azureClient(
        parsed(CLOUD_CREDENTIAL_SCHEMAS.azure, credential, "credential"),
        parsed(CLOUD_CONNECTOR_SCHEMAS.azure, config, "config"),
        { ...options, authority: settings.cloud.azureAuthority },
      );
  }
}

/**
 * A cloud credential's own check, with no connector (its cloud's cheapest authenticated reads,
 * aws.ts, gcp.ts and azure.ts `verify…Credential`), with the install's endpoints and timeouts;
 * CloudConfigError when the config does not parse. The check throws CloudCallError.
 */
export function credentialCheckFor(
  settings: Pick<ControlSettings, "cloud" | "egressCaFile">,
  provider: string,
  credential: Readonly<Record<string, unknown>>,
): (signal: AbortSignal) => Promise<void> {
  if (!isCloudProvider(provider)) throw new CloudConfigError(`no cloud provider ${provider}`);
  const options = clientOptions(settings, provider);
  switch (provider) {
    case "aws": {
      const config = parsed(CLOUD_CREDENTIAL_SCHEMAS.aws, credential, "credential");
      return (signal) => verifyAwsCredential(config, options, signal);
    }
    case "gcp": {
      const config = parsed(CLOUD_CREDENTIAL_SCHEMAS.gcp, credential, "credential");
      const gcp = { ...options, tokenUrl: settings.cloud.gcpTokenUrl };
      return (signal) => verifyGcpCredential(config, gcp, signal);
    }
    case "azure": {
      const config = parsed(CLOUD_CREDENTIAL_SCHEMAS.azure, credential, "credential");
      const azure = { ...options, authority: settings.cloud.azureAuthority };
      return (signal) => verifyAzureCredential(config, azure, signal);
    }
  }
}
