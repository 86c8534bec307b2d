/**
 * A cloud connector checked against its cloud before it is saved (on create, and on an edit or
 * a credential change that alters what the cloud judges): the credential works where the
 * connector places its instances, and the cloud knows the size and image it would launch. The
 * cloud's refusal is a 422 at the field it names; a cloud that does not answer is the
 * CloudCallError itself (502). An outbound call, so the services run it outside any transaction.
 */
import { CloudCallError, type FieldIssue, ValidationError } from "../../shared/errors.ts";
import type { ControlSettings } from "../../shared/settings.ts";
import { cloudClientFor, CloudConfigError } from "./clients.ts";

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
  try {
    await client.verify(AbortSignal.timeout(VERIFY_TIMEOUT_MS));
  } catch (error) {
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
