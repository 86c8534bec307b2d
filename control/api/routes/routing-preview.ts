/** The routing preview: which connectors and proxies of a project would serve a username. */
import { UserRole } from "../../../shared/roles.ts";
import { PREVIEW_PROXY_LIMIT, previewRouting } from "../../feed/routing-preview.ts";
import type { ApiDeps } from "../deps.ts";
import { defineRoute, type Route } from "../registry.ts";
import { RoutingPreviewBody } from "../../model/routing-preview.ts";

export function routingPreviewRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "post",
      path: "/api/v1/projects/:id/routing-preview",
      tag: "projects",
      summary: "Which connectors and proxies would serve a client's username, and why not others",
      description: "Answered by the gateway's own routing code over a compile of this project, " +
        "with the quarantines and traffic blocks in Redis, as a gateway that has served nothing " +
        "would route one request now; nothing is written. `username` is read by the gateway's " +
        "grammar: a bad option is a 422 naming `body.username` with the sentence the gateway " +
        "answers 400 with. Without `target`, the destination is one that no domain rule names. " +
        `\`proxies\` lists at most ${PREVIEW_PROXY_LIMIT} of the eligible connectors' healthy ` +
        "proxies (`total` counts them all); `chosen` is the proxy the project's strategy picks, " +
        "or null with the gateway's `refusal`. With a connector sequence, only its current " +
        "connector serves (the others show `out_of_sequence`) and `sequence` shows where it " +
        "stands. No login or password is shown.",
      access: UserRole.viewer,
      body: RoutingPreviewBody,
      responses: {
        200: "`{project_id, strategy, username, target, connectors, proxies: {items, total}, " +
          "sequence, chosen, refusal, runtime_included, compiled_at}`",
      },
      async handler({ c, body, params }) {
        return c.json(await previewRouting(deps, params.id, body));
      },
    }),
  ];
}
