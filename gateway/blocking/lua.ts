/**
 * Escalation's script source under Deno, imported as text as gateway/metering/lua.ts explains
 * (the gateway runs without file access; a compiled binary embeds what it imports). The tests
 * read the same file with node:fs (testkit/metering.ts `loadScriptNode`).
 */
import escalationReportLua from "../../shared/lua/escalation_report.lua" with { type: "text" };
import { type LuaScript, registerScript } from "../../shared/lua/loader.ts";

export function loadEscalationScript(): Promise<LuaScript> {
  return registerScript("escalation_report", escalationReportLua);
}
