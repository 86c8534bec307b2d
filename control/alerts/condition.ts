/**
 * What a condition is: it reads what the system already knows (Postgres, Redis, the CA file)
 * and answers every subject that fires now. A subject absent from the answer is not firing; a
 * condition that cannot tell (a store away) throws, so the evaluator resolves nothing on a guess.
 */
import type { ControlDeps } from "../core/deps.ts";
import type { AlertRule } from "./rules.ts";

export type ConditionDeps = Pick<
  ControlDeps,
  "database" | "redis" | "keys" | "logger" | "settings"
>;

/** One subject firing: what it is, said for a person, and the figures behind it. */
export interface Firing {
  /** Stable across evaluations: `connector:<id>`, `project:<id>`, `job:<kind>`, `tls_ca`. */
  subject: string;
  message: string;
  details: Record<string, unknown>;
}

export type Condition = (deps: ConditionDeps, rule: AlertRule, nowMs: number) => Promise<Firing[]>;
