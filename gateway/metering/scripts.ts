/**
 * The gateway's Lua scripts, kept as the control plane keeps them (one file each in shared/lua,
 * a header naming KEYS, ARGV and the reply), registered from their source text. Runtime-neutral:
 * each runtime reads the file its own way (the gateway imports it as text under Deno, the tests
 * read it with node:fs) and hands the text here. Calls go through EVALSHA, falling back to EVAL
 * when Redis has lost its script cache (a restart), so a call costs one round trip as a rule.
 */

export interface LuaScript {
  readonly name: string;
  readonly lua: string;
  /** Hex SHA-1 of the source, what EVALSHA names it by. */
  readonly sha1: string;
}

/** The two commands a script call needs; ioredis's client has both. */
export interface ScriptClient {
  evalsha(sha1: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(lua: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
}

async function sha1Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** Checks the header (a script without a `-- Reply:` line is refused) and names the source. */
export async function registerScript(name: string, lua: string): Promise<LuaScript> {
  const header = lua.split("\n").filter((line) => line.startsWith("--"));
  if (!header.some((line) => /^--\s*Reply:/.test(line))) {
    throw new Error(`Lua script ${name} has no "-- Reply:" line in its header`);
  }
  if (!header.some((line) => /^--\s*KEYS\[/.test(line))) {
    throw new Error(`Lua script ${name} names no KEYS in its header`);
  }
  return { name, lua, sha1: await sha1Hex(lua) };
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/** Runs a script by its digest, sending the source only when Redis does not know it. */
export async function runScript(
  client: ScriptClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  try {
    return await client.evalsha(script.sha1, keys.length, ...keys, ...args);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return await client.eval(script.lua, keys.length, ...keys, ...args);
  }
}
