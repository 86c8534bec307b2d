/**
 * The tunnel plane's script sources under Deno, imported as text like metering's
 * (gateway/metering/lua.ts says why).
 */
import fakeIpAssignLua from "../../shared/lua/fake_ip_assign.lua" with { type: "text" };
import fakeIpLookupLua from "../../shared/lua/fake_ip_lookup.lua" with { type: "text" };
import { type LuaScript, registerScript } from "../../shared/lua/loader.ts";

export async function loadFakeIpScripts(): Promise<{ assign: LuaScript; lookup: LuaScript }> {
  const [assign, lookup] = await Promise.all([
    registerScript("fake_ip_assign", fakeIpAssignLua),
    registerScript("fake_ip_lookup", fakeIpLookupLua),
  ]);
  return { assign, lookup };
}
