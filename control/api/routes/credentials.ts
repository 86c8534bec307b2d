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
import { answer, defineRoute, type Route } from "../registry.ts";
import { CredentialAnswer, CredentialListAnswer } from "../answers/credentials.ts";
import { CreateCredentialBody, UpdateCredentialBody } from "../../model/credentials.ts";

const CREDENTIALS = "/api/v1/projects/:id/credentials";

const SECRET_NOTE = "Secret config fields are answered masked (`********`) with a " +
  "`has_<field>` flag.";

export function credentialRoutes(deps: ApiDeps): Route[] {
  const present = (row: Parameters<typeof presentCredential>[0]) =>
    presentCredential(row, deps.providers);
  return [
    defineRoute({
      method: "get",
      path: CREDENTIALS,
      tag: "credentials",
      summary: "List a project's credentials",
      description: SECRET_NOTE,
      access: UserRole.viewer,
      responses: { 200: answer("The credentials, oldest first", CredentialListAnswer) },
      async handler({ c, params }) {
        return c.json((await listCredentials(deps, params.id)).map((row) => present(row)));
      },
    }),
    defineRoute({
      method: "post",
      path: CREDENTIALS,
      tag: "credentials",
      summary: "Create a credential",
      description: "`provider` is `static` (an optional default `username` and `password` for " +
        "a static list's proxies), `provider_api` (a flat object of text values, every one " +
        "secret, that provider_api connectors' templates read as `{credential.<key>}`), a " +
        "cloud (`aws`: `access_key`, `secret_key`; `gcp`: `service_account_json`, " +
        "`project_id`; `azure`: `subscription_id`, `tenant_id`, `client_id`, `client_secret`; " +
        "checked with the cloud before anything is stored: 422 at the field it refused, 502 " +
        "when it does not answer; docs/cloud.md) or a descriptor of GET /api/v1/providers, " +
        "whose credential fields `config` must hold (422 naming `body.config.<field>`). A " +
        "descriptor that says how is checked with the vendor before anything is stored (422 " +
        "on `body.config` when the vendor refuses). Names are unique per project regardless " +
        "of case.",
      access: UserRole.editor,
      body: CreateCredentialBody,
      responses: {
        201: answer("The credential", CredentialAnswer),
        400: "The name is taken in this project",
      },
      async handler({ c, body, params }) {
        const row = await createCredential(deps, params.id, {
          name: body.name,
          provider: body.provider,
          config: body.config,
        });
        return c.json(present(row), 201);
      },
    }),
    defineRoute({
      method: "get",
      path: `${CREDENTIALS}/:cid`,
      tag: "credentials",
      summary: "Read a credential",
      description: SECRET_NOTE,
      access: UserRole.viewer,
      responses: { 200: answer("The credential", CredentialAnswer) },
      async handler({ c, params }) {
        return c.json(present(await getCredential(deps, params.id, params.cid)));
      },
    }),
    defineRoute({
      method: "patch",
      path: `${CREDENTIALS}/:cid`,
      tag: "credentials",
      summary: "Edit a credential",
      description: "`config` is merged key by key: null removes a key, and the mask " +
        "`********` keeps the stored secret. A change of the config is checked again, with " +
        "the vendor too, before it is stored. A `provider_api` credential keeps every key its " +
        "connectors' templates read (422 naming the key otherwise).",
      access: UserRole.editor,
      body: UpdateCredentialBody,
      responses: {
        200: answer("The credential", CredentialAnswer),
        400: "The name is taken in this project",
      },
      async handler({ c, body, params }) {
        const row = await updateCredential(deps, params.id, params.cid, {
          name: body.name,
          config: body.config,
        });
        return c.json(present(row));
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
