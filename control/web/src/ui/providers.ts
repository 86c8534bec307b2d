/**
 * The provider catalogue as the pages word it: a proxy type's mode, what its templates render
 * of a request, and a vendor connector's mode from its config.
 */
import type { Connector } from "../../../api/answers/connectors.ts";
import type { ProviderRecord, ProviderType } from "../../../api/answers/providers.ts";

export const MODE_NAMES: Record<ProviderType["mode"], string> = {
  session: "sessions",
  port: "ports",
  list: "list",
};

/** What a type's mode means, for a title or a hint. */
export const MODE_HELP: Record<ProviderType["mode"], string> = {
  session: "One vendor gateway; each slot is a vendor session of its own",
  port: "One exit per slot, on sequential ports (or the exits the vendor's API lists)",
  list: "The vendor's list of proxies, mirrored at each sync",
};

/** "country, state (US), city, session time (1 to 1440 min)", or "nothing". */
export function rendersOf(type: ProviderType): string[] {
  const parts: string[] = [];
  if (type.renders.country) parts.push("country");
  if (type.renders.state) {
    parts.push(type.state_countries ? `state (${type.state_countries.join(", ")})` : "state");
  }
  if (type.renders.city) {
    parts.push(type.city_countries ? `city (${type.city_countries.join(", ")})` : "city");
  }
  if (type.renders.session_time) {
    const time = type.session_time;
    parts.push(
      time ? `session time (${time.min_minutes} to ${time.max_minutes} min)` : "session time",
    );
  }
  return parts;
}

export function providerName(providers: readonly ProviderRecord[], id: string | null): string {
  if (id === null) return "–";
  return providers.find((p) => p.id === id)?.name ?? id;
}

/** The proxy type a vendor connector's config names (the descriptor's first when none). */
export function typeOf(
  provider: ProviderRecord | undefined,
  config: Readonly<Record<string, unknown>> | undefined,
): ProviderType | undefined {
  if (!provider) return undefined;
  const id = config?.proxy_type;
  if (typeof id !== "string" || id === "") return provider.proxy_types[0];
  return provider.proxy_types.find((t) => t.id === id);
}

/** A vendor connector's mode in words: "dynamic sessions", "session pool, 10 slots"… */
export function connectorMode(
  connector: Pick<Connector, "config" | "countries">,
  type: ProviderType | undefined,
): string {
  const config = connector.config ?? {};
  const slots = typeof config.slots === "number" ? config.slots : undefined;
  const slotText = slots === undefined ? "" : `, ${slots} ${slots === 1 ? "slot" : "slots"}`;
  if (config.session_mode === "dynamic") return "dynamic sessions";
  if (config.session_mode === "pool" || type?.mode === "session") {
    const per = connector.countries.length > 0 ? " per country" : "";
    return `session pool${slotText}${per}`;
  }
  if (type?.mode === "port") {
    return slots === undefined ? "port pool, the exits the vendor lists" : `port pool${slotText}`;
  }
  if (type?.mode === "list") return "the vendor's list";
  return "vendor";
}
