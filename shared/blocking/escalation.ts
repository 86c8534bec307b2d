/**
 * A project's cost-aware escalation (docs/blocking.md, "Escalation"): its connectors ranked in
 * tiers, cheapest first (shared/routing/tiers.ts), each site served from the cheapest tier that
 * last worked for it. A run of block verdicts there moves the site one tier up; once it has spent
 * `probe_after_seconds` on a tier, its requests are sent one tier down as probes, and a run of
 * good probes moves it back down (one failed probe keeps it where it is for another
 * `probe_after_seconds`). The state per project and site is kept in Redis and shared by every
 * gateway (gateway/blocking/escalations.ts, shared/lua/escalation-report.lua).
 *
 * The policy's one reading here serves the api, a configuration file and the gateway.
 *
 * Runs unchanged on Node and Deno.
 */
export interface EscalationPolicy {
  /** Block verdicts in a row on a site's tier before it moves one tier up. */
  up_after_blocks: number;
  /** Time on a tier (and after a failed probe) before requests probe the tier below. */
  probe_after_seconds: number;
  /** Good probes in a row on the tier below before the site moves down to it. */
  down_after_probes: number;
}

export const DEFAULT_ESCALATION: Readonly<EscalationPolicy> = Object.freeze({
  up_after_blocks: 3,
  probe_after_seconds: 600,
  down_after_probes: 3,
});

export const ESCALATION_LIMITS = {
  runMax: 1_000,
  probeAfterSecondsMin: 1,
  probeAfterSecondsMax: 7 * 86_400,
} as const;

/** Where a site stands on one gateway: the tier it is served from, and whether it probes below. */
export interface EscalationLevel {
  /** 0: the cheapest tier. */
  tier: number;
  /** Requests go one tier down as probes (the site has been on its tier long enough). */
  probing: boolean;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const isInteger = (value: unknown, min: number, max: number): value is number =>
  typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;

/** A project's escalation as written; undefined with `issues` told when refused. */
export function readEscalationPolicy(
  raw: unknown,
  issues: { path: string; message: string }[],
): EscalationPolicy | undefined {
  const before = issues.length;
  if (!isObject(raw)) {
    issues.push({
      path: "",
      message: "must be an object (up_after_blocks, probe_after_seconds, down_after_probes)",
    });
    return undefined;
  }
  const known = new Set(Object.keys(DEFAULT_ESCALATION));
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) issues.push({ path: `.${key}`, message: "is not an escalation field" });
  }
  const runs = ["up_after_blocks", "down_after_probes"] as const;
  for (const name of runs) {
    const value = raw[name] ?? DEFAULT_ESCALATION[name];
    if (!isInteger(value, 1, ESCALATION_LIMITS.runMax)) {
      issues.push({
        path: `.${name}`,
        message: `must be a whole number, 1-${ESCALATION_LIMITS.runMax}`,
      });
    }
  }
  const probe = raw.probe_after_seconds ?? DEFAULT_ESCALATION.probe_after_seconds;
  if (
    !isInteger(
      probe,
      ESCALATION_LIMITS.probeAfterSecondsMin,
      ESCALATION_LIMITS.probeAfterSecondsMax,
    )
  ) {
    issues.push({
      path: ".probe_after_seconds",
      message:
        `must be a whole number of seconds, ${ESCALATION_LIMITS.probeAfterSecondsMin}-${ESCALATION_LIMITS.probeAfterSecondsMax}`,
    });
  }
  if (issues.length !== before) return undefined;
  return {
    up_after_blocks: (raw.up_after_blocks ?? DEFAULT_ESCALATION.up_after_blocks) as number,
    probe_after_seconds: probe as number,
    down_after_probes: (raw.down_after_probes ?? DEFAULT_ESCALATION.down_after_probes) as number,
  };
}

/**
 * A site's state as shared/lua/escalation_report.lua stores it (one JSON record per site in the
 * project's hash), read the one way the gateways and the api read it.
 */
export interface EscalationState {
  tier: number;
  /** Since when the site is on its tier (epoch ms). */
  sinceMs: number;
  /** Blocks in a row on its tier; good probes in a row on the tier below. */
  blocks: number;
  probes: number;
  /** When its requests may probe the tier below (epoch ms; 0: never). */
  probeAtMs: number;
  /** What moved it last, the run that did and the tier it left; null and undefined: never. */
  moved: "up" | "down" | null;
  after: number;
  fromTier: number | undefined;
}

/** A stored record; undefined when it is not one (the site then counts as on tier 0). */
export function readEscalationState(text: string): EscalationState | undefined {
  let state: Record<string, unknown>;
  try {
    state = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const tier = Number(state.t);
  const probeAtMs = Number(state.n ?? 0);
  if (!Number.isInteger(tier) || tier < 0 || !Number.isFinite(probeAtMs)) return undefined;
  return {
    tier,
    sinceMs: Number(state.s) || 0,
    blocks: Number(state.b) || 0,
    probes: Number(state.p) || 0,
    probeAtMs,
    moved: state.w === "up" || state.w === "down" ? state.w : null,
    after: Number(state.c) || 0,
    fromTier: Number.isInteger(state.f) ? Number(state.f) : undefined,
  };
}
