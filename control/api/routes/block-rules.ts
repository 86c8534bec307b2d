/**
 * The shipped block rules (shared/blocking/rules.ts `PRESETS`): what a project's `block_rules`
 * can use by name (`{"preset": "cloudflare-challenge"}`) or copy into rules of its own.
 */
import { UserRole } from "../../../shared/roles.ts";
import { PRESET_NAMES, PRESETS } from "../../../shared/blocking/rules.ts";
import { answer, defineRoute, type Route } from "../registry.ts";
import { PresetListAnswer } from "../answers/projects.ts";

export const BLOCK_RULE_PRESETS_PATH = "/api/v1/block-rules/presets";

export function blockRuleRoutes(): Route[] {
  return [
    defineRoute({
      method: "get",
      path: BLOCK_RULE_PRESETS_PATH,
      tag: "projects",
      summary: "The shipped block rules",
      description: "Each preset's name, what it matches (status codes, a header, body " +
        "markers) and the verdict and cool-down it gives. A project uses one by naming it in " +
        "`block_rules` (`mode`, `domains` and `cool_down_seconds` may be set beside it), or " +
        "copies its fields into a rule of its own to change them.",
      access: UserRole.viewer,
      responses: {
        200: answer("The presets, in the order shipped", PresetListAnswer),
      },
      handler({ c }) {
        return c.json(PRESET_NAMES.map((name) => ({ name, ...PRESETS[name] })));
      },
    }),
  ];
}
