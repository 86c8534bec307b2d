/**
 * The sightings' script source under Deno, imported as text as metering's are
 * (gateway/metering/lua.ts says why); the tests read the same file with node:fs.
 */
import batchAppendLua from "../../shared/lua/batch_append.lua" with { type: "text" };
import { type LuaScript, registerScript } from "../../shared/lua/loader.ts";

export function loadSightingsScript(): Promise<LuaScript> {
  return registerScript("batch_append", batchAppendLua);
}
