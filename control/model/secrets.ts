/**
 * How a secret config field is shown: the one mask the API answers in its place and, sent back
 * in an edit, takes to mean "keep the stored one". The server masks with it
 * (control/services/credentials.ts, control/services/connectors.ts) and the dashboard reads it
 * (control/web/src/ui/provider-fields.tsx): one copy, imported by both.
 */

/** What an answer shows in place of a secret; sent back in an edit, it keeps the secret. */
export const SECRET_MASK = "********";

/** Whether a config value is the mask. */
export function isMasked(value: unknown): boolean {
  return value === SECRET_MASK;
}

/** Whether a stored value is a secret that is set (text, not empty): answered masked. */
export function secretIsSet(value: unknown): boolean {
  return typeof value === "string" && value !== "";
}

/** `config` with each of `secrets` that is set masked, and which of them are set. */
export function maskSecrets(
  config: Readonly<Record<string, unknown>>,
  secrets: readonly string[],
): { config: Record<string, unknown>; secretsSet: Record<string, boolean> } {
  const masked: Record<string, unknown> = { ...config };
  const secretsSet: Record<string, boolean> = {};
  for (const field of secrets) {
    const set = secretIsSet(config[field]);
    secretsSet[field] = set;
    if (set) masked[field] = SECRET_MASK;
  }
  return { config: masked, secretsSet };
}
