/** Credentials of a project. */
import { UserRole } from "../../../shared/roles.ts";
import {
  createCredential,
  deleteCredential,
  getCredential,
  listCredentials,
  updateCredential,
} from "../../services/credentials.ts";
import type { ApiDeps } from "../deps.ts";
import { presentCredential } from "../present.ts";
import { defineRoute, type Route } from "../registry.ts";
import { CreateCredentialBody, UpdateCredentialBody } from "../schemas/credentials.ts";

const CREDENTIALS = "/api/v1/projects/:id/credentials";

const SECRET_NOTE = "Secret config fields are answered masked (`********`) with a " +
  "`has_<field>` flag.";

export function credentialRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: CREDENTIALS,
      tag: "credentials",
      summary: "List a project's credentials",
      description: SECRET_NOTE,
      access: UserRole.viewer,
      responses: { 200: "The credentials, oldest first" },
      async handler({ c, params }) {
        return c.json((await listCredentials(deps, params.id)).map(presentCredential));
      },
    }),
    defineRoute({
      method: "post",
      path: CREDENTIALS,
      tag: "credentials",
      summary: "Create a credential",
      description: "Only the `static` provider exists yet: an optional default `username` and " +
        "`password` for a static list's proxies. Names are unique per project regardless of case.",
      access: UserRole.editor,
      body: CreateCredentialBody,
      responses: { 201: "The credential", 400: "The name is taken in this project" },
      async handler({ c, body, params }) {
        const row = await createCredential(deps, params.id, {
          name: body.name,
          provider: body.provider,
          config: body.config,
        });
        return c.json(presentCredential(row), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${CREDENTIALS}/:cid`,
      tag: "credentials",
      summary: "Read a credential",
      description: SECRET_NOTE,
      access: UserRole.viewer,
      responses: { 200: "The credential" },
      async handler({ c, params }) {
        return c.json(presentCredential(await getCredential(deps, params.id, params.cid)));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${CREDENTIALS}/:cid`,
      tag: "credentials",
      summary: "Edit a credential",
      description: "`config` is merged key by key: null removes a key, and the mask " +
        "`********` keeps the stored secret.",
      access: UserRole.editor,
      body: UpdateCredentialBody,
      responses: { 200: "The credential", 400: "The name is taken in this project" },
      async handler({ c, body, params }) {
        const row = await updateCredential(deps, params.id, params.cid, {
          name: body.name,
          config: body.config,
        });
        return c.json(presentCredential(row));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${CREDENTIALS}/:cid`,
      tag: "credentials",
      summary: "Delete a credential no connector uses",
      access: UserRole.editor,
      responses: { 204: "Deleted", 400: "A connector uses it" },
      async handler({ c, params }) {
        await deleteCredential(deps, params.id, params.cid);
        return c.body(null, 204);
      },
    }),
  ];
}
