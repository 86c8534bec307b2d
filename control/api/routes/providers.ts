/**
 * The provider catalogue (every descriptor with its fields, so the dashboard and the CLI draw
 * their forms from it) and the admin's custom descriptors.
 */
import * as v from "valibot";
import { egressHosts } from "../../../shared/vendors/descriptor.ts";
import { typeRenders } from "../../../shared/vendors/provider.ts";
import type { RegisteredDescriptor } from "../../../shared/vendors/registry.ts";
import { UserRole } from "../../../shared/roles.ts";
import {
  createDescriptor,
  deleteDescriptor,
  descriptorHistory,
  getProvider,
  listProviders,
  updateDescriptor,
} from "../../vendors/descriptors.ts";
import type { ApiDeps } from "../deps.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import {
  ProviderAnswer,
  ProviderDeletedAnswer,
  ProviderDetailAnswer,
  ProviderHistoryAnswer,
  ProviderListAnswer,
} from "../answers/providers.ts";

const PROVIDERS = "/api/v1/providers";

const SaveBody = v.strictObject({
  /** The descriptor: an object, or its YAML or JSON text. */
  descriptor: v.union(
    [v.record(v.string(), v.unknown()), v.pipe(v.string(), v.maxLength(256 * 1024))],
    "must be a descriptor object, or its YAML or JSON text",
  ),
  confirm_hosts: v.optional(
    v.pipe(
      v.array(
        // 253: the longest DNS name.
        v.pipe(v.string("must be host names"), v.maxLength(253, "must be a host name")),
        "must be a list of host names",
      ),
      v.maxLength(100),
    ),
    [],
  ),
});

/** A descriptor as the catalogue answers it: its fields and types, with what each renders. */
export function presentProvider(entry: RegisteredDescriptor) {
  const d = entry.descriptor;
  return {
    id: d.id,
    name: d.name,
    description: d.description,
    docs_url: d.docs_url ?? null,
    beta: d.beta,
    source: entry.source,
    version: entry.version,
    credential_fields: d.credential_fields,
    connector_fields: d.connector_fields,
    proxy_types: d.proxy_types.map((t) => {
      const renders = typeRenders(t);
      return {
        id: t.id,
        name: t.name,
        mode: t.mode,
        scheme: t.scheme,
        host: t.host ?? null,
        port: t.port ?? null,
        dynamic_sessions: t.dynamic_sessions,
        countries: t.countries ?? null,
        state_countries: t.state_countries ?? null,
        city_countries: t.city_countries ?? null,
        session_time: t.session_time ?? null,
        max_slots: t.max_slots,
        renders: {
          country: renders.country,
          state: renders.state,
          city: renders.city,
          session_time: renders.sessionTime,
        },
      };
    }),
    egress_hosts: egressHosts(d),
    checks_credentials: d.validation !== undefined || d.auth !== undefined,
  };
}

export function providerRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: PROVIDERS,
      tag: "providers",
      summary: "List the provider catalogue",
      description: "Every descriptor this install knows (`source`: builtin, file from " +
        "OCTOPROX_PROVIDERS_DIR, or custom), with its credential and connector fields and its " +
        "proxy types: mode (session, port, list), dynamic sessions, the countries it serves and " +
        "what its templates render of a request (country, state, city, session time).",
      access: UserRole.viewer,
      responses: { 200: answer("The descriptors, by id", ProviderListAnswer) },
      async handler({ c }) {
        return c.json((await listProviders(deps)).map(presentProvider));
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROVIDERS}/:pid`,
      nameParams: ["pid"],
      tag: "providers",
      summary: "Read a descriptor",
      description: "The catalogue entry with the whole `descriptor` as stored.",
      access: UserRole.viewer,
      responses: { 200: answer("The descriptor", ProviderDetailAnswer) },
      async handler({ c, params }) {
        const entry = await getProvider(deps, params.pid);
        return c.json({ ...presentProvider(entry), descriptor: entry.descriptor });
      },
    }),
    defineRoute({
      method: "post",
      path: PROVIDERS,
      tag: "providers",
      summary: "Store a custom descriptor",
      description: "Admins only. `descriptor` is an object or YAML/JSON text, validated whole " +
        "(422 naming the field). Every host its calls reach must pass the egress rules (HTTPS, " +
        "no private, loopback, link-local or metadata address, no local names: 422) and be " +
        "listed in `confirm_hosts` (409 with `unconfirmed_hosts` otherwise). Audited and " +
        "versioned; a shipped or folder descriptor's id cannot be taken.",
      access: UserRole.admin,
      body: SaveBody,
      responses: {
        201: answer("The descriptor, version 1", ProviderAnswer),
        400: "A custom descriptor has this id",
      },
      async handler({ c, body, principal }) {
        const entry = await createDescriptor(deps, {
          descriptor: body.descriptor,
          confirmHosts: body.confirm_hosts,
          actor: principal.username,
        });
        return c.json(presentProvider(entry), 201);
      },
    }),
    defineRoute({
      method: "put",
      path: `${PROVIDERS}/:pid`,
      nameParams: ["pid"],
      tag: "providers",
      summary: "Replace a custom descriptor",
      description: "Admins only; as the create, and the id must stay. Its version goes up by " +
        "one; connectors using it are compiled with the new version at once.",
      access: UserRole.admin,
      body: SaveBody,
      responses: { 200: answer("The descriptor, with its new version", ProviderAnswer) },
      async handler({ c, body, params, principal }) {
        const entry = await updateDescriptor(deps, params.pid, {
          descriptor: body.descriptor,
          confirmHosts: body.confirm_hosts,
          actor: principal.username,
        });
        return c.json(presentProvider(entry));
      },
    }),
    defineRoute({
      method: "delete",
      path: `${PROVIDERS}/:pid`,
      nameParams: ["pid"],
      tag: "providers",
      summary: "Delete a custom descriptor",
      description: "Admins only. Connectors that use it stay, left out of the feed, until it " +
        "is stored again: `orphaned_connectors` names them.",
      access: UserRole.admin,
      responses: { 200: answer("Deleted", ProviderDeletedAnswer) },
      async handler({ c, params, principal }) {
        const { orphaned } = await deleteDescriptor(deps, params.pid, principal.username);
        return c.json({ deleted: params.pid, orphaned_connectors: orphaned });
      },
    }),
    defineRoute({
      method: "get",
      path: `${PROVIDERS}/:pid/history`,
      nameParams: ["pid"],
      tag: "providers",
      summary: "A custom descriptor's audit log",
      access: UserRole.admin,
      responses: {
        200: answer("Every save and delete, newest first, with who did it", ProviderHistoryAnswer),
      },
      async handler({ c, params }) {
        const rows = await descriptorHistory(deps, params.pid);
        return c.json(rows.map((row) => ({
          version: row.version,
          action: row.action,
          actor: row.actor,
          at: row.at,
          descriptor: row.document,
        })));
      },
    }),
  ];
}
