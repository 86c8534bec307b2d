/**
 * The command-line arguments of a benchmark entry that runs under Deno or Node alike
 * (core-entry.ts, feed-decode.ts): `Deno.args`, else `process.argv` past the script.
 */
export function entryArguments(): string[] {
  const scope = globalThis as unknown as {
    Deno?: { args: string[] };
    process?: { argv: string[] };
  };
  return scope.Deno?.args ?? scope.process?.argv.slice(2) ?? [];
}
