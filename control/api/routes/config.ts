/** Configuration as code: export, diff, apply and the reload of the api's own file. */
import { hasRole } from "../auth.ts";
import { checkDirectRules } from "../../model/domain-rules.ts";
import type { DomainRule } from "../../../shared/routing/domain-rules.ts";
import * as v from "valibot";
import { UserRole } from "../../../shared/roles.ts";
import { ValidationError } from "../../../shared/errors.ts";
import { applyConfig, diffConfig, exportStoredConfig } from "../../config/apply.ts";
import { checkConfig } from "../../config/file.ts";
import { reloadConfigFile } from "../../config/reload.ts";
import type { ApiDeps } from "../deps.ts";
import { defineRoute, type Route } from "../registry.ts";
import { booleanField } from "../../model/common.ts";

const CONFIG = "/api/v1/config";

/** A configuration of 100,000 proxies is about 5 MB of JSON. */
const MAX_CONFIG_BYTES = 64 * 1024 * 1024;

const DiffBody = v.strictObject({
  config: v.unknown(),
  prune: v.optional(booleanField, false),
});

const ApplyBody = v.strictObject({
  config: v.unknown(),
  prune: v.optional(booleanField, false),
  base_fingerprint: v.optional(
    v.pipe(v.string("must be text"), v.regex(/^[0-9a-f]{64}$/, "must be a fingerprint")),
  ),
});

const DOCUMENT_NOTE = "`config` is a configuration document (`version: 1`, `projects` with " +
  "their `credentials`, `connectors` and each connector's `proxies`), entries read by the same " +
  "rules as the API's bodies; every error is a 422 naming its path under `config.`. Without " +
  "`prune`, what the document does not name is kept.";

/** Reads the `config` field by the document's rules, or a 422 naming every field at fault. */
function documentOf(input: unknown) {
  const checked = checkConfig(input, "config");
  if (!checked.ok) throw new ValidationError(checked.issues);
  return checked.config;
}

/** A file's `direct` rules are an admin's to write, as the api's (a project's stored ones pass). */
async function checkDocumentDirectRules(
  deps: ApiDeps,
  document: ReturnType<typeof documentOf>,
  admin: boolean,
): Promise<void> {
  if (admin) return;
  const withDirect = document.projects.filter((project) =>
    (project.domain_rules as DomainRule[] | undefined)?.some((rule) => rule.action === "direct")
  );
  if (withDirect.length === 0) return;
  const rows = await deps.database.sql<{ name: string; domain_rules: DomainRule[] }[]>`
    select name, domain_rules from projects`;
  const stored = new Map(rows.map((row) => [row.name.toLowerCase(), row.domain_rules]));
  for (const project of withDirect) {
    const index = document.projects.indexOf(project);
    checkDirectRules(
      project.domain_rules as DomainRule[],
      stored.get(String(project.name).toLowerCase()),
      false,
      `config.projects.${index}.domain_rules`,
    );
  }
}

export function configRoutes(deps: ApiDeps): Route[] {
  return [
    defineRoute({
      method: "get",
      path: CONFIG,
      tag: "config",
      summary: "Export the configuration",
      description: "Every project with its credentials, connectors and proxies as one " +
        "configuration document, secrets left out (an apply keeps stored secrets a document " +
        "leaves out), with the fingerprint to apply against.",
      access: UserRole.viewer,
      responses: { 200: "`{fingerprint, config}`" },
      async handler({ c }) {
        return c.json(await exportStoredConfig(deps));
      },
    }),
    defineRoute({
      method: "post",
      path: `${CONFIG}/diff`,
      tag: "config",
      summary: "Show what applying a configuration would change",
      description: `${DOCUMENT_NOTE} Answers the changes (create, update with its fields, ` +
        "delete) and the current configuration's fingerprint, which an apply may carry as " +
        "`base_fingerprint`.",
      access: UserRole.editor,
      body: DiffBody,
      maxBodyBytes: MAX_CONFIG_BYTES,
      responses: { 200: "`{fingerprint, changes, unchanged}`" },
      async handler({ c, body }) {
        return c.json(await diffConfig(deps, documentOf(body.config), { prune: body.prune }));
      },
    }),
    defineRoute({
      method: "post",
      path: `${CONFIG}/apply`,
      tag: "config",
      summary: "Apply a configuration",
      description: `${DOCUMENT_NOTE} Everything is written in one transaction and announced ` +
        "by one change entry; a document that changes nothing writes nothing. With " +
        "`base_fingerprint`, an apply whose base moved meanwhile is refused (409) with the " +
        "fresh diff in `detail`.",
      access: UserRole.editor,
      body: ApplyBody,
      maxBodyBytes: MAX_CONFIG_BYTES,
      responses: {
        200: "`{fingerprint, changes, unchanged}`: the fingerprint after the apply",
        409: "The configuration changed since `base_fingerprint`; nothing applied",
      },
      async handler({ c, body, principal }) {
        const document = documentOf(body.config);
        await checkDocumentDirectRules(deps, document, hasRole(principal, UserRole.admin));
        const outcome = await applyConfig(deps, document, {
          prune: body.prune,
          baseFingerprint: body.base_fingerprint,
        });
        const { applied, ...answer } = outcome;
        if (!applied) {
          return c.json({
            error: "The configuration changed since the diff this apply was made from; " +
              "nothing was applied. Read the fresh diff and apply again.",
            detail: answer,
          }, 409);
        }
        return c.json(answer);
      },
    }),
    defineRoute({
      method: "post",
      path: `${CONFIG}/reload`,
      tag: "config",
      summary: "Reload the api's configuration file",
      description: "The api re-reads its OCTOPROX_CONFIG_FILE and applies it as an apply " +
        "without a base would. A file with errors changes nothing (422 listing every one, " +
        "paths in the file); 409 when the api has no OCTOPROX_CONFIG_FILE.",
      access: UserRole.admin,
      responses: {
        200: "`{file, fingerprint, changes, unchanged}`",
        409: "This api has no configuration file",
      },
      async handler({ c }) {
        const reloading = reloadConfigFile(deps, "api");
        if (reloading === undefined) {
          return c.json({
            error: "This api has no configuration file (OCTOPROX_CONFIG_FILE is not set)",
          }, 409);
        }
        return c.json(await reloading);
      },
    }),
  ];
}
