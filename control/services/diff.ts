/**
 * Which fields of a patch differ from the row it edits: the write saves only those, and a patch
 * that changes nothing saves and announces nothing. Values compare by their JSON, so arrays and
 * config objects compare by content.
 */
export function changedFields<TRow extends object, TPatch extends Partial<TRow>>(
  current: TRow,
  patch: TPatch,
): Partial<TPatch> | undefined {
  const changes: Partial<TPatch> = {};
  let any = false;
  for (const key of Object.keys(patch) as (keyof TPatch & keyof TRow)[]) {
    const next = patch[key];
    if (next === undefined) continue;
    if (sameValue(current[key], next)) continue;
    changes[key] = next;
    any = true;
  }
  return any ? changes : undefined;
}

/** Whether two stored values are the same: objects and arrays by content, keys in any order. */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a instanceof Date || b instanceof Date) return false;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  return stableJson(a) === stableJson(b);
}

/** JSON with object keys sorted, so `{a, b}` and `{b, a}` compare equal. */
function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) => {
    if (inner === null || typeof inner !== "object" || Array.isArray(inner)) return inner;
    return Object.fromEntries(
      Object.entries(inner as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)),
    );
  });
}

/** The fields of a partial that are set: `{...defaults, ...definedOnly(input)}` keeps defaults. */
export function definedOnly<T extends object>(input: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(input).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}
