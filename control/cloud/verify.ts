/**
 * Cloud credentials and connectors checked against their cloud before they are saved. A
 * credential on its own (on create, and on an edit that changes it): the cloud takes the login
 * (verifyCloudCredential). A connector (on create, and on an edit or a credential change that
 * alters what the cloud judges): the credential works where the connector places its instances,
 * and the cloud knows the size and image it would launch (verifyCloudConnector). The cloud's
 * refusal is a 422 at the field it names; a cloud that does not answer is the CloudCallError
 * itself (502). Outbound calls, so the services run them outside any transaction.
 */
import { CloudCallError, type FieldIssue, ValidationError } from "../../shared/errors.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { CLOUD_CREDENTIAL_SCHEMAS, isCloudProvider } from "../model/cloud.ts";
import { cloudClientFor, CloudConfigError, credentialCheckFor } from "./clients.ts";

/** The cloud's own check's deadline. */
const VERIFY_TIMEOUT_MS = 20_000;

/** Credential fields the cloud's refusal of the login is shown at, per cloud. */
const CREDENTIAL_FIELDS = new Set([
  "access_key",
  "secret_key",
  "service_account_json",
  "project_id",
  "subscription_id",
  "tenant_id",
  "client_id",
  "client_secret",
]);

/** The check's own deadline passed: the cloud did not answer in time (502). */
function timedOut(provider: string, cause: unknown): CloudCallError {
  return new CloudCallError(
    provider,
    "verify",
    "timeout",
    `no answer within ${VERIFY_TIMEOUT_MS} ms`,
    { cause },
  );
}

export async function verifyCloudConnector(
  settings: Pick<ControlSettings, "cloud" | "egressCaFile">,
  provider: string,
  credential: Readonly<Record<string, unknown>>,
  config: Readonly<Record<string, unknown>>,
  /** Where the credential's fields are shown: the connector's `credential_id`, or the body. */
  credentialField: "body.credential_id" | "body.config",
): Promise<void> {
  let client;
  try {
    client = cloudClientFor(settings, provider, credential, config);
  } catch (error) {
    if (error instanceof CloudConfigError) {
      throw new ValidationError([{ field: credentialField, message: error.message }]);
    }
    throw error;
  }
  const deadline = AbortSignal.timeout(VERIFY_TIMEOUT_MS);
  try {
    await client.verify(deadline);
  } catch (error) {
    if (deadline.aborted && error === deadline.reason) throw timedOut(provider, error);
    if (!(error instanceof CloudCallError)) throw error;
    if (error.failure !== "auth" && error.failure !== "refused") throw error;
    const issue: FieldIssue = error.field !== undefined && !CREDENTIAL_FIELDS.has(error.field)
      ? { field: `body.config.${error.field}`, message: `the cloud refused it: ${error.message}` }
      : {
        field: credentialField === "body.config" && error.field !== undefined
          ? `body.config.${error.field}`
          : credentialField,
        message: `the cloud refused the credential: ${error.message}`,
      };
    throw new ValidationError([issue], { cause: error });
  }
}

/**
 * A cloud credential checked against its cloud on its own, with no connector: the cloud's
 * refusal of the login is a 422 at the credential field it names (`body.config` when it names
 * none of them); a cloud that does not answer, in time or at all, is a CloudCallError (502).
 */
export async function verifyCloudCredential(
  settings: Pick<ControlSettings, "cloud" | "egressCaFile">,
  provider: string,
  credential: Readonly<Record<string, unknown>>,
): Promise<void> {
  let check;
  try {
    check = credentialCheckFor(settings, provider, credential);
  } catch (error) {
    if (error instanceof CloudConfigError) {
      throw new ValidationError([{ field: "body.config", message: error.message }]);
    }
    throw error;
  }
  const fields: readonly string[] = isCloudProvider(provider)
    ? Object.keys(CLOUD_CREDENTIAL_SCHEMAS[provider].entries)
    : [];
  const deadline = AbortSignal.timeout(VERIFY_TIMEOUT_MS);
  try {
    await check(deadline);
  } catch (error) {
    if (deadline.aborted && error === deadline.reason) throw timedOut(provider, error);
    if (!(error instanceof CloudCallError)) throw error;
    if (error.failure !== "auth" && error.failure !== "refused") throw error;
    const field = error.field !== undefined && fields.includes(error.field)
      ? `body.config.${error.field}`
      : "body.config";
    throw new ValidationError(
      [{ field, message: `the cloud refused the credential: ${error.message}` }],
      { cause: error },
    );
  }
}
