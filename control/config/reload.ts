/**
 * The api's configuration file (OCTOPROX_CONFIG_FILE): read and applied at start, on SIGHUP and
 * on `POST /api/v1/config/reload`. A file that does not read or fails a rule changes nothing:
 * every problem is logged, and the call's answer lists them; the configuration stays as it was.
 * Its `${ENV}` and `file:` references are read in the api's environment, relative `file:` paths
 * from the file's folder.
 */
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { errorText, ValidationError } from "../../shared/errors.ts";
import type { ControlDeps } from "../core/deps.ts";
import { applyConfig, type ConfigOutcome } from "./apply.ts";
import { asActor } from "../../db/actor.ts";
import { parseConfigFile } from "./file.ts";

export interface ReloadOutcome extends ConfigOutcome {
  file: string;
}

/** Applies the api's file; undefined when the api has none. Throws ValidationError for a bad one. */
export function reloadConfigFile(
  deps: ControlDeps,
  reason: "start" | "sighup" | "api",
): Promise<ReloadOutcome> | undefined {
  const file = deps.settings.configFile;
  if (file === undefined) return undefined;
  return (async () => {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (error) {
      const issues = [{ field: "", message: `cannot read ${file}: ${errorText(error)}` }];
      deps.logger.error({ file, reason, issues }, "Configuration file refused; nothing changed");
      throw new ValidationError(issues);
    }
    const read = parseConfigFile(text, { baseDir: dirname(file) });
    if (!read.ok) {
      deps.logger.error(
        { file, reason, issues: read.issues },
        "Configuration file refused; nothing changed",
      );
      throw new ValidationError(read.issues);
    }
    try {
      const apply = () => applyConfig(deps, read.config, { prune: deps.settings.configPrune });
      // Asked through the api, the caller is the writer; at start or on SIGHUP, the file is.
      const outcome = reason === "api" ? await apply() : await asActor({
        kind: "system",
        id: null,
        name: "configuration file",
        user: null,
        address: null,
        via: "config",
        request: `${reason === "start" ? "start" : "SIGHUP"}: ${file}`,
      }, apply);
      deps.logger.info(
        { file, reason, changes: outcome.changes.length, fingerprint: outcome.fingerprint },
        outcome.changes.length === 0
          ? "Configuration file unchanged"
          : "Configuration file applied",
      );
      return {
        file,
        fingerprint: outcome.fingerprint,
        changes: outcome.changes,
        unchanged: outcome.unchanged,
      };
    } catch (error) {
      if (!(error instanceof ValidationError)) {
        deps.logger.error(
          { file, reason, error: errorText(error) },
          "Configuration file not applied; nothing changed",
        );
        throw error;
      }
      // The apply's rules name paths under `config.`; the file's reader names them bare.
      const issues = error.issues.map((issue) => {
        const field = issue.field.replace(/^config\./, "");
        return { field, message: issue.message, line: read.lineOf(field) };
      });
      deps.logger.error({ file, reason, issues }, "Configuration file refused; nothing changed");
      throw new ValidationError(issues);
    }
  })();
}
