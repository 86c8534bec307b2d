/** A project's connector sequence (sequential routing). */
import { UserRole } from "../../../shared/roles.ts";
import { clearSequence, getSequence, setSequence } from "../../services/sequences.ts";
import type { ApiDeps } from "../deps.ts";
import { presentSequence } from "../present.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import { SequenceAnswer } from "../answers/sequences.ts";
import { SequenceBody } from "../../model/sequences.ts";

const SEQUENCE = "/api/v1/projects/:id/sequence";

const ANSWER = "`{project_id, connector_ids, current_index, current_connector_id, on_end, " +
  "on_unavailable, exhausted, version, switched_at, connectors: [{id, name, depleted_at}], " +
  "created_at, updated_at}`";

const SEQUENCE_NOTE = "With a sequence, gateways route the project through its current " +
  "connector alone (the strategy still picks among that connector's proxies). When that " +
  "connector runs dry (a provider pool's run of empty fetches), the sequence moves to the next " +
  "one, once however many processes see it; past the last one `on_end` says what happens: " +
  "`stop` (the default) leaves it `exhausted`, serving nothing until it is set again, `loop` " +
  "goes back to the first, `stay_last` keeps the last. When the current connector cannot serve " +
  "a request (disabled, being deleted, not in routing, no usable proxy) or the sequence is " +
  "exhausted, the client gets 503 with the reason (`on_unavailable` `reject`, the only answer " +
  "so far). `current_connector_id` is null once exhausted. Deleting a connector drops it from " +
  "the sequence; one left with fewer than two connectors is removed.";

export function sequenceRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: SEQUENCE,
      tag: "projects",
      summary: "Read a project's connector sequence",
      description: SEQUENCE_NOTE,
      access: UserRole.viewer,
      responses: { 200: answer(ANSWER, SequenceAnswer) },
      async handler({ c, params }) {
        return c.json(presentSequence(await getSequence(deps, params.id)));
      },
    }),
    defineRoute({
      method: "put",
      path: SEQUENCE,
      tag: "projects",
      summary: "Set a project's connector sequence",
      description: "`connector_ids`: at least two connectors of this project, each once, in " +
        "the order they serve. Setting a sequence (again) starts it over: the first connector " +
        "is current, it is not exhausted, and its `version` moves on. " + SEQUENCE_NOTE,
      access: UserRole.editor,
      body: SequenceBody,
      responses: { 200: answer(ANSWER, SequenceAnswer) },
      async handler({ c, body, params }) {
        const sequence = await setSequence(deps, params.id, {
          connectorIds: body.connector_ids,
          onEnd: body.on_end,
          onUnavailable: body.on_unavailable,
        });
        return c.json(presentSequence(sequence));
      },
    }),
    defineRoute({
      method: "delete",
      path: SEQUENCE,
      tag: "projects",
      summary: "Remove a project's connector sequence",
      description: "Every eligible connector of the project shares its requests by weight again.",
      access: UserRole.editor,
      responses: { 204: "Removed" },
      async handler({ c, params }) {
        await clearSequence(deps, params.id);
        return c.body(null, 204);
      },
    }),
  ];
}
