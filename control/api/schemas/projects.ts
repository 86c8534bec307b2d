/** Project bodies. Username and password rules are shared/project-credentials.ts's. */
import * as v from "valibot";
import { MAX_RETRIES_LIMIT, STRATEGIES } from "../../../shared/roles.ts";
import {
  projectPasswordProblem,
  projectUsernameProblem,
} from "../../../shared/project-credentials.ts";
import { booleanField, integerField, nameField, readOnly, textField } from "./common.ts";

export const LOCATION_POLICIES = ["off", "warn", "strict"] as const;
export const LOCATION_PREFLIGHTS = ["off", "report", "retry", "reject"] as const;

/**
 * A location setting of the spec whose checks this release does not run: only `off` is taken,
 * and the spec's other values are refused by name rather than stored and ignored.
 */
function offUntilAvailable(values: readonly string[]) {
  return v.picklist(
    ["off"],
    (issue) =>
      values.includes(issue.input as string)
        ? `${JSON.stringify(issue.input)} is not available in this release (only "off" is)`
        : `must be "off" (${
          values.filter((value) => value !== "off").join(", ")
        }: not available in this release)`,
  );
}

const username = v.pipe(
  v.string("must be text"),
  v.trim(),
  v.check(
    (value) => projectUsernameProblem(value) === undefined,
    (issue) => projectUsernameProblem(String(issue.input)) ?? "is not a valid username",
  ),
);

const password = v.pipe(
  v.string("must be text"),
  v.check(
    (value) => projectPasswordProblem(value) === undefined,
    // The rule's message never repeats the password.
    (issue) => projectPasswordProblem(String(issue.input)) ?? "is not a valid password",
  ),
);

const fields = {
  name: nameField(),
  description: textField(2000),
  username,
  password,
  strategy: v.picklist(STRATEGIES, `must be one of ${STRATEGIES.join(", ")}`),
  location_policy: offUntilAvailable(LOCATION_POLICIES),
  location_preflight: offUntilAvailable(LOCATION_PREFLIGHTS),
  session_ttl_seconds: integerField(1, 7 * 86_400),
  sticky_quarantine: booleanField,
  /** 0 keeps history forever. */
  metrics_retention_days: integerField(0, 3650),
  connection_timeout_seconds: integerField(1, 600),
  max_retries: integerField(0, MAX_RETRIES_LIMIT),
};

const serverFields = {
  id: readOnly(),
  created_at: readOnly(),
  updated_at: readOnly(),
};

export const CreateProjectBody = v.strictObject({
  name: fields.name,
  username: fields.username,
  /** Generated when absent; the answer shows it. */
  password: v.optional(fields.password),
  description: v.optional(fields.description),
  strategy: v.optional(fields.strategy),
  location_policy: v.optional(fields.location_policy),
  location_preflight: v.optional(fields.location_preflight),
  session_ttl_seconds: v.optional(fields.session_ttl_seconds),
  sticky_quarantine: v.optional(fields.sticky_quarantine),
  metrics_retention_days: v.optional(fields.metrics_retention_days),
  connection_timeout_seconds: v.optional(fields.connection_timeout_seconds),
  max_retries: v.optional(fields.max_retries),
  ...serverFields,
});

export const UpdateProjectBody = v.strictObject({
  ...v.partial(v.strictObject(fields)).entries,
  ...serverFields,
});
