/**
 * A project's response judging fields, read by shared/blocking/rules.ts (the one reading the
 * gateway applies too) inside the project's valibot schema, each refusal naming its place:
 * `body.block_rules.2.header.pattern`.
 *
 * - `block_rules`: the ordered rules (a preset by name, or conditions of the operator's own);
 * - `retry`: how a judged answer is retried on another exit (null: the defaults);
 * - `block_body_bytes`: how much of a body the rules' markers are looked for in (null: 8 KiB);
 * - `escalation`: cost-aware escalation between the project's connector tiers (null: none).
 */
import * as v from "valibot";
import { bodyBytesIssue, readBlockRules, readRetryPolicy } from "../../shared/blocking/rules.ts";
import { readEscalationPolicy } from "../../shared/blocking/escalation.ts";
import { readerField } from "./validation.ts";

export const blockRulesField = v.pipe(v.unknown(), readerField(readBlockRules));

export const retryField = v.nullable(v.pipe(v.unknown(), readerField(readRetryPolicy)));

export const escalationField = v.nullable(
  v.pipe(v.unknown(), readerField(readEscalationPolicy)),
);

export const blockBodyBytesField = v.nullable(
  v.pipe(
    v.unknown(),
    v.rawTransform<unknown, number>(({ dataset, addIssue, NEVER }) => {
      const issue = bodyBytesIssue(dataset.value);
      if (issue === undefined) return dataset.value as number;
      addIssue({ message: issue });
      return NEVER;
    }),
  ),
);
