/**
 * A project's distribution keys: the credentials of its extraction API (routes/extraction.ts).
 * Viewers list them; editors and admins create, revoke and delete them.
 */
import { UserRole } from "../../../shared/roles.ts";
import {
  createDistributionKey,
  deleteDistributionKey,
  listDistributionKeys,
  revokeDistributionKey,
} from "../../provider-api/extraction/distribution-keys.ts";
import { REVOCATION_BOUND_SECONDS } from "../../provider-api/extraction/keys.ts";
import type { ApiDeps } from "../deps.ts";
import { presentDistributionKey } from "../present.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  CreatedDistributionKeyAnswer,
  DistributionKeyListAnswer,
} from "../answers/distribution-keys.ts";
import {
  CreateDistributionKeyBody,
  DeleteDistributionKeyQuery,
} from "../../model/distribution-keys.ts";

const KEYS = "/api/v1/projects/:id/distribution-keys";

const RAW_NOTE = "A distribution key calls this project's extraction API and nothing else; " +
  "what it extracts are raw proxy credentials its holder can use directly, outside the " +
  "gateway's limits and metering (docs/extraction.md).";

export function distributionKeyRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: KEYS,
      tag: "distribution-keys",
      summary: "List a project's distribution keys",
      access: UserRole.viewer,
      responses: {
        200: answer("The keys, oldest first, without their secret", DistributionKeyListAnswer),
      },
      async handler({ c, params }) {
        return c.json((await listDistributionKeys(deps, params.id)).map(presentDistributionKey));
      },
    }),
    defineRoute({
      method: "post",
      path: KEYS,
      tag: "distribution-keys",
      summary: "Create a distribution key",
      description: `${RAW_NOTE} The key (\`oxd_…\`) is in this answer only; the server keeps ` +
        "its SHA-256. `allowed_cidrs` (empty: anywhere) are the client addresses it is taken " +
        "from, as the api's socket sees them; `expires_at` (absent: never) ends it.",
      access: UserRole.editor,
      body: CreateDistributionKeyBody,
      responses: {
        201: answer(
          "The key's record and `key`, shown this once",
          CreatedDistributionKeyAnswer,
        ),
        400: "The project has a key of this name",
      },
      async handler({ c, params, body }) {
        const { row, key } = await createDistributionKey(deps, params.id, {
          name: body.name,
          allowedCidrs: body.allowed_cidrs,
          expiresAt: body.expires_at ?? null,
        });
        return c.json({ ...presentDistributionKey(row), key }, 201);
      },
    }),
    defineRoute({
      method: "delete",
      path: `${KEYS}/:keyId`,
      tag: "distribution-keys",
      summary: "Revoke a distribution key (purge=true: delete its record too)",
      description: "Every api process refuses the key within " +
        `${REVOCATION_BOUND_SECONDS} seconds. Leases it took stay until released or ended.`,
      access: UserRole.editor,
      query: DeleteDistributionKeyQuery,
      responses: { 204: "Revoked (also when it already was), or deleted" },
      async handler({ c, params, query }) {
        if (query.purge === "true") await deleteDistributionKey(deps, params.id, params.keyId);
        else await revokeDistributionKey(deps, params.id, params.keyId);
        return c.body(null, 204);
      },
    }),
  ];
}
