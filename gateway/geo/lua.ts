/**
 * The sightings' script source under Deno, imported as text as metering's are
 * (gateway/metering/lua.ts says why); the tests read the same file with node:fs.
 */
import sightingsAppendLua from "../../shared/lua/sightings_append.lua" with { type: "text" };
import { type LuaScript, registerScript } from "../../shared/lua/loader.ts";

export function loadSightingsScript(): Promise<LuaScript> {
  return registerScript("sightings_append", sightingsAppendLua);
}
