/**
 * The Lua script loader both runtimes share. Scripts live one per file in shared/lua, as BullMQ
 * keeps them, with a header naming their KEYS, ARGV and reply; the header is read here, so the key
 * count a call passes can never drift from the script. Each runtime reads the files its own way
 * (the control plane with node:fs, the gateway imports them as text under Deno, the tests read
 * them with node:fs) and hands the text here. Calls go through EVALSHA, falling back to EVAL when
 * Redis has lost its script cache (a restart), so a call costs one round trip as a rule.
 *
 * Web-standard (`crypto.subtle`, `TextEncoder`), so Deno and Node both run it.
 */

export interface ScriptSource {
  name: string;
  /**
   * The keys every call passes; undefined for a script whose header ends its keys with a range
   * (`-- KEYS[3 ..]`), which takes as many as a call gives, at least `minKeys`.
   */
  numberOfKeys: number | undefined;
  minKeys: number;
  lua: string;
}

/**
 * Reads a script's header: its key count is the number of `-- KEYS[n]` lines, or open-ended
 * when one names a range (`-- KEYS[3 ..]`, `-- KEYS[2 .. 1+k]`). A script without a
 * `-- Reply:` line is refused.
 */
export function parseScript(name: string, lua: string): ScriptSource {
  const header = lua.split("\n").filter((line) => line.startsWith("--"));
  const keyLines = header.filter((line) => /^--\s*KEYS\[\d+/.test(line));
  const open = keyLines.some((line) => /^--\s*KEYS\[[^\]]*\.\./.test(line));
  if (!header.some((line) => /^--\s*Reply:/.test(line))) {
    throw new Error(`Lua script ${name} has no "-- Reply:" line in its header`);
  }
  const fixed = keyLines.filter((line) => !/^--\s*KEYS\[[^\]]*\.\./.test(line)).length;
  return { name, numberOfKeys: open ? undefined : keyLines.length, minKeys: fixed, lua };
}

export interface LuaScript {
  readonly name: string;
  readonly lua: string;
  /** Hex SHA-1 of the source, what EVALSHA names it by. */
  readonly sha1: string;
}

/** The two commands a script call needs: ioredis's client and the gateway's HTTP transport. */
export interface ScriptClient {
  evalsha(sha1: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(lua: string, numberOfKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
}

async function sha1Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * Checks the header (`parseScript`; a script that names no KEYS is refused too) and names the
 * source by its digest, for `runScript`.
 */
export async function registerScript(name: string, lua: string): Promise<LuaScript> {
  const source = parseScript(name, lua);
  if (source.minKeys === 0 && source.numberOfKeys === 0) {
    throw new Error(`Lua script ${name} names no KEYS in its header`);
  }
  return { name, lua, sha1: await sha1Hex(lua) };
}

/**
 * Redis's NOSCRIPT reply, as ioredis words it (the reply itself) and as the HTTP transport does
 * (`@upstash/redis` puts "Command failed: " before a pipelined command's reply).
 */
function isNoScript(error: unknown): boolean {
  return error instanceof Error && /(^|: )NOSCRIPT\b/.test(error.message);
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
