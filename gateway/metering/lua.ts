/**
 * The gateway's script sources under Deno (metering's, the rate limiter's window, the project
 * request-rate lease). Imported
 * as text, not read with Deno.readTextFile: the gateway runs without file access
 * (scripts/gateway-command.ts), and `deno compile --bundle` embeds an imported file in the binary
 * where a runtime read would find nothing. The tests read the same files with node:fs
 * (testkit/metering.ts).
 */
import meteringApplyLua from "../../shared/lua/metering_apply.lua" with { type: "text" };
import rateWindowLua from "../../shared/lua/rate_window.lua" with { type: "text" };
import projectRateLeaseLua from "../../shared/lua/project_rate_lease.lua" with { type: "text" };
import { type LuaScript, registerScript } from "../../shared/lua/loader.ts";

export function loadMeteringScript(): Promise<LuaScript> {
  return registerScript("metering_apply", meteringApplyLua);
}

export function loadRateWindowScript(): Promise<LuaScript> {
  return registerScript("rate_window", rateWindowLua);
}

export function loadProjectRateScript(): Promise<LuaScript> {
  return registerScript("project_rate_lease", projectRateLeaseLua);
}
