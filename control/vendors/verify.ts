/**
 * The vendor's own check of a credential (a descriptor's `validation` call, after its token
 * flow): an outbound request, so the credentials service runs it before its transaction opens.
 * The vendor refusing the credential (a 4xx, or an answer its `success` test fails) is answered
 * 422 on `body.config`; a vendor that does not answer or fails itself is a 502, and a call the
 * egress guard refuses a 422: never a 500, and nothing is stored.
 */
import { EgressRefusedError, ValidationError, VendorCallError } from "../../shared/errors.ts";
import type { Descriptor } from "../../shared/vendors/descriptor.ts";
import type { ServiceDeps } from "../core/store.ts";
import { callOptions } from "../egress/call-options.ts";
import { validateCredential } from "../egress/http-call.ts";

export async function verifyCredential(
  deps: Pick<ServiceDeps, "settings">,
  descriptor: Descriptor,
  config: Readonly<Record<string, unknown>>,
): Promise<void> {
  if (descriptor.validation === undefined && descriptor.auth === undefined) return;
  try {
    await validateCredential(descriptor, config, callOptions(deps.settings));
  } catch (error) {
    const refused = error instanceof VendorCallError && error.status !== undefined &&
      error.status < 500;
    if (refused || error instanceof EgressRefusedError) {
      throw new ValidationError([{ field: "body.config", message: error.message }], {
        cause: error,
      });
    }
    throw error;
  }
}
