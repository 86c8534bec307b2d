/**
 * Credential placeholders: a row built from a provider template keeps its secrets out of the
 * proxies table, so its username or password holds `{key}` placeholders, filled wherever the row
 * is used. This is the one function that fills them (the compiler for stored rows, the gateway
 * for rows rendered per request), so no two users can disagree.
 *
 * Rules: a placeholder is `{name}` with a name of letters, digits and `_` (not starting with a
 * digit); the connector's configuration wins over the credential's when both have the key; only
 * a non-empty string fills; a placeholder nothing fills stays as it is.
 *
 * Runs unchanged on Node and Deno.
 */

type Config = Readonly<Record<string, unknown>> | null | undefined;

export interface PlaceholderSources {
  /** The connector's configuration: wins when both have a key. */
  connector?: Config;
  /** The configuration of the connector's credential. */
  credential?: Config;
}

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

function filling(config: Config, key: string): string | undefined {
  if (!config || !Object.hasOwn(config, key)) return undefined;
  const value = config[key];
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** Fills `{key}` placeholders in one credential field; null stays null. */
export function fillPlaceholders(text: string, sources: PlaceholderSources): string;
export function fillPlaceholders(text: string | null, sources: PlaceholderSources): string | null;
export function fillPlaceholders(text: string | null, sources: PlaceholderSources): string | null {
  // Most rows hold no placeholder: skip the regular expression for them.
  if (text === null || !text.includes("{")) return text;
  return text.replace(
    PLACEHOLDER,
    (whole, key: string) =>
      filling(sources.connector, key) ?? filling(sources.credential, key) ?? whole,
  );
}
